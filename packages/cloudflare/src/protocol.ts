/*
 * What DurableObjectStore and FloodgateDurableObject say to each other: one
 * POST per call, a JSON body, a JSON answer.
 *
 *   call    { op, now, cost, lease, rules: [[rule options, storage key], ...], undo? }
 *           now: the limiter's clock (clock: 'client'), or null: the object's own
 *   answer  consume, peek, deny: { admitted: 0 | 1, verdicts: [per rule, see encodeVerdict] }
 *           the other operations: {}
 *
 * The object decides with the pure algorithms of @floodgate/core and answers
 * each rule's verdict; the store turns verdicts into decisions exactly as
 * MemoryStore does. Rules travel as their options and are compiled again in
 * the object (validated, cached), so the object holds no configuration of
 * its own and a hot update of the rules reaches it with the next call.
 */
import type { RuleOptions } from '@floodgate/core';
import type { CompiledRule, Verdict } from '@floodgate/core/store';
import { optionsOf } from '@floodgate/core/store';

/**
 * The operations of an object. `undo`: a refund and a release at once (a
 * call admitted by this object and denied by another). `deny`: a call denied
 * by another object before this one was asked: it records nothing, but
 * starts the blocks of the rules whose own numbers deny it, as one object
 * holding every rule would.
 */
export type Operation = 'consume' | 'peek' | 'deny' | 'refund' | 'release' | 'undo' | 'reset' | 'block' | 'unblock';

export interface Call {
  readonly op: Operation;
  /** The clock of the call, or null: the object reads its own. */
  readonly now: number | null;
  readonly cost: number;
  /** The lease id of a call with concurrency rules, else ''. */
  readonly lease: string;
  /** Per rule of the call that this object holds: its options and the key of its state in the object's storage. */
  readonly rules: readonly (readonly [RuleOptions, string])[];
  /**
   * A consume that other objects may still deny names itself, so that its
   * undo can put back the very states it replaced (when no other call has
   * changed them since), not states refunded at a later time.
   */
  readonly undo?: string;
}

export interface Answer {
  /** consume, peek and deny: 1 when every rule admits the call (deny: though it records nothing). */
  readonly admitted?: 0 | 1;
  /** consume, peek and deny: per rule, in the order of the call (see encodeVerdict). */
  readonly verdicts?: readonly (readonly number[])[];
}

/**
 * A compiled rule as the options that compile to it again (optionsOf in
 * @floodgate/core/store): they travel with each call, and the object
 * compiles them again, validated.
 */
export const ruleOptionsOf = (rule: CompiledRule): RuleOptions => optionsOf(rule);

/**
 * A verdict as numbers: [allowed, retryAfterMs (-1: never), delayMs,
 * remaining, resetMs, remainingNow, resetMsNow, blockLeftMs, blockMs, strike,
 * blockStarted]. The block fields are the object's own (algorithms/block.ts
 * of core): the block that holds the key, or the last one remembered.
 */
export function encodeVerdict(v: Verdict): number[] {
  return [
    v.allowed ? 1 : 0,
    v.retryAfterMs === Number.POSITIVE_INFINITY ? -1 : v.retryAfterMs,
    v.delayMs,
    v.remaining,
    v.resetMs,
    v.remainingNow,
    v.resetMsNow,
    v.blockLeftMs,
    v.blockMs,
    v.strike,
    v.blockStarted ? 1 : 0,
  ];
}

/** The verdict numbers of one rule, checked, or undefined when they are not what an object answers. */
export function decodeVerdict(numbers: unknown): Omit<Verdict, 'ttlMs'> | undefined {
  if (!Array.isArray(numbers) || numbers.length !== 11) return undefined;
  if (!numbers.every((n, i) => typeof n === 'number' && Number.isSafeInteger(n) && n >= (i === 1 ? -1 : 0))) return undefined;
  const [allowed, retryAfterMs, delayMs, remaining, resetMs, remainingNow, resetMsNow, blockLeftMs, blockMs, strike, blockStarted] = numbers as number[];
  if ((allowed !== 0 && allowed !== 1) || (blockStarted !== 0 && blockStarted !== 1)) return undefined;
  // A block as an object keeps it: no longer than its length, with a length exactly when it has a strike or holds (one by
  // hand has no strike, and is forgotten as it ends); one that holds denies, for as long at least.
  if ((blockLeftMs as number) > (blockMs as number) || (blockMs as number) > 0 !== ((strike as number) > 0 || (blockLeftMs as number) > 0)) return undefined;
  if ((blockLeftMs as number) > 0 && (allowed === 1 || (retryAfterMs !== -1 && (retryAfterMs as number) < (blockLeftMs as number)))) return undefined;
  if (blockStarted === 1 && blockLeftMs !== blockMs) return undefined;
  return {
    allowed: allowed === 1,
    retryAfterMs: retryAfterMs === -1 ? Number.POSITIVE_INFINITY : (retryAfterMs as number),
    delayMs: delayMs as number,
    remaining: remaining as number,
    resetMs: resetMs as number,
    remainingNow: remainingNow as number,
    resetMsNow: resetMsNow as number,
    blockLeftMs: blockLeftMs as number,
    blockMs: blockMs as number,
    strike: strike as number,
    blockStarted: blockStarted === 1,
  };
}

/** The URL a call is posted to: a Durable Object stub takes any URL; this one names the operation in logs. */
export const callUrl = (op: Operation): string => `https://floodgate.internal/${op}`;
