import type { Verdict } from '../algorithms/types.js';
import type { CompiledRule } from '../rules.js';

/** What one rule decided about one call. */
export interface RuleDecision {
  /** The rule's name. */
  name: string;
  /** The rule's scope: whose key it counts under (`'key'` unless the rule says otherwise). */
  scope: string;
  /** Whether this rule admits the call (the call is admitted only when every rule does). */
  allowed: boolean;
  /** The rule's `limit`. */
  limit: number;
  /** Units left under this rule after this call, integer >= 0. */
  remaining: number;
  /** ms until this rule is back to full capacity. */
  resetMs: number;
  /** 0 when allowed; else ms until the same call would be allowed (Infinity: never, the cost exceeds the capacity). */
  retryAfterMs: number;
  /** leaky-bucket shaping: ms to wait before serving; 0 otherwise. */
  delayMs: number;
  /**
   * Set while the key is blocked under this rule (its `blockMs`), and on
   * the denial that started the block: `started` tells which. Absent
   * otherwise. `retryAfterMs` is then at least `leftMs`.
   */
  blocked?: BlockedInfo;
}

/** A block that holds a key under a rule (see the rule options `blockMs` and `maxBlockMs`). */
export interface BlockedInfo {
  /** The block's length in ms (with escalation, this block's). */
  blockMs: number;
  /** ms until the block ends. */
  leftMs: number;
  /** 1 for a first block; 2, 3, ... for blocks that followed the previous one within maxBlockMs. */
  strike: number;
  /** Whether this call started the block (false: it found the key blocked). */
  started: boolean;
  /** Set for a block by hand (`limiter.block`), which has no strike (0). */
  manual?: true;
  /** When the block ends, on the limiter's clock (ms since the epoch). */
  untilMs?: number;
  /** The reason given to `limiter.block()`, where the store keeps records. */
  reason?: string;
}

/**
 * The rules of one limiter as a store receives them. Its identity changes
 * when the rules change (hot update), so stores may cache per-RuleSet data.
 */
export interface RuleSet {
  /** Key namespace of the limiter (`prefix` option). */
  readonly prefix: string;
  readonly rules: readonly CompiledRule[];
  /** The limiter's clock: what a store that expires state on its own (MemoryStore's sweeper) reads between calls. */
  readonly now: () => number;
}

/** A value, or a promise of it: stores may answer synchronously (MemoryStore) or not (RedisStore). */
export type Awaitable<T> = T | Promise<T>;

/**
 * The key of each rule of a call, as the limiter hands it to a store: one
 * string when every rule takes the same key (rules of one scope, the usual
 * case), else one per rule, in the order of the rule set. Keys come checked,
 * hashed when long, and qualified by their scope, so that no two (scope, key)
 * pairs share one: a store uses them as they are. They hold no `{` or `}`.
 */
export type StoreKeys = string | readonly string[];

/** What a rule's decision says about the block of a verdict; undefined when no block holds. */
export function blockedOf(v: Pick<Verdict, 'blockLeftMs' | 'blockMs' | 'strike' | 'blockStarted'>): BlockedInfo | undefined {
  if (v.blockLeftMs <= 0) return undefined;
  const info: BlockedInfo = { blockMs: v.blockMs, leftMs: v.blockLeftMs, strike: v.strike, started: v.blockStarted };
  if (v.strike === 0) info.manual = true;
  return info;
}

/** The key of rule `i` of a call. */
export const keyOfRule = (keys: StoreKeys, i: number): string => (typeof keys === 'string' ? keys : (keys[i] as string));

/**
 * Where limiter state lives. A store runs every rule of a call at once and
 * keeps the all-or-nothing promise: when any rule denies, no rule's state
 * changes. `now` is the limiter's clock (ms); a store may use its own clock
 * instead (RedisStore reads Redis `TIME` by default).
 */
export interface Store {
  /**
   * Decides a call of `cost` units against every rule; records it only when
   * every rule admits it. `leaseId` names the lease concurrency rules take.
   */
  consume(keys: StoreKeys, ruleSet: RuleSet, cost: number, now: number, leaseId?: string): Awaitable<RuleDecision[]>;
  /** The decisions a call of cost 1 would get now, with `remaining` = units available now; changes nothing. */
  peek(keys: StoreKeys, ruleSet: RuleSet, now: number): Awaitable<RuleDecision[]>;
  /** Gives `cost` units back to every rule, never above capacity; no-op for expired state. */
  refund(keys: StoreKeys, ruleSet: RuleSet, cost: number, now: number): Awaitable<void>;
  /** Forgets the keys in every rule. */
  reset(keys: StoreKeys, ruleSet: RuleSet): Awaitable<void>;
  /** Ends a lease of the call's concurrency rules early (stores without concurrency support may omit it). */
  release?(keys: StoreKeys, ruleSet: RuleSet, leaseId: string, now: number): Awaitable<void>;
  /**
   * Blocks the keys by hand for `ms` under every rule of the set that can
   * hold a block (algorithms/block.ts `manualBlock`), their counts as they
   * are: every call is denied until the block ends or `unblock`.
   */
  block?(keys: StoreKeys, ruleSet: RuleSet, ms: number, now: number): Awaitable<void>;
  /** Lifts the keys' blocks under every rule of the set, by hand or not; their counts stay (an ended one is forgotten). */
  unblock?(keys: StoreKeys, ruleSet: RuleSet, now: number): Awaitable<void>;
  /** Small named records the limiter keeps in the store beside the rules' states: blocks by hand and their reasons. */
  readonly records?: StoreRecords;
  /** Releases timers and connections the store owns. */
  close?(): Awaitable<void>;
}

/**
 * Small named text records a store keeps for the limiter, apart from the
 * rules' states (a limiter lists the blocks it made by hand, with their
 * reasons, from them). Names and values are strings; a name is at most 1024
 * characters. Listing is in the order of names' code points (the order of
 * their UTF-8 bytes, as Redis and SQL's binary collations order them).
 */
export interface StoreRecords {
  /** Sets a record, which the store may drop once `ttlMs` has passed (on its own clock). */
  set(name: string, value: string, ttlMs: number): Awaitable<void>;
  /** The values of the named records, in order; null for one there is none of (or that has expired). */
  get(names: readonly string[]): Awaitable<(string | null)[]>;
  /** Drops the named records. */
  delete(names: readonly string[]): Awaitable<void>;
  /**
   * A page of the records whose names start with `prefix`, in name order,
   * from the first name after `after` ('' for the start), at most `count`;
   * `next` is the name to give as `after` for the next page, or '' once none
   * is left. A page may hold fewer than `count` and still have a `next`
   * (records that expired were passed over).
   */
  list(prefix: string, after: string, count: number): Awaitable<{ records: [name: string, value: string][]; next: string }>;
}
