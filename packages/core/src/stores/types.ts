import type { CompiledRule } from '../rules.js';

/** What one rule decided about one call. */
export interface RuleDecision {
  /** The rule's name. */
  name: string;
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
}

/**
 * The rules of one limiter as a store receives them. Its identity changes
 * when the rules change (hot update), so stores may cache per-RuleSet data.
 */
export interface RuleSet {
  /** Key namespace of the limiter (`prefix` option). */
  readonly prefix: string;
  readonly rules: readonly CompiledRule[];
}

/** A value, or a promise of it: stores may answer synchronously (MemoryStore) or not (RedisStore). */
export type Awaitable<T> = T | Promise<T>;

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
  consume(key: string, ruleSet: RuleSet, cost: number, now: number, leaseId?: string): Awaitable<RuleDecision[]>;
  /** The decisions a call of cost 1 would get now, with `remaining` = units available now; changes nothing. */
  peek(key: string, ruleSet: RuleSet, now: number): Awaitable<RuleDecision[]>;
  /** Gives `cost` units back to every rule of the key, never above capacity; no-op for expired state. */
  refund(key: string, ruleSet: RuleSet, cost: number, now: number): Awaitable<void>;
  /** Forgets the key in every rule. */
  reset(key: string, ruleSet: RuleSet): Awaitable<void>;
  /** Ends a lease of the key's concurrency rules early (stores without concurrency support may omit it). */
  release?(key: string, ruleSet: RuleSet, leaseId: string, now: number): Awaitable<void>;
  /** Releases timers and connections the store owns. */
  close?(): Awaitable<void>;
}
