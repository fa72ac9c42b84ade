import { isPromise } from './awaitable.js';
import { Breaker } from './breaker.js';
import { combine, type Decision } from './decision.js';
import { DenyCache } from './deny-cache.js';
import { describe, ErrorCodes, FloodgateError } from './errors.js';
import { Emitter } from './events.js';
import { type LimiterConfiguration, type LimiterOptions, parseLimiterOptions, parseRules, type StoreErrorPolicy } from './options.js';
import type { CompiledRule, RuleOptions } from './rules.js';
import type { RuleDecision, RuleSet, Store } from './stores/types.js';

/** Events of a limiter. Payloads are built only when someone listens. */
export interface LimiterEvents {
  /** A call was admitted. */
  allowed: { key: string; rule: string; decision: Decision; latencyMs: number };
  /** A call was denied. */
  limited: { key: string; rule: string; decision: Decision; latencyMs: number };
  /**
   * The store failed or timed out. `decision` is what onStoreError decided for a
   * consume or peek (absent when a refund or a lease release failed); `latencyMs`
   * is how long the call took to fail (timeoutMs for a store that did not answer).
   */
  error: { key: string; error: Error; operation: StoreOperation; decision?: Decision; latencyMs: number };
}

/** The limiter call a store error happened in. */
export type StoreOperation = 'consume' | 'peek' | 'refund' | 'release';

export interface ConsumeOptions {
  /** Units this call takes: a positive integer. @defaultValue 1 */
  cost?: number;
}

/** Keys longer than this many UTF-8 bytes are stored as their SHA-256, so a client cannot bloat the store. */
export const MAX_KEY_BYTES = 256;

/**
 * Rules + a store + events. Knows no HTTP: adapters call it, and so can any
 * code that needs to limit something.
 */
export interface Limiter {
  /** Decides a call and, when every rule admits it, records it. */
  consume(key: string, options?: ConsumeOptions): Promise<Decision>;
  /** The decision a call of cost 1 would get now; consumes nothing. `remaining` = units available now. */
  peek(key: string): Promise<Decision>;
  /** Forgets the key in every rule. */
  reset(key: string): Promise<void>;
  /** Gives `cost` units back to every rule of the key, never above capacity (used by skipSuccessfulRequests). */
  refund(key: string, options?: ConsumeOptions): Promise<void>;
  /** Ends the lease an admitted call took under concurrency rules (`decision.leaseId`). Adapters call it when the response ends. */
  release(key: string, leaseId: string): Promise<void>;
  /** Replaces the rules; takes effect on the next call. State is kept for rules whose name and algorithm stay. */
  updateRules(rules: readonly RuleOptions[] | RuleOptions): void;
  /** The rules in force, validated and with defaults filled in. */
  readonly rules: readonly CompiledRule[];
  readonly store: Store;
  /** The limiter's clock. */
  now(): number;
  on<E extends keyof LimiterEvents>(event: E, listener: (payload: LimiterEvents[E]) => void): () => void;
  off<E extends keyof LimiterEvents>(event: E, listener: (payload: LimiterEvents[E]) => void): void;
}

function checkCost(options: ConsumeOptions | undefined): number {
  const cost = options?.cost ?? 1;
  if (!Number.isSafeInteger(cost) || cost < 1) {
    throw new FloodgateError(ErrorCodes.COST, `cost must be a positive integer, got ${describe(cost)}.`);
  }
  return cost;
}

async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
  let hex = '';
  for (const byte of new Uint8Array(digest)) hex += byte.toString(16).padStart(2, '0');
  return hex;
}

/** The key as stores see it: checked, and hashed when it is long. */
function storeKey(key: unknown): string | Promise<string> {
  if (typeof key !== 'string' || key.length === 0) {
    throw new FloodgateError(
      ErrorCodes.KEY,
      `The key must be a non-empty string, got ${describe(key)}. Check the key function or the value passed to consume().`,
    );
  }
  // A UTF-16 unit is at most 3 UTF-8 bytes: only long keys need measuring.
  if (key.length * 3 <= MAX_KEY_BYTES || new TextEncoder().encode(key).length <= MAX_KEY_BYTES) return key;
  return sha256Hex(key).then((hex) => `sha256:${hex}`);
}

class StoreTimeoutError extends FloodgateError {
  constructor(timeoutMs: number) {
    super(ErrorCodes.STORE_TIMEOUT, `The store did not answer within timeoutMs (${timeoutMs} ms).`);
  }
}

/** Resolves like `promise`, or rejects with ERR_FG_STORE_TIMEOUT after `timeoutMs`. */
function withTimeout<T>(promise: Promise<T>, timeoutMs: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new StoreTimeoutError(timeoutMs)), timeoutMs);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

const asError = (error: unknown): Error => (error instanceof Error ? error : new Error(String(error)));

function unavailable(): FloodgateError {
  return new FloodgateError(ErrorCodes.STORE_UNAVAILABLE, 'The store failed several times in a row; it is given a moment before the next try.');
}

class RateLimiter implements Limiter {
  private ruleSet: RuleSet;
  readonly store: Store;
  private readonly config: LimiterConfiguration;
  private readonly events = new Emitter<LimiterEvents>();
  private readonly breaker = new Breaker();
  private readonly denials: DenyCache | undefined;
  /** Whether a rule in force is a concurrency rule: calls then take leases. */
  private leasing: boolean;
  /** Whether anyone listens to 'allowed', 'limited' or 'error': only then is a call timed. */
  private timed = false;
  /** Whether anyone listens to 'allowed' or 'limited': only then is their event built. */
  private reporting = false;
  private lastErrorLog = Number.NEGATIVE_INFINITY;
  private unloggedErrors = 0;

  constructor(config: LimiterConfiguration) {
    this.config = config;
    this.store = config.store;
    this.ruleSet = { prefix: config.prefix, rules: config.rules };
    this.denials = config.localDenyCacheKeys > 0 ? new DenyCache(config.localDenyCacheKeys) : undefined;
    this.leasing = config.rules.some((rule) => rule.algorithm === 'concurrency');
  }

  get rules(): readonly CompiledRule[] {
    return this.ruleSet.rules;
  }

  now(): number {
    const now = this.config.now();
    if (Number.isSafeInteger(now)) return now; // Date.now() and any sane clock
    if (!Number.isFinite(now)) {
      throw new FloodgateError(ErrorCodes.OPTION, `The limiter's clock (now option) returned ${describe(now)}; it must return ms as a finite number.`);
    }
    return Math.floor(now);
  }

  on<E extends keyof LimiterEvents>(event: E, listener: (payload: LimiterEvents[E]) => void): () => void {
    this.events.on(event, listener);
    this.listenersChanged();
    return () => this.off(event, listener);
  }

  private listenersChanged(): void {
    this.reporting = this.events.has('allowed') || this.events.has('limited');
    this.timed = this.reporting || this.events.has('error');
  }

  off<E extends keyof LimiterEvents>(event: E, listener: (payload: LimiterEvents[E]) => void): void {
    this.events.off(event, listener);
    this.listenersChanged();
  }

  updateRules(rules: readonly RuleOptions[] | RuleOptions): void {
    if (typeof rules !== 'object' || rules === null) {
      throw new FloodgateError(ErrorCodes.RULES, `updateRules() takes a list of rules or one rule, got ${describe(rules)}.`);
    }
    const compiled = Array.isArray(rules) ? parseRules({ rules }, 'updateRules()') : parseRules(rules as RuleOptions, 'updateRules()');
    this.ruleSet = { prefix: this.config.prefix, rules: compiled };
    this.leasing = compiled.some((rule) => rule.algorithm === 'concurrency');
    this.denials?.clear();
  }

  consume(key: string, options?: ConsumeOptions): Promise<Decision> {
    // Not an async function: with a store that answers synchronously (MemoryStore) the
    // decision is made here and now, without the frame and promises an async function allocates.
    try {
      const cost = checkCost(options);
      const id = storeKey(key);
      const decision = typeof id === 'string' ? this.decide(key, id, cost) : id.then((hashed) => this.decide(key, hashed, cost));
      return isPromise(decision) ? decision : Promise.resolve(decision);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** Decides a call: synchronously when the store and the deny cache can, else a promise. */
  private decide(key: string, id: string, cost: number): Decision | Promise<Decision> {
    const ruleSet = this.ruleSet;
    const started = this.timed ? performance.now() : -1;
    const now = this.now();
    const remembered = this.denials?.lookup(id, cost, now);
    if (remembered !== undefined) return this.report(key, remembered, started);
    if (!this.breaker.allows()) return this.storeFailed(key, unavailable(), ruleSet, cost, 'consume', started);
    const leaseId = this.leasing ? `${cost}.${crypto.randomUUID()}` : undefined;
    let result: RuleDecision[] | Promise<RuleDecision[]>;
    try {
      result = this.store.consume(id, ruleSet, cost, now, leaseId);
    } catch (error) {
      return this.consumeFailed(key, error, ruleSet, cost, started);
    }
    // Anything but a promise is the store's answer; decided() treats one that is not a list of decisions as a failure.
    if (Array.isArray(result) || !isPromise(result)) return this.decided(key, id, cost, now, leaseId, ruleSet, result, started);
    return withTimeout(result, this.config.timeoutMs).then(
      (rules) => this.decided(key, id, cost, now, leaseId, ruleSet, rules, started),
      (error: unknown) => this.consumeFailed(key, error, ruleSet, cost, started),
    );
  }

  /** What the store answered, as a Decision: remembered, reported, with its lease. */
  private decided(
    key: string,
    id: string,
    cost: number,
    now: number,
    leaseId: string | undefined,
    ruleSet: RuleSet,
    rules: RuleDecision[],
    started: number,
  ): Decision | Promise<Decision> {
    let decision: Decision;
    try {
      decision = combine(rules);
    } catch (error) {
      return this.consumeFailed(key, error, ruleSet, cost, started); // a store that answered nonsense
    }
    this.breaker.succeeded();
    if (leaseId !== undefined && decision.allowed) decision.leaseId = leaseId;
    if (this.denials !== undefined) {
      // A lease can end at any moment in any process: a concurrency denial says nothing about the next call.
      if (decision.allowed || this.leasing) this.denials.forget(id);
      else this.denials.remember(id, cost, decision, now);
    }
    return this.report(key, decision, started);
  }

  private consumeFailed(key: string, error: unknown, ruleSet: RuleSet, cost: number, started: number): Promise<Decision> {
    this.breaker.failed();
    return this.storeFailed(key, asError(error), ruleSet, cost, 'consume', started);
  }

  /** Emits 'allowed' or 'limited' when someone listens to them (the call was then timed). */
  private report(key: string, decision: Decision, started: number): Decision {
    if (this.reporting && started >= 0) {
      const event = decision.allowed ? 'allowed' : 'limited';
      this.events.emit(event, { key, rule: decision.rule, decision, latencyMs: performance.now() - started });
    }
    return decision;
  }

  async peek(key: string): Promise<Decision> {
    const id = await storeKey(key);
    const ruleSet = this.ruleSet;
    const started = this.timed ? performance.now() : -1;
    if (!this.breaker.allows()) return this.storeFailed(key, unavailable(), ruleSet, 1, 'peek', started);
    try {
      const result = this.store.peek(id, ruleSet, this.now());
      // As in decide(): anything but a promise is the store's answer, and combine() rejects one that is not decisions.
      const decision = combine(Array.isArray(result) || !isPromise(result) ? result : await withTimeout(result, this.config.timeoutMs));
      this.breaker.succeeded();
      return decision;
    } catch (error) {
      this.breaker.failed();
      return this.storeFailed(key, asError(error), ruleSet, 1, 'peek', started);
    }
  }

  async refund(key: string, options?: ConsumeOptions): Promise<void> {
    const cost = checkCost(options);
    const id = await storeKey(key);
    this.denials?.forget(id);
    const started = this.timed ? performance.now() : -1;
    try {
      const result = this.store.refund(id, this.ruleSet, cost, this.now());
      if (isPromise(result)) await withTimeout(result, this.config.timeoutMs);
    } catch (error) {
      // A refund that does not reach the store only makes the limit stricter: report it, do not fail the caller.
      this.reportError(key, asError(error), 'refund', started);
    }
  }

  async release(key: string, leaseId: string): Promise<void> {
    if (typeof leaseId !== 'string' || leaseId === '') return;
    const id = await storeKey(key);
    if (this.store.release === undefined) return;
    const started = this.timed ? performance.now() : -1;
    try {
      const result = this.store.release(id, this.ruleSet, leaseId, this.now());
      if (isPromise(result)) await withTimeout(result, this.config.timeoutMs);
    } catch (error) {
      // The lease then ends when it expires (windowMs): report it, do not fail the caller.
      this.reportError(key, asError(error), 'release', started);
    }
  }

  async reset(key: string): Promise<void> {
    const id = await storeKey(key);
    this.denials?.forget(id);
    const result = this.store.reset(id, this.ruleSet);
    if (isPromise(result)) await withTimeout(result, this.config.timeoutMs);
  }

  /** Applies onStoreError. */
  private async storeFailed(key: string, error: Error, ruleSet: RuleSet, cost: number, operation: 'consume' | 'peek', started: number): Promise<Decision> {
    const peek = operation === 'peek';
    if (error instanceof FloodgateError && (error.code === ErrorCodes.KEY || error.code === ErrorCodes.COST)) throw error;
    const policy: StoreErrorPolicy = this.config.onStoreError;
    let decision: Decision;
    if (policy === 'allow' || policy === 'deny') {
      decision = unmeasured(ruleSet.rules, policy === 'allow');
    } else {
      decision = peek ? unmeasured(ruleSet.rules, true) : { ...(await policy.consume(key, { cost })) };
    }
    decision.storeError = error;
    this.reportError(key, error, operation, started, decision);
    return decision;
  }

  private reportError(key: string, error: Error, operation: StoreOperation, started: number, decision?: Decision): void {
    if (this.events.has('error')) {
      const latencyMs = started >= 0 ? performance.now() - started : 0;
      this.events.emit('error', decision === undefined ? { key, error, operation, latencyMs } : { key, error, operation, decision, latencyMs });
      return;
    }
    // Nobody listens: log, but at most once per 10 s, so that a dead store does not flood the logs.
    const now = Date.now();
    if (now - this.lastErrorLog >= 10_000) {
      const more = this.unloggedErrors > 0 ? ` (${this.unloggedErrors} more since the last report)` : '';
      console.warn(`[floodgate] store error, onStoreError decided${more}: ${error.message}`);
      this.lastErrorLog = now;
      this.unloggedErrors = 0;
    } else {
      this.unloggedErrors++;
    }
  }
}

const unmeasuredDecisions = new WeakSet<Decision>();

/** Whether onStoreError 'allow' or 'deny' made this decision (rather than the store or an insurance limiter). */
export function isUnmeasured(decision: Decision): boolean {
  return unmeasuredDecisions.has(decision);
}

/** The decision onStoreError 'allow'/'deny' gives: the numbers are unknown. */
function unmeasured(rules: readonly CompiledRule[], allowed: boolean): Decision {
  const perRule: RuleDecision[] = rules.map((rule) => ({
    name: rule.name,
    allowed,
    limit: rule.limit,
    remaining: 0,
    resetMs: 0,
    retryAfterMs: allowed ? 0 : 1000,
    delayMs: 0,
  }));
  const decision = combine(perRule);
  unmeasuredDecisions.add(decision);
  return decision;
}

/**
 * Creates a limiter: one rule in shorthand or several `rules` (all must pass),
 * a store (memory by default), and what to do when the store fails.
 *
 * @example
 * ```ts
 * const limiter = createLimiter({ limit: 100, windowMs: 60_000 });
 * const decision = await limiter.consume('user:42');
 * if (!decision.allowed) console.log(`retry in ${decision.retryAfterMs} ms`);
 * ```
 *
 * @example Several rules, all of which must pass (SMS: 1/minute, 5/hour, 10/day)
 * ```ts
 * const sms = createLimiter({
 *   rules: [
 *     { name: 'per-minute', algorithm: 'fixed-window', limit: 1, windowMs: 60_000 },
 *     { name: 'per-hour', algorithm: 'fixed-window', limit: 5, windowMs: 3_600_000 },
 *     { name: 'per-day', algorithm: 'fixed-window', limit: 10, windowMs: 86_400_000 },
 *   ],
 * });
 * ```
 */
export function createLimiter(options: LimiterOptions): Limiter {
  return new RateLimiter(parseLimiterOptions(options));
}
