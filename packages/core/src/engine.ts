/*
 * The decision engine: one call of a limiter over the states of its rules,
 * as a pure function. It composes the algorithms (algorithms/) and blocks
 * (algorithms/block.ts) all or nothing, and says what each rule decided and
 * which states to write. A store over a transactional key-value system (the
 * SQL stores, Durable Objects, the example in docs/writing-a-store.md) reads
 * the call's states, runs `evaluate`, and writes what it returns, atomically;
 * `createStore` in store.ts does exactly that over a `transact` of its backend.
 *
 * The reference model of the conformance suite (test-support/reference.ts)
 * is written apart from this file, from the contract; every store is held
 * to it.
 */
import { applyBlock, type Block, blockLeft, blockStartedAt, manualBlock, startBlock } from './algorithms/block.js';
import { ALGORITHMS, type RuleState, refundStep, releaseStep, step, type Verdict } from './algorithms/index.js';
import type { CompiledRule } from './rules.js';
import { admittedDecision, unchangedDecision } from './stores/rule-decisions.js';
import type { RuleDecision } from './stores/types.js';

/**
 * One key's state under one rule, as a store keeps it: the algorithm's
 * state and when it ends, and the key's block under the rule while it is
 * remembered. A key can be blocked with nothing counted (`state` null), but
 * is never kept with neither.
 */
export interface Entry {
  /** The algorithm's state, or null: only the block is kept. */
  readonly state: RuleState;
  /** When the state ends (ms, on the clock that decides); 0 when there is none. */
  readonly expiresAt: number;
  /** The key's block under the rule, while it is remembered (see algorithms/block.ts). */
  readonly block?: Block;
}

/**
 * What a call does. `consume`, `peek`, `refund`, `release` and `reset` are
 * the limiter's. A store that spreads the rules of one call over several
 * atomic units (Redis Cluster slots, Durable Objects) also needs `deny` (a
 * call another unit denied: it records nothing, but starts the blocks of the
 * rules whose own numbers deny it, as one unit holding every rule would) and
 * `undo` (a consume this unit admitted and another denied: a refund and a
 * release at once). `block` and `unblock` are the limiter's blocks by hand.
 */
export type Operation = 'consume' | 'peek' | 'deny' | 'refund' | 'release' | 'undo' | 'reset' | 'block' | 'unblock';

/** One call, as the engine takes it. */
export interface Call {
  readonly op: Operation;
  /** The rules of the call, one per state. */
  readonly rules: readonly CompiledRule[];
  /** The clock that decides (ms). */
  readonly now: number;
  /** Units the call takes (consume, deny) or gives back (refund, undo); the block's ms (block); 1 for the others. */
  readonly cost: number;
  /** The lease a consume takes under concurrency rules, or the one a release or undo ends; '' for none. */
  readonly leaseId: string;
}

/** What the engine decided about a call. */
export interface Outcome {
  /** consume, peek, deny: whether every rule admits the call (for deny and peek, though nothing is recorded). */
  readonly admitted: boolean;
  /** consume, peek, deny: each rule's verdict, block included, in rule order; empty for the other operations. */
  readonly verdicts: readonly Verdict[];
  /** Per rule: the entry to keep, null to forget the key, undefined to leave it as it is. */
  readonly writes: readonly (Entry | null | undefined)[];
}

/** The block an entry remembers at `now`, if any: a block is forgotten maxBlockMs after it ended. */
export const rememberedBlock = (entry: Entry | null, now: number): Block | undefined =>
  entry?.block !== undefined && now < entry.block.forgetAt ? entry.block : undefined;

/** When an entry has nothing left to keep: its state has ended and its block is forgotten. */
export const endOf = (entry: Entry): number => (entry.block === undefined ? entry.expiresAt : Math.max(entry.expiresAt, entry.block.forgetAt));

/**
 * The entry that keeps `state` until `expiresAt` (null: no state), with the
 * block `entry` remembers; a block no longer remembered is dropped as the
 * state is written, in every store alike, so that a clock that goes back
 * later finds it gone everywhere.
 */
function keep(entry: Entry | null, state: RuleState, expiresAt: number, now: number): Entry | null {
  const block = rememberedBlock(entry, now);
  if (block !== undefined) return { state, expiresAt: state === null ? 0 : expiresAt, block };
  return state === null ? null : { state, expiresAt };
}

/** The entry of a key that a denied call blocks: its state as it was (also one that has ended: a clock may go back to it), and the block. */
function blocked(entry: Entry | null, block: Block): Entry {
  return { state: entry?.state ?? null, expiresAt: entry?.state === null || entry === null ? 0 : entry.expiresAt, block };
}

/** The decision of consume, peek and deny: each rule's verdict on its state, with its block over it. */
function decide(call: Call, entries: readonly (Entry | null)[]): Outcome {
  const { op, rules, now } = call;
  const cost = op === 'peek' ? 1 : call.cost;
  const results = rules.map((rule, i) => {
    const entry = entries[i] ?? null;
    const result = step(rule, entry?.state ?? null, now, cost, call.leaseId === '' ? undefined : call.leaseId);
    const block = rememberedBlock(entry, now);
    if (block !== undefined) applyBlock(result.verdict, blockLeft(block, now), block.length, block.strike);
    return result;
  });
  const verdicts = results.map((result) => result.verdict);
  const admitted = verdicts.every((v) => v.allowed);
  const writes = new Array<Entry | null | undefined>(rules.length);
  if (admitted && op === 'consume') {
    results.forEach((result, i) => {
      writes[i] = keep(entries[i] ?? null, result.state, now + result.verdict.ttlMs, now);
    });
  } else if (!admitted && op !== 'peek') {
    // A denied call records nothing but the blocks it starts: each rule whose own numbers deny starts its own, whichever rule binds.
    rules.forEach((rule, i) => {
      const v = verdicts[i] as Verdict;
      if (rule.blockMs > 0 && startBlock(rule, v)) writes[i] = blocked(entries[i] ?? null, blockStartedAt(rule, v, now));
    });
  }
  return { admitted, verdicts, writes };
}

/** A refund of one rule: units back to its state; its block stays (only reset lifts a block). */
function refunded(rule: CompiledRule, entry: Entry | null, now: number, cost: number): Entry | null | undefined {
  if (entry === null) return undefined;
  // Only blocked: nothing to give back; a block no longer remembered is forgotten.
  if (entry.state === null) return rememberedBlock(entry, now) === undefined ? null : undefined;
  const state = refundStep(rule, entry.state, now, cost);
  // The same state back: another rule's state under this name (another grid), or leases still held.
  if (state === entry.state) return undefined;
  // A refund never makes a state last longer: its end stays.
  return keep(entry, state, entry.expiresAt, now);
}

/** A release of one concurrency rule's lease: the state ends with the last lease left. */
function released(entry: Entry | null, leaseId: string, now: number): Entry | null | undefined {
  if (entry?.state === null || entry === null) return undefined;
  const state = releaseStep(entry.state, leaseId, now);
  const last = state === null ? 0 : Math.max(0, ...(state as { expires: number[] }).expires);
  return keep(entry, state, last, now);
}

/**
 * A block by hand lifted from a rule's entry: the state stays as it stands
 * now (a refund of nothing: forgotten once it has ended).
 */
function unblocked(rule: CompiledRule, entry: Entry | null, now: number): Entry | null | undefined {
  if (entry === null || rememberedBlock(entry, now) === undefined) return undefined;
  if (entry.state === null) return null;
  const state = refundStep(rule, entry.state, now, 0);
  return state === null ? null : { state, expiresAt: entry.expiresAt };
}

/**
 * Decides one call over the entries of its rules (null: the key holds
 * nothing under that rule), in rule order. Pure: it changes nothing it is
 * given; a store writes `writes`, all of them or none, in one transaction.
 *
 * @example
 * ```ts
 * const outcome = evaluate({ op: 'consume', rules, now: Date.now(), cost: 1, leaseId: '' }, entries);
 * // outcome.admitted, outcome.verdicts, and outcome.writes to store
 * ```
 */
export function evaluate(call: Call, entries: readonly (Entry | null)[]): Outcome {
  const { op, rules, now } = call;
  if (op === 'consume' || op === 'peek' || op === 'deny') return decide(call, entries);
  if (op === 'reset') return { admitted: false, verdicts: [], writes: rules.map(() => null) };
  // By hand: every rule that can hold a block (not concurrency's leases).
  if (op === 'block') {
    const block = manualBlock(now, call.cost);
    return {
      admitted: false,
      verdicts: [],
      writes: rules.map((rule, i) => (ALGORITHMS[rule.algorithm].blocks ? blocked(entries[i] ?? null, block) : undefined)),
    };
  }
  if (op === 'unblock') return { admitted: false, verdicts: [], writes: rules.map((rule, i) => unblocked(rule, entries[i] ?? null, now)) };
  if (op !== 'refund' && op !== 'release' && op !== 'undo') throw new TypeError(`evaluate: unknown operation ${String(op)}`);
  const writes = rules.map((rule, i) => {
    let entry: Entry | null = entries[i] ?? null;
    let write: Entry | null | undefined;
    if (op !== 'release') {
      write = refunded(rule, entry, now, call.cost);
      if (write !== undefined) entry = write;
    }
    if (op !== 'refund' && rule.algorithm === 'concurrency') {
      const after = released(entry, call.leaseId, now);
      if (after !== undefined) write = after;
    }
    return write;
  });
  return { admitted: false, verdicts: [], writes };
}

/**
 * Each rule's decision from an outcome, as every store reports it: an
 * admitted consume reports the state after it; a peek, a denied call (and
 * a `deny`) the state now, with the blocks that hold the key or that this
 * call started.
 */
export function decisionsOf(call: Pick<Call, 'op' | 'rules'>, outcome: Pick<Outcome, 'admitted' | 'verdicts'>): RuleDecision[] {
  const recorded = call.op === 'consume' && outcome.admitted;
  return call.rules.map((rule, i) => {
    const v = outcome.verdicts[i] as Verdict;
    return recorded ? admittedDecision(rule, v) : unchangedDecision(rule, v, call.op === 'peek');
  });
}
