import {
  concurrency,
  createLog,
  createVerdict,
  type LeaseState,
  type LogState,
  slidingLog,
  type VectorAlgorithm,
  type Verdict,
  vectorAlgorithms,
} from '../algorithms/index.js';
import { describe, ErrorCodes, FloodgateError } from '../errors.js';
import type { CompiledRule } from '../rules.js';
import type { RuleDecision, RuleSet, Store } from './types.js';

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

/** Entries the sweeper looks at per table per tick: bounds the pause on a large store. */
const SWEEP_BUDGET = 20_000;

/** Where a slot's numbers start in `Table.slots`: its expiry, its last use, then the algorithm's state. */
const EXPIRES_AT = 0;
const TOUCHED_AT = 1;
const STATE = 2;

/**
 * The keys of one rule: a Map from key to a slot, and each slot's numbers side
 * by side in one typed array (expiry, last use, then the algorithm's state), so
 * a key costs a Map entry and a few numbers, not an object, and a decision
 * reads one stretch of memory.
 */
abstract class Table {
  readonly index = new Map<string, number>();
  protected capacity = 0;
  protected slots = new Float64Array(0);
  /** Numbers per slot. */
  protected readonly stride: number;
  private readonly freeSlots: number[] = [];
  private used = 0;
  private clock = 0; // counts lookups, for recency
  private readonly slack: number;
  private cursor: Iterator<[string, number]> | undefined;
  /** Where the next eviction looks for the oldest entry (see evictOldest). */
  private evictions: Iterator<[string, number]> | undefined;

  constructor(
    private readonly maxKeys: number,
    stateSize = 0,
  ) {
    this.stride = STATE + stateSize;
    // A key is moved to the young end of the Map only when it has not been
    // moved for `slack` lookups: hot keys cost one comparison, and eviction
    // still takes a key unused for about the last maxKeys/8 lookups.
    this.slack = Math.floor(maxKeys / 8);
  }

  /** The key's slot, or -1. Marks the key as recently used. */
  find(key: string): number {
    const slot = this.index.get(key);
    if (slot === undefined) return -1;
    const clock = ++this.clock;
    const touched = slot * this.stride + TOUCHED_AT;
    if (clock - (this.slots[touched] as number) > this.slack) {
      this.index.delete(key);
      this.index.set(key, slot);
      this.slots[touched] = clock;
    }
    return slot;
  }

  /** A slot for a new key, forgetting the least recently used key at the bound. */
  protected allocate(key: string): number {
    if (this.index.size >= this.maxKeys) this.evictOldest();
    let slot = this.freeSlots.pop();
    if (slot === undefined) {
      if (this.used === this.capacity) this.grow(Math.min(this.maxKeys, Math.max(16, this.capacity * 2)));
      slot = this.used++;
    }
    this.index.set(key, slot);
    this.slots[slot * this.stride + TOUCHED_AT] = ++this.clock;
    return slot;
  }

  /**
   * Forgets the least recently used key: the Map's oldest entry. A Map keeps a
   * deleted entry's place until it rehashes, and a new iterator walks over
   * every one of them to reach the first live entry, so evicting with
   * `entries().next()` cost O(deleted entries) per call. One iterator kept
   * across calls passes each deleted entry once (V8 carries live iterators
   * over a rehash): O(1) amortised.
   */
  private evictOldest(): void {
    this.evictions ??= this.index.entries();
    let oldest = this.evictions.next();
    if (oldest.done) {
      // Only when the iterator had reached the end: every entry is newer than it, and the first is the oldest.
      this.evictions = this.index.entries();
      oldest = this.evictions.next();
    }
    const [key, slot] = oldest.value as [string, number];
    this.remove(key, slot);
  }

  remove(key: string, slot: number): void {
    this.index.delete(key);
    this.freeSlots.push(slot);
    this.clear(slot);
  }

  private grow(capacity: number): void {
    const slots = new Float64Array(capacity * this.stride);
    slots.set(this.slots);
    this.slots = slots;
    this.capacity = capacity;
  }

  /** Keeps the slot's state until `at` (limiter time). */
  protected expireAt(slot: number, at: number): void {
    this.slots[slot * this.stride + EXPIRES_AT] = at;
  }

  protected abstract clear(slot: number): void;

  /** Drops up to SWEEP_BUDGET expired keys, resuming where the last sweep stopped. */
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
  readonly verdict: Verdict = createVerdict();
  readonly next: Float64Array;
  slot = -1;

  constructor(
    readonly algorithm: VectorAlgorithm,
    size: number,
    maxKeys: number,
  ) {
    super(maxKeys, size);
    this.next = new Float64Array(size);
  }

  decide(key: string, rule: CompiledRule, now: number, cost: number): Verdict {
    const slot = this.find(key);
    this.slot = slot;
    this.algorithm.decide(rule, slot < 0 ? null : this.slots, slot * this.stride + STATE, now, cost, this.verdict, this.next);
    return this.verdict;
  }

  /** Stores `next` for the key decided last. */
  commit(key: string, now: number, _rule: CompiledRule, _cost: number, _leaseId: string): void {
    const slot = this.slot < 0 ? this.allocate(key) : this.slot;
    this.store(slot);
    this.expireAt(slot, now + this.verdict.ttlMs);
  }

  /** Copies `next` into the slot: a plain loop, as TypedArray#set costs more than the 2 or 3 numbers it moves. */
  private store(slot: number): void {
    const slots = this.slots;
    const next = this.next;
    const base = slot * this.stride + STATE;
    for (let i = 0; i < next.length; i++) slots[base + i] = next[i] as number;
  }

  refund(key: string, rule: CompiledRule, now: number, cost: number): void {
    const slot = this.find(key);
    if (slot < 0) return;
    const ttl = this.algorithm.refund(rule, this.slots, slot * this.stride + STATE, now, cost, this.next);
    if (ttl === 0) {
      this.remove(key, slot);
      return;
    }
    this.store(slot);
    this.expireAt(slot, now + ttl);
  }

  protected clear(): void {}
}

class LogTable extends Table {
  private logs: (LogState | null)[] = [];
  readonly verdict: Verdict = createVerdict();
  slot = -1;

  decide(key: string, rule: CompiledRule, now: number, cost: number): Verdict {
    const slot = this.find(key);
    this.slot = slot;
    slidingLog.decide(rule, slot < 0 ? null : (this.logs[slot] as LogState), now, cost, this.verdict);
    return this.verdict;
  }

  commit(key: string, now: number, rule: CompiledRule, cost: number, _leaseId: string): void {
    const slot = this.slot < 0 ? this.allocate(key) : this.slot;
    this.logs[slot] = slidingLog.commit(rule, this.logs[slot] ?? createLog(), now, cost);
    this.expireAt(slot, now + this.verdict.ttlMs);
  }

  refund(key: string, rule: CompiledRule, now: number, cost: number): void {
    const slot = this.find(key);
    if (slot < 0) return;
    const ttl = slidingLog.refund(rule, this.logs[slot] as LogState, now, cost);
    if (ttl === 0) this.remove(key, slot);
    else this.expireAt(slot, now + ttl);
  }

  protected clear(slot: number): void {
    this.logs[slot] = null;
  }
}

class LeaseTable extends Table {
  private leases: (LeaseState | null)[] = [];
  readonly verdict: Verdict = createVerdict();
  slot = -1;

  decide(key: string, rule: CompiledRule, now: number, cost: number): Verdict {
    const slot = this.find(key);
    this.slot = slot;
    concurrency.decide(rule, slot < 0 ? null : (this.leases[slot] as LeaseState), now, cost, this.verdict);
    return this.verdict;
  }

  commit(key: string, now: number, rule: CompiledRule, cost: number, leaseId: string): void {
    const slot = this.slot < 0 ? this.allocate(key) : this.slot;
    this.leases[slot] = concurrency.commit(rule, this.leases[slot] ?? null, now, cost, leaseId);
    this.expireAt(slot, now + this.verdict.ttlMs);
  }

  /** Leases are given back by release(), not by refunds. */
  refund(): void {}

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

type AnyTable = VectorTable | LogTable | LeaseTable;

/** A rule's decision when nothing was recorded: a denied call, an admitted rule of a denied call, or a peek. */
function unchanged(rule: CompiledRule, v: Verdict, peek: boolean): RuleDecision {
  return {
    name: rule.name,
    allowed: v.allowed,
    limit: rule.limit,
    remaining: v.remainingNow,
    resetMs: v.resetMsNow,
    retryAfterMs: v.retryAfterMs,
    delayMs: peek && v.allowed ? v.delayMs : 0,
  };
}

/**
 * In-process store: the state of every key lives in this process. Decisions
 * are synchronous, O(1) per rule (sliding-log: O(log n)), and allocate only
 * the decisions they return. Memory is bounded by `maxKeys` per rule, and one
 * `unref()`'d timer sweeps expired keys. Use RedisStore when several
 * processes must share one limit.
 *
 * @example
 * ```ts
 * const limiter = createLimiter({ limit: 100, windowMs: 60_000, store: new MemoryStore({ maxKeys: 100_000 }) });
 * ```
 */
export class MemoryStore implements Store {
  private readonly maxKeys: number;
  private readonly sweepIntervalMs: number;
  private readonly tables = new Map<string, AnyTable>();
  private bound = new WeakMap<RuleSet, AnyTable[]>();
  /** The rule set seen last and its tables: a limiter calls with the same one until its rules change. */
  private lastRuleSet: RuleSet | undefined;
  private lastTables: AnyTable[] = [];
  private timer: ReturnType<typeof setInterval> | undefined;
  /** The latest time a caller passed: the sweeper's notion of now. */
  private latest = 0;

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
    if (!Number.isSafeInteger(sweepIntervalMs) || sweepIntervalMs < 1) {
      throw new FloodgateError(ErrorCodes.OPTION, `MemoryStore sweepIntervalMs must be a positive integer number of ms, got ${describe(sweepIntervalMs)}.`);
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

  consume(key: string, ruleSet: RuleSet, cost: number, now: number, leaseId = ''): RuleDecision[] {
    this.observe(now);
    const tables = this.tablesOf(ruleSet);
    const rules = ruleSet.rules;
    let admitted = true;
    for (let i = 0; i < rules.length; i++) {
      if (!(tables[i] as AnyTable).decide(key, rules[i] as CompiledRule, now, cost).allowed) admitted = false;
    }
    const decisions = new Array<RuleDecision>(rules.length);
    for (let i = 0; i < rules.length; i++) {
      const table = tables[i] as AnyTable;
      const rule = rules[i] as CompiledRule;
      const v = table.verdict;
      if (admitted) {
        table.commit(key, now, rule, cost, leaseId);
        decisions[i] = { name: rule.name, allowed: true, limit: rule.limit, remaining: v.remaining, resetMs: v.resetMs, retryAfterMs: 0, delayMs: v.delayMs };
      } else {
        decisions[i] = unchanged(rule, v, false);
      }
    }
    return decisions;
  }

  peek(key: string, ruleSet: RuleSet, now: number): RuleDecision[] {
    this.observe(now);
    const tables = this.tablesOf(ruleSet);
    return ruleSet.rules.map((rule, i) => unchanged(rule, (tables[i] as AnyTable).decide(key, rule, now, 1), true));
  }

  refund(key: string, ruleSet: RuleSet, cost: number, now: number): void {
    this.observe(now);
    const tables = this.tablesOf(ruleSet);
    ruleSet.rules.forEach((rule, i) => {
      (tables[i] as AnyTable).refund(key, rule, now, cost);
    });
  }

  release(key: string, ruleSet: RuleSet, leaseId: string, now: number): void {
    this.observe(now);
    const tables = this.tablesOf(ruleSet);
    for (const table of tables) if (table instanceof LeaseTable) table.release(key, leaseId, now);
  }

  reset(key: string, ruleSet: RuleSet): void {
    for (const table of this.tablesOf(ruleSet)) {
      const slot = table.index.get(key);
      if (slot !== undefined) table.remove(key, slot);
    }
  }

  /** Stops the sweeper and forgets every key. */
  close(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    this.tables.clear();
    this.bound = new WeakMap();
    this.lastRuleSet = undefined;
  }

  private observe(now: number): void {
    if (now > this.latest) this.latest = now;
    if (this.timer === undefined) {
      this.timer = setInterval(() => this.sweep(), this.sweepIntervalMs);
      // Never keep the process alive for the sweeper (Node, Bun, Deno).
      (this.timer as { unref?: () => void }).unref?.();
    }
  }

  private sweep(): void {
    for (const table of this.tables.values()) table.sweep(this.latest);
  }

  private tablesOf(ruleSet: RuleSet): AnyTable[] {
    if (ruleSet === this.lastRuleSet) return this.lastTables;
    let tables = this.bound.get(ruleSet);
    if (tables === undefined) {
      tables = ruleSet.rules.map((rule) => this.tableFor(ruleSet.prefix, rule));
      this.bound.set(ruleSet, tables);
    }
    this.lastRuleSet = ruleSet;
    this.lastTables = tables;
    return tables;
  }

  private tableFor(prefix: string, rule: CompiledRule): AnyTable {
    // Tables are found by what shapes their state, so a hot update that keeps
    // a rule's name and algorithm keeps its keys' state.
    const algorithm = rule.algorithm === 'sliding-log' || rule.algorithm === 'concurrency' ? undefined : vectorAlgorithms[rule.algorithm];
    const size = algorithm?.stateSize(rule) ?? 0;
    const id = `${prefix}\u0000${rule.name}\u0000${rule.algorithm}\u0000${size}`;
    let table = this.tables.get(id);
    if (table === undefined) {
      if (algorithm !== undefined) table = new VectorTable(algorithm, size, this.maxKeys);
      else table = rule.algorithm === 'concurrency' ? new LeaseTable(this.maxKeys) : new LogTable(this.maxKeys);
      this.tables.set(id, table);
    }
    return table;
  }
}
