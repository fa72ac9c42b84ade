import { applyBlock, type Block, blockLeft, blockStartedAt, manualBlock, startBlock } from '../algorithms/block.js';
import {
  concurrency,
  createLog,
  createVerdict,
  type LeaseState,
  type LogState,
  type StateVector,
  slidingLog,
  type VectorAlgorithm,
  type Verdict,
} from '../algorithms/index.js';
import { ALGORITHMS } from '../algorithms/registry.js';
import { describe, ErrorCodes, FloodgateError } from '../errors.js';
import type { CompiledRule } from '../rules.js';
import { MAX_TIMER_MS } from '../sleep.js';
import { MemoryRecords } from './memory-records.js';
import { admittedDecision, unchangedDecision } from './rule-decisions.js';
import { keyOfRule, type RuleDecision, type RuleSet, type Store, type StoreKeys, type StoreRecords } from './types.js';

export interface MemoryStoreOptions {
  /**
   * Most keys kept per rule. When a new key arrives at the bound, the least
   * recently used key is forgotten (it starts over with a full allowance).
   * @defaultValue 1_000_000
   */
  maxKeys?: number;
  /** How often the sweeper drops expired state, in ms. @defaultValue 5_000 */
  sweepIntervalMs?: number;
}

/** Rule sets whose tables a store finds without a lookup: a limiter's own, and a few plans. */
const RECENT_RULE_SETS = 4;

/** Entries the sweeper looks at per table per tick: bounds the pause on a large store. */
const SWEEP_BUDGET = 20_000;

/** Where a slot's numbers start in `Table.slots`: its expiry, then the algorithm's state. */
const EXPIRES_AT = 0;
const STATE = 1;

/** A key's block, and whether its slot holds no algorithm state beside it (a key can be blocked with nothing counted). */
interface HeldBlock extends Block {
  stateless: boolean;
}

/**
 * The keys of one rule: a Map from key to a slot, and each slot's numbers side
 * by side in one typed array (its expiry, then the algorithm's state), so a
 * key costs a Map entry, a few numbers and a bit, not an object, and a
 * decision reads one stretch of memory. A call decides (`decide`, which writes
 * the state the call would leave into a buffer it is given) and, when every
 * rule of the call admits it, commits (`commit`, which stores that state).
 * The few keys blocked lately (blockMs) also have an entry in `blocks`; a
 * slot's expiry covers its block until the block is forgotten.
 */
abstract class Table {
  readonly index = new Map<string, number>();
  /** Blocks by slot: only keys blocked lately have one. */
  private readonly blocks = new Map<number, HeldBlock>();
  protected capacity = 0;
  protected slots = new Float64Array(0);
  /** Per slot, one bit: whether its key was used since the eviction hand last passed it (see evictOldest). */
  private referenced = new Int32Array(0);
  /** Numbers per slot. */
  protected readonly stride: number;
  private readonly freeSlots: number[] = [];
  private used = 0;
  private cursor: Iterator<[string, number]> | undefined;
  /** Where the next eviction looks for the oldest entry (see evictOldest). */
  private evictions: Iterator<[string, number]> | undefined;
  /** Whether a call used the table since the sweeper last looked (see MemoryStore.sweep). */
  touched = true;
  /** The clock of the limiter that used the table last: the sweeper's "now". */
  now: () => number = () => 0;
  /** Set once the store dropped the table: the rule sets that hold it look it up again. */
  dropped = false;

  constructor(
    private readonly maxKeys: number,
    stateSize = 0,
  ) {
    this.stride = STATE + stateSize;
  }

  /** The key's slot, or -1. Marks the key as used. */
  find(key: string): number {
    const slot = this.index.get(key);
    if (slot === undefined) return -1;
    const word = slot >> 5;
    this.referenced[word] = (this.referenced[word] as number) | (1 << (slot & 31));
    return slot;
  }

  /** A slot for a new key, forgetting a key not used for a while at the bound. */
  protected allocate(key: string): number {
    if (this.index.size >= this.maxKeys) this.evictOldest();
    let slot = this.freeSlots.pop();
    if (slot === undefined) {
      if (this.used === this.capacity) this.grow(Math.min(this.maxKeys, Math.max(16, this.capacity * 2)));
      slot = this.used++;
    }
    this.index.set(key, slot);
    const word = slot >> 5;
    this.referenced[word] = (this.referenced[word] as number) & ~(1 << (slot & 31));
    return slot;
  }

  /**
   * Forgets the oldest key not used since the hand last passed it (the CLOCK,
   * or second-chance, approximation of least-recently-used): the Map keeps
   * keys in the order they came; a key used since is moved to the young end
   * instead, its mark cleared. A hot key costs one bit set per use, not
   * a Map reshuffle. The hand is one iterator kept across evictions: a new
   * one would walk over every deleted entry the Map still keeps (until it
   * rehashes) to reach the first live one, O(deleted entries) per call, where
   * one kept passes each once (V8 carries live iterators over a rehash).
   */
  private evictOldest(): void {
    for (;;) {
      this.evictions ??= this.index.entries();
      const oldest = this.evictions.next();
      if (oldest.done) {
        // Only when the hand had reached the end: every entry is newer than it, and the first is the oldest.
        this.evictions = undefined;
        continue;
      }
      const [key, slot] = oldest.value;
      const word = slot >> 5;
      const bit = 1 << (slot & 31);
      if (((this.referenced[word] as number) & bit) !== 0) {
        this.referenced[word] = (this.referenced[word] as number) & ~bit;
        this.index.delete(key);
        this.index.set(key, slot);
        continue;
      }
      this.remove(key, slot);
      return;
    }
  }

  remove(key: string, slot: number): void {
    this.index.delete(key);
    this.freeSlots.push(slot);
    this.clear(slot);
    if (this.blocks.size > 0) this.blocks.delete(slot);
  }

  /** The block the slot remembers, if any (perhaps forgotten already: compare forgetAt with now). */
  private blockOf(slot: number): HeldBlock | undefined {
    return slot >= 0 && this.blocks.size > 0 ? this.blocks.get(slot) : undefined;
  }

  /**
   * Decides a call under `rule`, the key's block included; writes the state
   * the algorithm would leave into `next`. Returns the key's slot, or -1.
   */
  decide(key: string, rule: CompiledRule, now: number, cost: number, out: Verdict, next: StateVector | null): number {
    const slot = this.find(key);
    const block = this.blockOf(slot);
    this.decideState(block?.stateless ? -1 : slot, rule, now, cost, out, next);
    if (block !== undefined && now < block.forgetAt) applyBlock(out, blockLeft(block, now), block.length, block.strike);
    return slot;
  }

  /** Records an admitted call decided by `decide`, at `slot` (-1: a new key). */
  commit(key: string, slot: number, rule: CompiledRule, now: number, cost: number, leaseId: string, out: Verdict, next: StateVector | null): void {
    const at = slot < 0 ? this.allocate(key) : slot;
    const block = this.blockOf(at);
    this.commitState(at, block?.stateless ? -1 : at, rule, now, cost, leaseId, next);
    this.keepWith(at, block, now, now + out.ttlMs);
  }

  /** Starts a block of the key (a denied call), beside whatever state it holds. */
  block(key: string, slot: number, block: Block): void {
    const at = slot < 0 ? this.allocate(key) : slot;
    const stateless = slot < 0 || this.blockOf(at)?.stateless === true;
    this.blocks.set(at, { ...block, stateless });
    if (stateless || (this.slots[at * this.stride + EXPIRES_AT] as number) < block.forgetAt) this.expireAt(at, block.forgetAt);
  }

  /**
   * Keeps the slot's state until `stateEnds`, and its block while it is
   * remembered; forgets a block that no longer is (as the Redis library
   * drops it when it writes the key).
   */
  private keepWith(slot: number, block: HeldBlock | undefined, now: number, stateEnds: number): void {
    if (block === undefined) {
      this.expireAt(slot, stateEnds);
    } else if (now < block.forgetAt) {
      block.stateless = false;
      this.expireAt(slot, Math.max(stateEnds, block.forgetAt));
    } else {
      this.blocks.delete(slot);
      this.expireAt(slot, stateEnds);
    }
  }

  /** Lifts the key's block while it is remembered: its state stays as it stands now (a refund of nothing: forgotten once it has ended). */
  unblock(key: string, rule: CompiledRule, now: number): void {
    const slot = this.find(key);
    const block = this.blockOf(slot);
    if (block === undefined || now >= block.forgetAt) return;
    if (block.stateless) {
      this.remove(key, slot);
      return;
    }
    const ttl = this.refundState(slot, rule, now, 0);
    if (ttl === 0) {
      this.remove(key, slot);
      return;
    }
    this.blocks.delete(slot);
    // ttl < 0: another rule's state under this name: it is kept as long as it was (only memory is at stake).
    if (ttl > 0) this.expireAt(slot, now + ttl);
  }

  /** Gives `cost` units back; a block stays as it is. */
  refund(key: string, rule: CompiledRule, now: number, cost: number): void {
    const slot = this.find(key);
    if (slot < 0) return;
    const block = this.blockOf(slot);
    if (block?.stateless) {
      // Only blocked: nothing to give back; a block no longer remembered is forgotten (as Redis forgets the key).
      if (now >= block.forgetAt) this.remove(key, slot);
      return;
    }
    const ttl = this.refundState(slot, rule, now, cost);
    if (ttl < 0) return; // another rule's state under this name: left as it is
    if (ttl > 0) {
      this.keepWith(slot, block, now, now + ttl);
    } else if (block !== undefined && now < block.forgetAt) {
      // Nothing counted any more, but the block is remembered: the key stays for it.
      this.clear(slot);
      block.stateless = true;
      this.expireAt(slot, block.forgetAt);
    } else {
      this.remove(key, slot);
    }
  }

  private grow(capacity: number): void {
    const slots = new Float64Array(capacity * this.stride);
    slots.set(this.slots);
    this.slots = slots;
    const referenced = new Int32Array(Math.ceil(capacity / 32));
    referenced.set(this.referenced);
    this.referenced = referenced;
    this.capacity = capacity;
  }

  /** Keeps the slot's state until `at` (limiter time). */
  protected expireAt(slot: number, at: number): void {
    this.slots[slot * this.stride + EXPIRES_AT] = at;
  }

  protected abstract clear(slot: number): void;

  /** A buffer for the state a call would leave (vector algorithms), or null. */
  abstract stateBuffer(): StateVector | null;

  /** The algorithm's decision on the state at `slot` (-1: none); writes the state it would leave into `next`. */
  protected abstract decideState(slot: number, rule: CompiledRule, now: number, cost: number, out: Verdict, next: StateVector | null): void;

  /** Stores the state of an admitted call at `at`, from the state at `held` (-1: none). */
  protected abstract commitState(at: number, held: number, rule: CompiledRule, now: number, cost: number, leaseId: string, next: StateVector | null): void;

  /** Gives units back to the state at `slot`: ms it must be kept, 0 when nothing is left, -1 to leave it as it is. */
  protected abstract refundState(slot: number, rule: CompiledRule, now: number, cost: number): number;

  /**
   * Drops up to SWEEP_BUDGET expired keys, resuming where the last sweep
   * stopped. `now` is the current clock: a clock that once ran ahead and came
   * back drops nothing that is alive at its present time.
   */
  sweep(now: number): void {
    this.cursor ??= this.index.entries();
    for (let i = 0; i < SWEEP_BUDGET; i++) {
      const item = this.cursor.next();
      if (item.done) {
        this.cursor = undefined;
        return;
      }
      const [key, slot] = item.value;
      if ((this.slots[slot * this.stride + EXPIRES_AT] as number) <= now) this.remove(key, slot);
    }
  }
}

class VectorTable extends Table {
  constructor(
    readonly algorithm: VectorAlgorithm,
    private readonly size: number,
    maxKeys: number,
  ) {
    super(maxKeys, size);
  }

  /** A plain array: a small typed array costs several times more to allocate than the 2 to 4 numbers it holds. */
  stateBuffer(): StateVector {
    switch (this.size) {
      case 2:
        return [0, 0];
      case 3:
        return [0, 0, 0];
      case 4:
        return [0, 0, 0, 0];
      default:
        return new Array<number>(this.size).fill(0);
    }
  }

  protected decideState(slot: number, rule: CompiledRule, now: number, cost: number, out: Verdict, next: StateVector | null): void {
    this.algorithm.decide(rule, slot < 0 ? null : this.slots, slot * this.stride + STATE, now, cost, out, next as StateVector);
  }

  protected commitState(at: number, _held: number, _rule: CompiledRule, _now: number, _cost: number, _leaseId: string, next: StateVector | null): void {
    this.store(at, next as StateVector);
  }

  /** Copies `next` into the slot: a plain loop, as TypedArray#set costs more than the 2 or 3 numbers it moves. */
  private store(slot: number, next: StateVector): void {
    const slots = this.slots;
    const base = slot * this.stride + STATE;
    for (let i = 0; i < next.length; i++) slots[base + i] = next[i] as number;
  }

  protected refundState(slot: number, rule: CompiledRule, now: number, cost: number): number {
    const next = this.stateBuffer();
    const ttl = this.algorithm.refund(rule, this.slots, slot * this.stride + STATE, now, cost, next);
    if (ttl > 0) this.store(slot, next);
    return ttl;
  }

  protected clear(): void {}
}

class LogTable extends Table {
  private logs: (LogState | null)[] = [];

  stateBuffer(): null {
    return null;
  }

  protected decideState(slot: number, rule: CompiledRule, now: number, cost: number, out: Verdict): void {
    slidingLog.decide(rule, slot < 0 ? null : (this.logs[slot] ?? null), now, cost, out);
  }

  protected commitState(at: number, held: number, rule: CompiledRule, now: number, cost: number): void {
    this.logs[at] = slidingLog.commit(rule, (held < 0 ? null : this.logs[at]) ?? createLog(), now, cost);
  }

  protected refundState(slot: number, rule: CompiledRule, now: number, cost: number): number {
    return slidingLog.refund(rule, this.logs[slot] as LogState, now, cost);
  }

  protected clear(slot: number): void {
    this.logs[slot] = null;
  }
}

class LeaseTable extends Table {
  private leases: (LeaseState | null)[] = [];

  stateBuffer(): null {
    return null;
  }

  protected decideState(slot: number, rule: CompiledRule, now: number, cost: number, out: Verdict): void {
    concurrency.decide(rule, slot < 0 ? null : (this.leases[slot] as LeaseState), now, cost, out);
  }

  protected commitState(at: number, _held: number, rule: CompiledRule, now: number, cost: number, leaseId: string): void {
    this.leases[at] = concurrency.commit(rule, this.leases[at] ?? null, now, cost, leaseId);
  }

  /** Leases are given back by release(), not by refunds; a refund only forgets a key whose leases have all ended. */
  protected refundState(slot: number, _rule: CompiledRule, now: number): number {
    return (this.leases[slot] as LeaseState).expires.some((expires) => expires > now) ? -1 : 0;
  }

  release(key: string, leaseId: string, now: number): void {
    const slot = this.find(key);
    if (slot < 0) return;
    const ttl = concurrency.release(this.leases[slot] as LeaseState, leaseId, now);
    if (ttl === 0) this.remove(key, slot);
    else this.expireAt(slot, now + ttl);
  }

  protected clear(slot: number): void {
    this.leases[slot] = null;
  }
}

/** Starts the block a denied call starts under `rule`, if it does (see algorithms/block.ts). */
function blockIfBreached(table: Table, key: string, slot: number, rule: CompiledRule, v: Verdict, now: number): void {
  if (rule.blockMs > 0 && startBlock(rule, v)) table.block(key, slot, blockStartedAt(rule, v, now));
}

/**
 * A weak reference where the runtime has them. A function of its own: a
 * closure over `value` next to the sweeper's callback would share its scope,
 * and hold the store for it.
 */
function weakly<T extends object>(value: T): { deref(): T | undefined } {
  return typeof WeakRef === 'function' ? new WeakRef(value) : { deref: () => value };
}

/**
 * The sweeper of every MemoryStore: it holds stores weakly, so a store nobody
 * uses any more can be collected. Cloudflare Workers have no WeakRef (unless a
 * compatibility flag asks for it): there it holds the store, which lives as
 * long as its isolate anyway.
 */
function startSweeper(store: MemoryStore, intervalMs: number): ReturnType<typeof setInterval> {
  const ref = weakly(store);
  const timer = setInterval(() => {
    const alive = ref.deref();
    if (alive === undefined) clearInterval(timer);
    else alive.sweep();
  }, intervalMs);
  // Never keep the process alive for the sweeper (Node, Bun, Deno).
  (timer as { unref?: () => void }).unref?.();
  return timer;
}

/**
 * In-process store: the state of every key lives in this process. Decisions
 * are synchronous, O(1) per rule (sliding-log: O(log n)). Memory is bounded by
 * `maxKeys` per rule, and one `unref()`'d timer sweeps expired keys. Use
 * RedisStore when several processes must share one limit.
 *
 * @example
 * ```ts
 * const limiter = createLimiter({ limit: 100, windowMs: 60_000, store: new MemoryStore({ maxKeys: 100_000 }) });
 * ```
 */
export class MemoryStore implements Store {
  private readonly maxKeys: number;
  private readonly sweepIntervalMs: number;
  private readonly tables = new Map<string, Table>();
  private bound = new WeakMap<RuleSet, Table[]>();
  /**
   * The rule sets of the last calls and their tables, newest first: a limiter
   * calls with one until its rules change, or alternates between a few plans.
   */
  private recent: { readonly ruleSet: RuleSet; readonly tables: Table[] }[] = [];
  private timer: ReturnType<typeof setInterval> | undefined;
  /** Blocks by hand and their reasons (limiter.blocked()), on this process's clock. */
  readonly records: StoreRecords = new MemoryRecords();

  constructor(options: MemoryStoreOptions = {}) {
    if (typeof options !== 'object' || options === null) {
      throw new FloodgateError(ErrorCodes.OPTION, `MemoryStore options must be an object, got ${describe(options)}.`);
    }
    for (const key of Object.keys(options)) {
      if (key !== 'maxKeys' && key !== 'sweepIntervalMs') {
        throw new FloodgateError(ErrorCodes.UNKNOWN_OPTION, `MemoryStore has no option '${key}'; it takes maxKeys and sweepIntervalMs.`);
      }
    }
    const { maxKeys = 1_000_000, sweepIntervalMs = 5_000 } = options;
    if (!Number.isSafeInteger(maxKeys) || maxKeys < 1) {
      throw new FloodgateError(ErrorCodes.OPTION, `MemoryStore maxKeys must be a positive integer, got ${describe(maxKeys)}.`);
    }
    if (!Number.isSafeInteger(sweepIntervalMs) || sweepIntervalMs < 1 || sweepIntervalMs > MAX_TIMER_MS) {
      throw new FloodgateError(
        ErrorCodes.OPTION,
        `MemoryStore sweepIntervalMs must be a positive integer number of ms, at most ${MAX_TIMER_MS} (the longest timer JavaScript keeps), got ${describe(sweepIntervalMs)}.`,
      );
    }
    this.maxKeys = maxKeys;
    this.sweepIntervalMs = sweepIntervalMs;
  }

  /** Number of keys held for a rule of a limiter (for tests and metrics). */
  size(prefix: string, ruleName: string): number {
    let total = 0;
    for (const [id, table] of this.tables) if (id.startsWith(`${prefix}\u0000${ruleName}\u0000`)) total += table.index.size;
    return total;
  }

  /** Number of rules' tables the store holds (for tests: tables no rule uses are dropped once empty). */
  get tableCount(): number {
    return this.tables.size;
  }

  consume(keys: StoreKeys, ruleSet: RuleSet, cost: number, now: number, leaseId = ''): RuleDecision[] {
    const tables = this.tablesOf(ruleSet);
    const rules = ruleSet.rules;
    if (rules.length === 1) {
      // One rule: decided and recorded in one go.
      const table = tables[0] as Table;
      const rule = rules[0] as CompiledRule;
      const key = keyOfRule(keys, 0);
      const v = createVerdict();
      const next = table.stateBuffer();
      const slot = table.decide(key, rule, now, cost, v, next);
      if (!v.allowed) {
        blockIfBreached(table, key, slot, rule, v, now);
        return [unchangedDecision(rule, v, false)];
      }
      table.commit(key, slot, rule, now, cost, leaseId, v, next);
      return [admittedDecision(rule, v)];
    }
    const verdicts = new Array<Verdict>(rules.length);
    const nexts = new Array<StateVector | null>(rules.length);
    const slots = new Array<number>(rules.length);
    let admitted = true;
    for (let i = 0; i < rules.length; i++) {
      const table = tables[i] as Table;
      const v = createVerdict();
      const next = table.stateBuffer();
      slots[i] = table.decide(keyOfRule(keys, i), rules[i] as CompiledRule, now, cost, v, next);
      verdicts[i] = v;
      nexts[i] = next;
      if (!v.allowed) admitted = false;
    }
    const decisions = new Array<RuleDecision>(rules.length);
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i] as CompiledRule;
      const v = verdicts[i] as Verdict;
      if (admitted) {
        (tables[i] as Table).commit(keyOfRule(keys, i), slots[i] as number, rule, now, cost, leaseId, v, nexts[i] as StateVector | null);
        decisions[i] = admittedDecision(rule, v);
      } else {
        // Each rule whose own numbers deny starts its block, whichever rule binds the denial.
        blockIfBreached(tables[i] as Table, keyOfRule(keys, i), slots[i] as number, rule, v, now);
        decisions[i] = unchangedDecision(rule, v, false);
      }
    }
    return decisions;
  }

  peek(keys: StoreKeys, ruleSet: RuleSet, now: number): RuleDecision[] {
    const tables = this.tablesOf(ruleSet);
    return ruleSet.rules.map((rule, i) => {
      const table = tables[i] as Table;
      const v = createVerdict();
      table.decide(keyOfRule(keys, i), rule, now, 1, v, table.stateBuffer());
      return unchangedDecision(rule, v, true);
    });
  }

  refund(keys: StoreKeys, ruleSet: RuleSet, cost: number, now: number): void {
    const tables = this.tablesOf(ruleSet);
    ruleSet.rules.forEach((rule, i) => {
      (tables[i] as Table).refund(keyOfRule(keys, i), rule, now, cost);
    });
  }

  release(keys: StoreKeys, ruleSet: RuleSet, leaseId: string, now: number): void {
    const tables = this.tablesOf(ruleSet);
    tables.forEach((table, i) => {
      if (table instanceof LeaseTable) table.release(keyOfRule(keys, i), leaseId, now);
    });
  }

  block(keys: StoreKeys, ruleSet: RuleSet, ms: number, now: number): void {
    const tables = this.tablesOf(ruleSet);
    const block = manualBlock(now, ms);
    ruleSet.rules.forEach((rule, i) => {
      if (!ALGORITHMS[rule.algorithm].blocks) return;
      const table = tables[i] as Table;
      const key = keyOfRule(keys, i);
      table.block(key, table.find(key), block);
    });
  }

  unblock(keys: StoreKeys, ruleSet: RuleSet, now: number): void {
    const tables = this.tablesOf(ruleSet);
    ruleSet.rules.forEach((rule, i) => {
      (tables[i] as Table).unblock(keyOfRule(keys, i), rule, now);
    });
  }

  reset(keys: StoreKeys, ruleSet: RuleSet): void {
    this.tablesOf(ruleSet).forEach((table, i) => {
      const key = keyOfRule(keys, i);
      const slot = table.index.get(key);
      if (slot !== undefined) table.remove(key, slot);
    });
  }

  /** Stops the sweeper and forgets every key. */
  close(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    for (const table of this.tables.values()) table.dropped = true;
    this.tables.clear();
    this.bound = new WeakMap();
    this.recent = [];
  }

  /**
   * Drops expired state, each table by the clock of the limiter that used it
   * last. A table that holds nothing and that no call used since the last
   * sweep is dropped: rules renamed or retired by hot updates leave nothing behind.
   */
  sweep(): void {
    for (const [id, table] of this.tables) {
      let now: number;
      try {
        now = table.now();
      } catch {
        continue; // a clock that fails now fails the calls too, where it is reported
      }
      table.sweep(now);
      if (table.index.size === 0 && !table.touched) {
        table.dropped = true;
        this.tables.delete(id);
        this.recent = [];
      }
      table.touched = false;
    }
  }

  private tablesOf(ruleSet: RuleSet): Table[] {
    // A rule set of the last calls: its tables, marked used (the sweeper, which drops tables, forgets these).
    const recent = this.recent;
    for (let i = 0; i < recent.length; i++) {
      const entry = recent[i] as (typeof recent)[number];
      if (entry.ruleSet !== ruleSet) continue;
      const tables = entry.tables;
      for (let t = 0; t < tables.length; t++) {
        const table = tables[t] as Table;
        table.touched = true;
        // Written only when it changes: the rule sets of one limiter share their clock.
        if (table.now !== ruleSet.now) table.now = ruleSet.now;
      }
      return tables;
    }
    let tables = this.bound.get(ruleSet);
    if (tables === undefined || tables.some((table) => table.dropped)) {
      tables = ruleSet.rules.map((rule) => this.tableFor(ruleSet.prefix, rule));
      this.bound.set(ruleSet, tables);
    }
    this.recent.unshift({ ruleSet, tables });
    if (this.recent.length > RECENT_RULE_SETS) this.recent.pop();
    for (const table of tables) {
      table.touched = true;
      table.now = ruleSet.now;
    }
    this.timer ??= startSweeper(this, this.sweepIntervalMs);
    return tables;
  }

  private tableFor(prefix: string, rule: CompiledRule): Table {
    // Tables are found by what shapes their state, so a hot update that keeps
    // a rule's name and algorithm keeps its keys' state.
    const state = ALGORITHMS[rule.algorithm].state;
    const size = state.kind === 'vector' ? state.algorithm.stateSize(rule) : 0;
    const id = `${prefix}\u0000${rule.name}\u0000${rule.algorithm}\u0000${size}`;
    let table = this.tables.get(id);
    if (table === undefined) {
      if (state.kind === 'vector') table = new VectorTable(state.algorithm, size, this.maxKeys);
      else table = state.kind === 'leases' ? new LeaseTable(this.maxKeys) : new LogTable(this.maxKeys);
      this.tables.set(id, table);
    }
    return table;
  }
}
