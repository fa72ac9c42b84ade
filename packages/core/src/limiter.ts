import { ALGORITHMS } from './algorithms/registry.js';
import { Analytics } from './analytics.js';
import { type BlockedKey, blockRecordName, blockRecordPrefix, MAX_REASON_LENGTH, parseBlock, recordBlock, scopeKeyOf } from './blocks-by-hand.js';
import { Breaker } from './breaker.js';
import { combine, type Decision } from './decision.js';
import { DenyCache } from './deny-cache.js';
import { checkCost, checkPage, describe, ErrorCodes, FloodgateError } from './errors.js';
import { Emitter } from './events.js';
import { joinedKeys, type Keying, type Keys, keyingOf, storeKeys } from './keys.js';
import { isPromise } from './later.js';
import {
  type LimiterConfiguration,
  type LimiterOptions,
  limiterOptionNames,
  parseLimiterOptions,
  parseRules,
  rejectUnknownKeys,
  ruleShorthandNames,
  type StoreErrorPolicy,
} from './options.js';
import { type HeldOverride, OverrideRegistry, overriddenRule } from './overrides.js';
import { type CompiledRule, MAX_BLOCK_MS, optionsOf, type RuleOptions } from './rules.js';
import type { RuleDecision, RuleSet, Store, StoreKeys, StoreRecords } from './stores/types.js';
import { type Admitter, realClock, WaitingRoom, type WaitOptions } from './wait.js';
import { type WrapOptions, wrap } from './wrap.js';

/** Events of a limiter. Payloads are built only when someone listens. */
export interface LimiterEvents {
  /** A call was admitted. */
  allowed: { key: Keys; rule: string; decision: Decision; latencyMs: number };
  /** A call was denied. */
  limited: { key: Keys; rule: string; decision: Decision; latencyMs: number };
  /**
   * The store failed or timed out. `decision` is what onStoreError decided for a
   * consume or peek (absent when a refund or a lease release failed); `latencyMs`
   * is how long the call took to fail (timeoutMs for a store that did not answer).
   * With `operation: 'settle'`, no store failed: an adapter's `settle` function
   * threw or returned no unit count (`ERR_FG_COST`), and the request's estimate stands.
   */
  error: {
    key: Keys;
    error: Error;
    /**
     * The limiter method whose store call failed, 'settle': an adapter's `settle` function failed,
     * 'overrides': loading the overrides failed (those held stay in force) or skipped some, or
     * 'analytics': writing the denial counts failed (written again later).
     */
    operation: 'consume' | 'peek' | 'refund' | 'release' | 'settle' | 'overrides' | 'analytics';
    decision?: Decision;
    latencyMs: number;
  };
  /**
   * A call started a block: a rule with `blockMs` denied it. One event per
   * rule that started one (each denying rule with blockMs does). `blockMs`
   * is this block's length (with escalation, `strike` tells which block in a
   * row it is); `until` is when it ends, on the limiter's clock.
   */
  blocked: { key: Keys; scope: string; rule: string; blockMs: number; until: number; strike: number; decision: Decision };
}

export declare namespace Limiter {
  /**
   * A change to one of the limiter's rules, for some keys: the rule's name
   * (optional when the limiter has one rule) and the fields that change
   * (`limit`, `windowMs`, `burst`, `blockMs`...). Not its scope or its
   * algorithm: the rule keeps its state, so a key keeps its count. A `burst`
   * left to its default follows a new `limit`.
   */
  type RuleOverride = Partial<Omit<RuleOptions, 'scope'>>;

  /** An override as `limiter.overrides` gives it back. */
  interface Override {
    /** The key it applies to, or a prefix of keys when it ends in '*'. */
    key: string;
    /** The changed rules, each by name. */
    rules: RuleOverride[];
    /** When it ends, on the clock of the limiter that set it; undefined: it stays until deleted. */
    untilMs?: number;
  }

  /**
   * `limiter.overrides`: per-key (and per-prefix) changes to the rules, kept
   * as records of the store. Every limiter on the store with `overrides`
   * loads them when it starts and every `refreshMs`, and applies them to the
   * calls whose key, in the scope of a rule changed, is the override's key
   * (or starts with its prefix; the key's own override first, then the
   * longest prefix): the call is decided in one store call under its rules
   * with the changed ones swapped in. Rules of the global scope cannot be
   * overridden (one count for everyone).
   */
  interface Overrides {
    /**
     * Sets the override of a key (or of every key starting with a prefix:
     * `'tenant:acme:*'`), replacing the one it had, in the store and at once in
     * this process; other processes apply it within their `refreshMs`. Refused
     * (ERR_FG_RULES, or the rule option's own code) when a rule is not one of
     * the limiter's or the changed rule would not be valid: the override in
     * force stays.
     *
     * @example
     * ```ts
     * await limiter.overrides.set('acme', [{ name: 'per-user', limit: 5_000 }], { ttlMs: 86_400_000 });
     * ```
     */
    set(key: string, rules: readonly RuleOverride[] | RuleOverride, options?: { ttlMs?: number }): Promise<void>;
    /** The override of a key (or prefix, ending in '*'), as the store holds it. */
    get(key: string): Promise<Override | undefined>;
    /** A page of the overrides in force, in key order: `cursor` from the page before; '' once none is left. */
    list(options?: { cursor?: string; count?: number }): Promise<{ items: Override[]; cursor: string }>;
    /** Deletes the override of a key (or prefix), in the store and at once in this process. */
    delete(key: string): Promise<void>;
    /** Loads every override from the store now (done every `refreshMs` on its own); rejects when the store fails, keeping those held. */
    refresh(): Promise<void>;
  }

  /** A key among the most limited: `limiter.top()`. */
  interface TopKey {
    /** The key the denying rule counts under (for a rule of another scope than `key`, that scope's key). */
    key: string;
    scope: string;
    /** Denied calls counted over every process; at most `error` above the truth (the summaries are of fixed size). */
    denied: number;
    error: number;
  }
}

/** The limiter call a store error happened in. */
type StoreOperation = LimiterEvents['error']['operation'];

export interface ConsumeOptions {
  /** Units this call takes: a positive integer. @defaultValue 1 */
  cost?: number;
  /**
   * Decide this call under these rules instead of the limiter's own: a plan,
   * a tenant's limits. State is kept per rule name and algorithm, as with
   * `updateRules`, so a client moving to another plan keeps its counts.
   * Compiled once per array (and per content, for arrays built anew per call).
   */
  rules?: readonly RuleOptions[];
}

/** Options of `peek`: the rules to look under. */
export type PeekOptions = Pick<ConsumeOptions, 'rules'>;

/**
 * Rules + a store + events. Knows no HTTP: adapters call it, and so can any
 * code that needs to limit something. A call names its key (`'user:42'`), or
 * one key per scope its rules use (`{ ip: '203.0.113.9', user: 'u42' }`).
 */
export interface Limiter {
  /** Decides a call and, when every rule admits it, records it. */
  consume(keys: Keys, options?: ConsumeOptions): Promise<Decision>;
  /** The decision a call of cost 1 would get now; consumes nothing. `remaining` = units available now. */
  peek(keys: Keys, options?: PeekOptions): Promise<Decision>;
  /** Forgets the keys in every rule. */
  reset(keys: Keys, options?: PeekOptions): Promise<void>;
  /**
   * Blocks the keys by hand for `ms`: every call is denied
   * (`retryAfterMs`: what is left; `decision.blocked.manual`) until the
   * block ends or `unblock`, on every instance sharing the store. Under every
   * rule of the limiter that can hold a block (not concurrency), or only
   * `rule`; counts stay as they are. A block by hand replaces a block the
   * key holds under a rule (`blockMs`), and counts for no escalation.
   *
   * Rules of the global scope count everyone: they are blocked only when
   * named. `reason` is kept with the block (`blocked()`, and the decisions'
   * `blocked.reason`).
   *
   * @example
   * ```ts
   * await limiter.block('203.0.113.9', 15 * 60_000, { reason: 'credential stuffing' }); // 15 minutes
   * ```
   */
  block(keys: Keys, ms: number, options?: { rule?: string; reason?: string }): Promise<void>;
  /** Lifts the keys' blocks, by hand or by a rule's `blockMs` (under `rule` only, if given); counts stay. */
  unblock(keys: Keys, options?: { rule?: string }): Promise<void>;
  /**
   * The keys blocked now, by hand or by a rule's `blockMs`, a page at a time
   * in the order of rule and key: `cursor` from the page before ('' or
   * nothing for the first), at most `count` (100 by default); the last page
   * has cursor ''. On every instance sharing the store; a store without
   * records (StoreRecords) cannot list them (`ERR_FG_OPTION`).
   */
  blocked(options?: { cursor?: string; count?: number }): Promise<{
    items: {
      /** The key the rule counts under (for a rule of another scope than `key`, that scope's key). */
      key: string;
      scope: string;
      rule: string;
      /** When the block ends, on the clock of the limiter that made it. */
      untilMs: number;
      /** The reason given to block(), if any. */
      reason?: string;
      /** Whether it was made by hand rather than by the rule's blockMs. */
      manual: boolean;
    }[];
    cursor: string;
  }>;
  /**
   * Per-key (and per-prefix) changes to the rules, kept in the store so that
   * every instance applies them: `await limiter.overrides.set('acme', [{ name:
   * 'per-user', limit: 5000 }])`. Only with `createLimiter({ overrides: true })`
   * (else ERR_FG_OPTION).
   */
  readonly overrides: Limiter.Overrides;
  /**
   * The keys denied most over the period under way and the one before, on
   * every process sharing the store, most first: at most `n` (10 by
   * default). Only with `createLimiter({ analytics: true })` (else
   * ERR_FG_OPTION). `sinceMs`: the start of the period before, on the
   * limiter's clock.
   */
  top(options?: { n?: number }): Promise<{ items: Limiter.TopKey[]; sinceMs: number }>;
  /** Gives `cost` units back to every rule, never above capacity (used by skipSuccessfulRequests). */
  refund(keys: Keys, options?: ConsumeOptions): Promise<void>;
  /** Ends the lease an admitted call took under concurrency rules (`decision.leaseId`). Adapters call it when the request's work is over. */
  release(keys: Keys, leaseId: string, options?: PeekOptions): Promise<void>;
  /** Replaces the rules; takes effect on the next call. State is kept for rules whose name and algorithm stay. */
  updateRules(rules: readonly RuleOptions[] | RuleOptions): void;
  /** The rules in force, validated and with defaults filled in. */
  readonly rules: readonly CompiledRule[];
  /** The compiled rules a call given `rules` is decided under (the limiter's own without): for headers that name windows. */
  rulesFor(rules?: readonly RuleOptions[]): readonly CompiledRule[];
  readonly store: Store;
  /** The limiter's clock. */
  now(): number;
  on<E extends keyof LimiterEvents>(event: E, listener: (payload: LimiterEvents[E]) => void): () => void;
  off<E extends keyof LimiterEvents>(event: E, listener: (payload: LimiterEvents[E]) => void): void;
  /**
   * Waits until the call is admitted, then consumes: resolves with the
   * admitted decision. Calls waiting on the same keys in this process are
   * admitted in arrival order. Rejects at once with `ERR_FG_WAIT_TIMEOUT` (a
   * RateLimitedError) when admission cannot come within `maxWaitMs`, with
   * `ERR_FG_COST` when the cost can never fit, and with the signal's reason
   * when aborted (an aborted call consumes nothing).
   *
   * @example
   * ```ts
   * const api = createLimiter({ limit: 10, windowMs: 1_000 });
   * await api.wait('github', { maxWaitMs: 30_000 }); // then call the API
   * ```
   */
  wait(keys: Keys, options?: WaitOptions): Promise<Decision>;
  /**
   * The rate-limited `fn`: each call is admitted first (its keys and cost
   * computed from its arguments), then `fn` runs with the same `this` and
   * arguments. A denial rejects with `RateLimitedError`, unless `wait` is set:
   * the call then waits its turn (see `wait()`).
   *
   * @example
   * ```ts
   * const fetchRepo = api.wrap((name: string) => fetch(`https://api.github.com/repos/${name}`), { key: () => 'github', wait: true });
   * ```
   */
  // biome-ignore lint/suspicious/noExplicitAny: any function; its parameters type the options' callbacks
  wrap<F extends (...args: any[]) => unknown>(
    fn: F,
    options: WrapOptions<Parameters<F>, ThisParameterType<F>>,
  ): (this: ThisParameterType<F>, ...args: Parameters<F>) => Promise<Awaited<ReturnType<F>>>;
  /**
   * Releases what the limiter owns: the store it created (a store you passed
   * in stays yours to close). Calls still waiting (`wait()`, `wrap()`) are
   * rejected with `ERR_FG_CLOSED`.
   */
  close(): Promise<void>;
}

/** The clock's values stay below this (about 35 000 years of ms), so that adding a window to one stays exact. */
const MAX_NOW = 2 ** 50;

/** A method that takes options, and the names it takes. */
interface CallSite {
  readonly where: string;
  readonly names: readonly string[];
}

const site = (where: string, names: string[]): CallSite => ({ where, names });
const CONSUME = site('consume()', ['cost', 'rules']);
const REFUND = site('refund()', ['cost', 'rules']);
const PEEK = site('peek()', ['rules']);
const RESET = site('reset()', ['rules']);
const RELEASE = site('release()', ['rules']);
const WAIT = site('wait()', ['cost', 'maxWaitMs', 'signal', 'priority', 'rules']);

/** Whether `name` is one of the site's names: a plain loop over two to four strings beats a Set lookup. */
function takes(names: readonly string[], name: string): boolean {
  for (let i = 0; i < names.length; i++) if (names[i] === name) return true;
  return false;
}

/**
 * Checks a call's options (unknown names are errors: a typo must not pass
 * silently) and returns its cost. A number, not an object: the usual call
 * allocates nothing for its options. The rules are `options?.rules`.
 * Checked on every call, never remembered: a caller may reuse one options
 * object and change it between calls. Kept small (the errors are built
 * elsewhere), so that the compiler inlines it into consume().
 */
function checkCall(options: ConsumeOptions | undefined, at: CallSite): number {
  if (options === undefined) return 1;
  if (typeof options !== 'object' || options === null || Array.isArray(options)) throw notOptions(options, at);
  for (const name in options) if (!takes(at.names, name)) throw unknownOption(name, at);
  const cost = options.cost;
  if (cost === undefined || cost === null) return 1; // as `cost ?? 1`
  return checkCost(cost);
}

function notOptions(options: unknown, { where }: CallSite): FloodgateError {
  return new FloodgateError(ErrorCodes.OPTION, `${where} options must be an object like { cost: 2 }, got ${describe(options)}.`);
}

function unknownOption(name: string, { where, names }: CallSite): FloodgateError {
  return new FloodgateError(ErrorCodes.UNKNOWN_OPTION, `${where} has no option '${name}'; it takes ${names.join(' and ')}.`);
}

/** A clock's value that is not an integer in range: rounded down when it is a number in range, else an error. */
function checkedTime(now: unknown): number {
  if (typeof now !== 'number' || !Number.isFinite(now) || now < 0 || now > MAX_NOW) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `The limiter's clock (now option) returned ${describe(now)}; it must return ms since the epoch, from 0 to 2^50.`,
    );
  }
  return Math.floor(now);
}

/** Rule sets given per call and compiled, remembered by content: at most this many. */
const PER_CALL_RULE_SETS = 256;
/** Rule sets made of several overrides at once that a limiter keeps (one override's are kept with it). */
const OVERRIDDEN_SETS = 4096;

/** limiter.overrides of a limiter created without `overrides`: each method says how to turn them on. */
const OVERRIDES_OFF: Limiter.Overrides = (() => {
  const off = () =>
    Promise.reject(new FloodgateError(ErrorCodes.OPTION, 'This limiter applies no overrides: create it with createLimiter({ overrides: true }).'));
  return Object.freeze({ set: off, get: off, list: off, delete: off, refresh: off });
})();
/** Rule sets found by the array a call gave without a lookup: a few plans. */
const RECENT_GIVEN = 4;

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

/**
 * Whether a store error is about one key's state, not the store: the store
 * answered, but what it holds for these keys cannot be read. Such errors do
 * not open the breaker for every key; the keys' state is reset instead.
 */
const isStateError = (error: unknown): boolean => error instanceof FloodgateError && error.code === ErrorCodes.STORE_REPLY;

/** What the limiter needs per rule set, built once when its rules change (or for rules given per call). */
interface Active {
  readonly ruleSet: RuleSet;
  readonly keying: Keying;
  /** Whether a rule is a concurrency rule: calls then take leases. */
  readonly leasing: boolean;
  /** Tells the rule sets apart in the local deny cache. */
  readonly id: number;
  /** The rules a call gave (undefined: the limiter's own), passed on to an insurance limiter. */
  readonly given: readonly RuleOptions[] | undefined;
}

/** A consume on its way to the store: what the steps after its answer need. */
interface Call {
  readonly keys: Keys;
  readonly ids: StoreKeys;
  readonly cost: number;
  /** The limiter's clock when the call was decided. */
  readonly now: number;
  readonly leaseId: string | undefined;
  readonly active: Active;
  /** performance.now() when the call began, or -1 when nobody times it. */
  readonly started: number;
}

/** The local deny cache's key of a call: its rule set and its store keys. */
const denialKey = (active: Active, ids: StoreKeys): string => `${active.id}}${joinedKeys(ids)}`;

/** What a limiter counts under, on a store it was given: its prefix and its own rules. */
interface Tenancy {
  readonly limiter: { deref(): RateLimiter | undefined };
  readonly prefix: string;
  readonly prefixGiven: boolean;
}

/** The open limiters of each store given to createLimiter, held weakly: a dropped limiter frees its names once collected. */
const tenants = new WeakMap<Store, Set<Tenancy>>();

/**
 * Throws ERR_FG_STORE_REUSE when another open limiter on `store` counts a rule
 * of the same name and scope under the same prefix: both would read and write
 * the same counters, which the memory store (one per limiter) never does. Two
 * limiters given the same prefix explicitly share on purpose.
 */
function checkTenancy(store: Store, self: RateLimiter, prefix: string, prefixGiven: boolean, rules: readonly CompiledRule[]): void {
  const others = tenants.get(store);
  if (others === undefined) return;
  for (const tenancy of others) {
    const other = tenancy.limiter.deref();
    if (other === undefined) others.delete(tenancy);
    if (other === undefined || other === self || tenancy.prefix !== prefix || (tenancy.prefixGiven && prefixGiven)) continue;
    const shared = rules.find((rule) => other.rules.some((their) => their.name === rule.name && their.scope === rule.scope));
    if (shared === undefined) continue;
    throw new FloodgateError(
      ErrorCodes.STORE_REUSE,
      `Another limiter on this store already counts rule '${shared.name}'${shared.scope === 'key' ? '' : ` (scope '${shared.scope}')`} under prefix '${prefix}': the two would share counters. Give one of them a prefix of its own (prefix: 'login:'), or share one limiter between routes (rateLimit({ limiter })). A limiter you are done with frees its names with close().`,
    );
  }
}

/** The id of the lease an admitted call under concurrency rules takes: its cost, then a unique part. */
const newLeaseId = (cost: number): string => `${cost}.${crypto.randomUUID()}`;

/** Lease ids the insurance limiter gave: released there, not against the (failing) store. */
const INSURED = '~';

class RateLimiter implements Limiter {
  private active: Active;
  readonly store: Store;
  private readonly config: LimiterConfiguration;
  /** The clock (config.now), read on every call. */
  private readonly clock: () => number;
  private readonly events = new Emitter<LimiterEvents>();
  private readonly breaker = new Breaker();
  private readonly denials: DenyCache | undefined;
  /** Whether anyone listens to 'allowed', 'limited' or 'error': only then is a call timed. */
  private timed = false;
  /** Whether anyone listens to 'allowed' or 'limited': only then is their event built. */
  private reporting = false;
  private lastErrorLog = Number.NEGATIVE_INFINITY;
  private unloggedErrors = 0;
  /** Rule sets given per call, by the array given (no work for one of a few constant arrays) ... */
  private readonly perCall = new WeakMap<readonly RuleOptions[], Active>();
  /** The rule sets of the last arrays given, newest first. */
  private recentGiven: Active[] = [];
  /** ... and by content, for arrays built anew for each call: bounded, oldest first out. */
  private readonly byContent = new Map<string, Active>();
  private activations = 0;
  private readonly tenancy: Tenancy | undefined;
  /**
   * now(), for the stores: one function for every rule set of the limiter, so
   * that a memory table shared by a limiter's plans keeps the same clock.
   */
  private readonly checkedClock = (): number => this.now();
  /** The lines of calls waiting (wait(), wrap()): made on the first wait. */
  private waiting: WaitingRoom | undefined;
  readonly overrides: Limiter.Overrides;
  /** The overrides in force, when the limiter applies them. */
  private readonly registry: OverrideRegistry | undefined;
  /** The rule sets of calls with overrides, by the rule set overridden and the overrides applied. */
  private readonly overriddenSets = new Map<string, Active>();
  /** The denial counts of top(), when analytics are on. */
  private readonly analytics: Analytics | undefined;

  constructor(config: LimiterConfiguration) {
    this.config = config;
    this.clock = config.now;
    this.store = config.store;
    this.active = this.activate(config.rules);
    this.tenancy = this.occupy();
    this.denials = config.localDenyCacheKeys > 0 ? new DenyCache(config.localDenyCacheKeys) : undefined;
    this.registry = config.overridesRefreshMs > 0 ? this.startOverrides(config.overridesRefreshMs) : undefined;
    this.overrides = this.registry ?? OVERRIDES_OFF;
    this.analytics =
      config.analyticsPeriodMs > 0
        ? new Analytics(
            {
              prefix: this.config.prefix,
              records: this.store.records as StoreRecords,
              now: () => this.now(),
              timed: (value) => withTimeout(Promise.resolve(value), this.config.timeoutMs),
              failed: (error) => this.reportError('', error, 'analytics', -1),
            },
            config.analyticsPeriodMs,
            config.analyticsSize,
          )
        : undefined;
  }

  async top(options?: { n?: number }): Promise<{ items: Limiter.TopKey[]; sinceMs: number }> {
    if (options !== undefined && (typeof options !== 'object' || options === null || Array.isArray(options))) {
      throw new FloodgateError(ErrorCodes.OPTION, `top() options must be an object like { n: 10 }, got ${describe(options)}.`);
    }
    for (const name in options) {
      if (name !== 'n') throw new FloodgateError(ErrorCodes.UNKNOWN_OPTION, `top() has no option '${name}'; it takes n.`);
    }
    const analytics = this.analytics;
    if (analytics === undefined)
      throw new FloodgateError(ErrorCodes.OPTION, 'This limiter counts no denials: create it with createLimiter({ analytics: true }).');
    const n = options?.n ?? 10;
    if (!Number.isSafeInteger(n) || n < 1 || n > 10_000)
      throw new FloodgateError(ErrorCodes.OPTION, `top()'s n must be an integer from 1 to 10000, got ${describe(n)}.`);
    return analytics.top(n);
  }

  /** Counts a denied call for top(): under the rule that denied it. */
  private countDenial(keys: Keys, decision: Decision, now: number): void {
    const denying = decision.rules.find((rule) => rule.name === decision.rule) ?? decision.rules.find((rule) => !rule.allowed);
    if (denying === undefined) return;
    const key = scopeKeyOf(keys, denying.scope);
    if (key !== undefined) (this.analytics as Analytics).denied(denying.scope, key, now);
  }

  private startOverrides(refreshMs: number): OverrideRegistry {
    return new OverrideRegistry(
      {
        prefix: this.config.prefix,
        records: this.store.records as StoreRecords,
        rules: () => this.active.ruleSet.rules,
        now: () => this.now(),
        timed: (value) => withTimeout(Promise.resolve(value), this.config.timeoutMs),
        failed: (error) => this.reportError('', error, 'overrides', -1),
      },
      refreshMs,
    );
  }

  /**
   * The rule set a call is decided under once the overrides of its keys are
   * swapped in: `active` itself when none applies (or none is held).
   */
  private overridden(active: Active, keys: Keys): Active {
    const registry = this.registry;
    if (registry === undefined || registry.size === 0) return active;
    const rules = active.ruleSet.rules;
    let found: (HeldOverride | undefined)[] | undefined;
    let count = 0;
    let last = 0;
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i] as CompiledRule;
      if (rule.scope === 'global') continue;
      const key = scopeKeyOf(keys, rule.scope);
      const held = key === undefined ? undefined : registry.match(key, this.checkedClock);
      if (held?.byName.has(rule.name)) {
        found ??= [];
        found[i] = held;
        count++;
        last = i;
      }
    }
    if (found === undefined) return active;
    if (count === 1) {
      // One override: its rule sets are kept with it, as many as the rule sets it is used with.
      const held = found[last] as HeldOverride;
      let byRule = held.sets.get(active.id) as Active[] | undefined;
      if (byRule === undefined) {
        byRule = [];
        held.sets.set(active.id, byRule);
      }
      byRule[last] ??= this.withOverrides(active, found);
      return byRule[last] as Active;
    }
    let id = `${active.id}`;
    for (let i = 0; i < rules.length; i++) id += `:${found[i]?.id ?? 0}`;
    let overridden = this.overriddenSets.get(id);
    if (overridden === undefined) {
      overridden = this.withOverrides(active, found);
      if (this.overriddenSets.size >= OVERRIDDEN_SETS) this.overriddenSets.clear();
      this.overriddenSets.set(id, overridden);
    }
    return overridden;
  }

  /** `active` with the rules `found` changes changed. */
  private withOverrides(active: Active, found: readonly (HeldOverride | undefined)[]): Active {
    const changed = active.ruleSet.rules.map((rule, i) => {
      const change = found[i]?.byName.get(rule.name);
      if (change === undefined) return rule;
      try {
        return overriddenRule(rule, change);
      } catch {
        return rule; // a call's own rules of that name that the override does not fit: as they are
      }
    });
    return this.activate(Object.freeze(changed));
  }

  private activate(rules: readonly CompiledRule[], given?: readonly RuleOptions[]): Active {
    return {
      ruleSet: { prefix: this.config.prefix, rules, now: this.checkedClock },
      keying: keyingOf(rules),
      leasing: rules.some((rule) => rule.algorithm === 'concurrency'),
      id: this.activations++,
      given,
    };
  }

  /** The limiter's own rule set, or the one a call names. */
  private activeFor(rules: readonly RuleOptions[] | undefined): Active {
    if (rules === undefined) return this.active;
    // The last few arrays given (a call picks one of a few plans) are found without a lookup.
    const recent = this.recentGiven;
    for (let i = 0; i < recent.length; i++) {
      const active = recent[i] as Active;
      if (active.given === rules) return active;
    }
    return this.remember(this.compiledFor(rules));
  }

  /** The rule set of an array not among the last few given: compiled once per array, and once per content. */
  private compiledFor(rules: readonly RuleOptions[]): Active {
    let active = this.perCall.get(rules);
    if (active !== undefined) return active;
    if (!Array.isArray(rules)) {
      throw new FloodgateError(
        ErrorCodes.RULES,
        `The rules of a call must be an array of rules, like [{ limit: 100, windowMs: 60_000 }], got ${describe(rules)}.`,
      );
    }
    const content = JSON.stringify(rules);
    active = this.byContent.get(content);
    if (active === undefined) {
      active = this.activate(parseRules({ rules }, 'The rules of a call'), rules);
      if (this.byContent.size >= PER_CALL_RULE_SETS) this.byContent.delete(this.byContent.keys().next().value as string);
      this.byContent.set(content, active);
    }
    this.perCall.set(rules, active);
    return active;
  }

  /** Keeps `active` among the rule sets found without a lookup. */
  private remember(active: Active): Active {
    this.recentGiven.unshift(active);
    if (this.recentGiven.length > RECENT_GIVEN) this.recentGiven.pop();
    return active;
  }

  get rules(): readonly CompiledRule[] {
    return this.active.ruleSet.rules;
  }

  rulesFor(rules?: readonly RuleOptions[]): readonly CompiledRule[] {
    return this.activeFor(rules).ruleSet.rules;
  }

  now(): number {
    const now = this.clock();
    // One range check for Date.now() and any sane clock (NaN and non-numbers fail it); the rest only on a miss.
    if (now >= 0 && now <= MAX_NOW && Math.floor(now) === now) return now;
    return checkedTime(now);
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
    if (!Array.isArray(rules))
      rejectUnknownKeys(
        rules,
        ruleShorthandNames,
        'updateRules()',
        limiterOptionNames,
        'updateRules() takes rules; other options are fixed when the limiter is created',
      );
    const compiled = Array.isArray(rules) ? parseRules({ rules }, 'updateRules()') : parseRules(rules as RuleOptions, 'updateRules()');
    if (this.tenancy !== undefined) checkTenancy(this.store, this, this.config.prefix, this.config.prefixGiven, compiled);
    this.active = this.activate(compiled);
    this.denials?.clear();
    this.waiting?.wakeAll();
  }

  /** Registers the limiter with the store it was given, after checking that no other one counts the same names. */
  private occupy(): Tenancy | undefined {
    const { store, prefix, prefixGiven, ownsStore, rules } = this.config;
    // Without WeakRef (workerd) a registry would hold every limiter forever: no check there.
    if (ownsStore || typeof WeakRef !== 'function') return undefined;
    checkTenancy(store, this, prefix, prefixGiven, rules);
    const tenancy: Tenancy = { limiter: new WeakRef(this), prefix, prefixGiven };
    const others = tenants.get(store) ?? new Set<Tenancy>();
    tenants.set(store, others);
    others.add(tenancy);
    return tenancy;
  }

  async close(): Promise<void> {
    this.registry?.stop();
    this.analytics?.stop();
    await this.analytics?.flush().catch(() => {});
    if (this.tenancy !== undefined) tenants.get(this.store)?.delete(this.tenancy);
    await this.waitingRoom().close();
    if (this.config.ownsStore) await this.store.close?.();
  }

  wait(keys: Keys, options?: WaitOptions): Promise<Decision> {
    try {
      const cost = checkCall(options, WAIT);
      const rules = options?.rules;
      return this.waitingRoom().wait(keys, cost, rules, options?.maxWaitMs, options?.signal, options?.priority);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  // biome-ignore lint/suspicious/noExplicitAny: as in the interface
  wrap<F extends (...args: any[]) => unknown>(
    fn: F,
    options: WrapOptions<Parameters<F>, ThisParameterType<F>>,
  ): (this: ThisParameterType<F>, ...args: Parameters<F>) => Promise<Awaited<ReturnType<F>>> {
    return wrap(this, fn as (this: ThisParameterType<F>, ...args: Parameters<F>) => ReturnType<F>, options);
  }

  private waitingRoom(): WaitingRoom {
    if (this.waiting !== undefined) return this.waiting;
    const admitter: Admitter = {
      consume: (keys, options) => this.consume(keys, options),
      refund: (keys, options) => this.refund(keys, options),
      release: (keys, leaseId, options) => this.release(keys, leaseId, options),
      rulesFor: (rules) => this.rulesFor(rules),
      lineOf: (keys, rules) => {
        const active = this.activeFor(rules);
        const ids = storeKeys(active.keying, keys);
        return isPromise(ids) ? ids.then((resolved) => this.lineOf(active, resolved)) : this.lineOf(active, ids);
      },
    };
    this.waiting = new WaitingRoom(
      admitter,
      realClock(() => this.now()),
    );
    return this.waiting;
  }

  /**
   * The line calls wait in: the same store keys under the same rules. Calls under the limiter's own rules
   * keep their line across updateRules() (they are decided under the rules in force when they ask).
   */
  private lineOf(active: Active, ids: StoreKeys): string {
    return active === this.active ? `*}${joinedKeys(ids)}` : denialKey(active, ids);
  }

  consume(keys: Keys, options?: ConsumeOptions): Promise<Decision> {
    try {
      const decision = this.consumeNow(keys, options);
      return isPromise(decision) ? decision : Promise.resolve(decision);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * consume() without a promise when the store answers synchronously (MemoryStore): the
   * decision is made here and now, without the frames and promises of an async call.
   * Throws what consume() rejects with.
   */
  consumeNow(keys: Keys, options?: ConsumeOptions): Decision | Promise<Decision> {
    const cost = checkCall(options, CONSUME);
    const active = this.overridden(options === undefined ? this.active : this.activeFor(options.rules), keys);
    const ids = storeKeys(active.keying, keys);
    return isPromise(ids) ? this.decideHashed(keys, ids, cost, active) : this.decide(keys, ids, cost, active);
  }

  /**
   * Decides a call once its long keys are hashed. A method of its own: a
   * closure in consumeNow() would make every call allocate a context for the
   * variables it captures, hashed or not.
   */
  private decideHashed(keys: Keys, ids: Promise<StoreKeys>, cost: number, active: Active): Promise<Decision> {
    return ids.then((resolved) => this.decide(keys, resolved, cost, active));
  }

  /** Decides a call: synchronously when the store and the deny cache can, else a promise. */
  private decide(keys: Keys, ids: StoreKeys, cost: number, active: Active, reported = true): Decision | Promise<Decision> {
    const ruleSet = active.ruleSet;
    // Untimed, a call reports no 'allowed' or 'limited' (report()): units taken after the fact are no call of their own.
    const started = reported && this.timed ? performance.now() : -1;
    const now = this.now();
    if (this.denials !== undefined) {
      const remembered = this.denials.lookup(denialKey(active, ids), cost, now);
      if (remembered !== undefined) {
        if (this.analytics !== undefined) this.countDenial(keys, remembered, now);
        return this.report(keys, remembered, started);
      }
    }
    if (!this.breaker.allows()) return this.storeFailed({ keys, active, cost, started }, unavailable(), 'consume');
    const call: Call = { keys, ids, cost, now, leaseId: active.leasing ? newLeaseId(cost) : undefined, active, started };
    let result: RuleDecision[] | Promise<RuleDecision[]>;
    try {
      result = this.store.consume(ids, ruleSet, cost, now, call.leaseId);
    } catch (error) {
      return this.consumeFailed(call, error);
    }
    // Anything but a promise is the store's answer; decided() treats one that is not a list of decisions as a failure.
    if (Array.isArray(result) || !isPromise(result)) return this.decided(call, result);
    return this.awaitStore(call, result);
  }

  /** Decides a call on a store that answers later (Redis): within timeoutMs, or as a store failure. */
  private awaitStore(call: Call, result: Promise<RuleDecision[]>): Promise<Decision> {
    return withTimeout(result, this.config.timeoutMs).then(
      (rules) => this.decided(call, rules),
      (error: unknown) => this.consumeFailed(call, error),
    );
  }

  /** What the store answered, as a Decision: remembered, reported, with its lease. */
  private decided(call: Call, rules: RuleDecision[]): Decision | Promise<Decision> {
    let decision: Decision;
    try {
      decision = combine(rules);
    } catch (error) {
      return this.consumeFailed(call, error); // a store that answered nonsense
    }
    this.breaker.succeeded();
    if (!decision.allowed) stampBlocks(decision, call.now);
    if (call.leaseId !== undefined && decision.allowed) decision.leaseId = call.leaseId;
    if (this.denials !== undefined) this.noteDenial(this.denials, call, decision);
    if (!decision.allowed && (this.events.has('blocked') || this.store.records !== undefined)) this.reportBlocks(call.keys, decision, call.now);
    if (!decision.allowed && this.analytics !== undefined) this.countDenial(call.keys, decision, call.now);
    if (!decision.allowed && this.store.records !== undefined && decision.rules.some((r) => r.blocked?.manual)) {
      return this.withReasons(call.keys, decision).then((told) => this.report(call.keys, told, call.started));
    }
    return this.report(call.keys, decision, call.started);
  }

  /** Adds the reasons of the blocks by hand that deny a call, from the store's records; a failure to read them only goes unsaid. */
  private async withReasons(keys: Keys, decision: Decision): Promise<Decision> {
    const manual = decision.rules.filter((r) => r.blocked?.manual);
    const names = manual.map((r) => blockRecordName(this.config.prefix, r.name, scopeKeyOf(keys, r.scope) ?? ''));
    try {
      const values = await withTimeout(Promise.resolve((this.store.records as StoreRecords).get(names)), this.config.timeoutMs);
      manual.forEach((r, i) => {
        const value = values[i];
        const reason = typeof value === 'string' ? parseBlock(value)?.reason : undefined;
        if (reason !== undefined && r.blocked !== undefined) r.blocked.reason = reason;
      });
    } catch (error) {
      this.reportError(keys, asError(error), 'consume', -1);
    }
    return decision;
  }

  /** Keeps the local deny cache up to date with a decision of the store. */
  private noteDenial(denials: DenyCache, { active, ids, cost, now }: Call, decision: Decision): void {
    // A lease can end at any moment in any process: a concurrency denial says nothing about the next call;
    // nor does a block by hand, which unblock() may lift at any moment in another process.
    if (decision.allowed || active.leasing || decision.rules.some((r) => r.blocked?.manual)) denials.forget(denialKey(active, ids));
    else denials.remember(denialKey(active, ids), cost, decision, now);
  }

  /** Emits 'blocked' for each rule whose block this denial started. */
  private reportBlocks(keys: Keys, decision: Decision, now: number): void {
    const records = this.store.records;
    for (const r of decision.rules) {
      const block = r.blocked;
      if (block === undefined || !block.started) continue;
      // Listed by blocked(): the record tells of the block; the rule's state enforces it.
      const key = scopeKeyOf(keys, r.scope);
      if (records !== undefined && key !== undefined) {
        const listed: BlockedKey = { key, scope: r.scope, rule: r.name, untilMs: now + block.blockMs, manual: false };
        Promise.resolve()
          .then(() => recordBlock(records, this.config.prefix, listed, block.blockMs))
          .catch((error: unknown) => this.reportError(keys, asError(error), 'consume', -1));
      }
      if (!this.events.has('blocked')) continue;
      this.events.emit('blocked', {
        key: keys,
        scope: r.scope,
        rule: r.name,
        blockMs: block.blockMs,
        until: now + block.blockMs,
        strike: block.strike,
        decision,
      });
    }
  }

  private consumeFailed(call: Call, error: unknown): Promise<Decision> {
    this.failed(call.ids, call.active.ruleSet, error);
    return this.storeFailed(call, asError(error), 'consume');
  }

  /** Counts a failure for the breaker, unless only these keys' state is to blame: that state is reset instead. */
  private failed(ids: StoreKeys, ruleSet: RuleSet, error: unknown): void {
    if (!isStateError(error)) {
      this.breaker.failed();
      return;
    }
    this.breaker.succeeded();
    try {
      const reset = this.store.reset(ids, ruleSet);
      if (isPromise(reset)) reset.catch(() => {});
    } catch {
      // the next call fails the same way, and tries again
    }
  }

  /** Emits 'allowed' or 'limited' when someone listens to them (the call was then timed). */
  private report(keys: Keys, decision: Decision, started: number): Decision {
    if (this.reporting && started >= 0) {
      const event = decision.allowed ? 'allowed' : 'limited';
      this.events.emit(event, { key: keys, rule: decision.rule, decision, latencyMs: performance.now() - started });
    }
    return decision;
  }

  /**
   * consume() for units a call already admitted takes once its real cost is
   * known (an adapter's `settle`): decided the same way, without the
   * 'allowed' or 'limited' event, which count calls.
   */
  async consumeUnreported(keys: Keys, options: ConsumeOptions): Promise<Decision> {
    const cost = checkCall(options, CONSUME);
    const active = this.overridden(this.activeFor(options.rules), keys);
    return this.decide(keys, await storeKeys(active.keying, keys), cost, active, false);
  }

  /** Reports what an adapter's `settle` function did wrong, as a store error is reported: the 'error' event, or the log. */
  reportSettleError(keys: Keys, error: Error): void {
    this.reportError(keys, error, 'settle', -1);
  }

  async peek(keys: Keys, options?: PeekOptions): Promise<Decision> {
    checkCall(options, PEEK);
    const active = this.overridden(this.activeFor(options?.rules), keys);
    const ids = await storeKeys(active.keying, keys);
    const ruleSet = active.ruleSet;
    const started = this.timed ? performance.now() : -1;
    if (!this.breaker.allows()) return this.storeFailed({ keys, active, cost: 1, started }, unavailable(), 'peek');
    try {
      const now = this.now();
      const result = this.store.peek(ids, ruleSet, now);
      // As in decide(): anything but a promise is the store's answer, and combine() rejects one that is not decisions.
      const decision = combine(Array.isArray(result) || !isPromise(result) ? result : await withTimeout(result, this.config.timeoutMs));
      this.breaker.succeeded();
      if (!decision.allowed) stampBlocks(decision, now);
      if (!decision.allowed && this.store.records !== undefined && decision.rules.some((r) => r.blocked?.manual)) return this.withReasons(keys, decision);
      return decision;
    } catch (error) {
      this.failed(ids, ruleSet, error);
      return this.storeFailed({ keys, active, cost: 1, started }, asError(error), 'peek');
    }
  }

  async refund(keys: Keys, options?: ConsumeOptions): Promise<void> {
    const cost = checkCall(options, REFUND);
    const active = this.overridden(this.activeFor(options?.rules), keys);
    const ids = await storeKeys(active.keying, keys);
    this.denials?.forget(denialKey(active, ids));
    const started = this.timed ? performance.now() : -1;
    try {
      const result = this.store.refund(ids, active.ruleSet, cost, this.now());
      if (isPromise(result)) await withTimeout(result, this.config.timeoutMs);
    } catch (error) {
      // A refund that does not reach the store only makes the limit stricter: report it, do not fail the caller.
      this.reportError(keys, asError(error), 'refund', started);
    }
    this.waiting?.wake(this.lineOf(active, ids));
  }

  async release(keys: Keys, leaseId: string, options?: PeekOptions): Promise<void> {
    checkCall(options, RELEASE);
    const rules = options?.rules;
    if (typeof leaseId !== 'string' || leaseId === '') return;
    const policy = this.config.onStoreError;
    if (leaseId.startsWith(INSURED)) {
      // The insurance limiter took this lease while the store was down: it gives it back.
      if (typeof policy === 'object' && typeof policy.release === 'function') await policy.release(keys, leaseId.slice(INSURED.length));
      return;
    }
    const active = this.overridden(this.activeFor(rules), keys);
    const ids = await storeKeys(active.keying, keys);
    if (this.store.release === undefined) return;
    const started = this.timed ? performance.now() : -1;
    try {
      const result = this.store.release(ids, active.ruleSet, leaseId, this.now());
      if (isPromise(result)) await withTimeout(result, this.config.timeoutMs);
    } catch (error) {
      // The lease then ends when it expires (windowMs): report it, do not fail the caller.
      this.reportError(keys, asError(error), 'release', started);
    }
    this.waiting?.wake(this.lineOf(active, ids));
  }

  async block(keys: Keys, ms: number, options?: { rule?: string; reason?: string }): Promise<void> {
    const active = this.blockable('block()', options, ['rule', 'reason']);
    if (!Number.isSafeInteger(ms) || ms < 1 || ms > MAX_BLOCK_MS) {
      throw new FloodgateError(
        ErrorCodes.OPTION,
        `block() takes the block's length in ms, a positive integer of at most ${MAX_BLOCK_MS} (100 years), got ${describe(ms)}.`,
      );
    }
    const reason = options?.reason;
    if (reason !== undefined && (typeof reason !== 'string' || reason.length > MAX_REASON_LENGTH)) {
      throw new FloodgateError(ErrorCodes.OPTION, `block()'s reason must be a string of at most ${MAX_REASON_LENGTH} characters, got ${describe(reason)}.`);
    }
    const ids = await storeKeys(active.keying, keys);
    const now = this.now();
    const result = (this.store.block as NonNullable<Store['block']>)(ids, active.ruleSet, ms, now);
    if (isPromise(result)) await withTimeout(result, this.config.timeoutMs);
    const records = this.store.records;
    if (records === undefined) return;
    await Promise.all(
      active.ruleSet.rules.map((rule) => {
        const block: BlockedKey = { key: scopeKeyOf(keys, rule.scope) as string, scope: rule.scope, rule: rule.name, untilMs: now + ms, manual: true };
        if (reason !== undefined) block.reason = reason;
        return withTimeout(Promise.resolve(recordBlock(records, this.config.prefix, block, ms)), this.config.timeoutMs);
      }),
    );
  }

  async blocked(options?: { cursor?: string; count?: number }): ReturnType<Limiter['blocked']> {
    const { cursor, count } = checkPage('blocked()', options);
    const records = this.store.records;
    if (records === undefined) throw new FloodgateError(ErrorCodes.OPTION, 'blocked(): this store keeps no records (StoreRecords), so it cannot list blocks.');
    const prefix = blockRecordPrefix(this.config.prefix);
    const page = await withTimeout(Promise.resolve(records.list(prefix, cursor === '' ? '' : prefix + cursor, count)), this.config.timeoutMs);
    const now = this.now();
    const items = page.records.map(([, value]) => parseBlock(value)).filter((block): block is BlockedKey => block !== undefined && block.untilMs > now);
    return { items, cursor: page.next === '' ? '' : page.next.slice(prefix.length) };
  }

  async unblock(keys: Keys, options?: { rule?: string }): Promise<void> {
    const active = this.blockable('unblock()', options, ['rule']);
    const ids = await storeKeys(active.keying, keys);
    const result = (this.store.unblock as NonNullable<Store['unblock']>)(ids, active.ruleSet, this.now());
    if (isPromise(result)) await withTimeout(result, this.config.timeoutMs);
    await this.forgetBlocks(keys, active);
    // This process's remembered denials of the keys go: the next call asks the store.
    this.denials?.forget(denialKey(active, ids));
    if (active !== this.active) this.denials?.forget(denialKey(this.active, await storeKeys(this.active.keying, keys)));
    this.waiting?.wake(this.lineOf(this.active, await storeKeys(this.active.keying, keys)));
  }

  /**
   * The rules a block by hand goes under: the limiter's own that can hold one
   * and count per key (a global rule counts everyone: only when named), or the
   * one named.
   */
  private blockable(where: string, options: { rule?: string } | undefined, takes: readonly string[]): Active {
    if (options !== undefined && (typeof options !== 'object' || options === null || Array.isArray(options))) {
      throw new FloodgateError(ErrorCodes.OPTION, `${where} options must be an object like { rule: 'per-minute' }, got ${describe(options)}.`);
    }
    for (const name in options) {
      if (!takes.includes(name)) throw new FloodgateError(ErrorCodes.UNKNOWN_OPTION, `${where} has no option '${name}'; it takes ${takes.join(' and ')}.`);
    }
    if (typeof this.store.block !== 'function' || typeof this.store.unblock !== 'function') {
      throw new FloodgateError(ErrorCodes.OPTION, `${where}: this store cannot block keys by hand (it has no block() and unblock()).`);
    }
    const own = this.active.ruleSet.rules;
    const name = options?.rule;
    if (name === undefined) {
      const chosen = own.filter((rule) => ALGORITHMS[rule.algorithm].blocks && rule.scope !== 'global');
      if (chosen.length === 0) {
        throw new FloodgateError(
          ErrorCodes.OPTION,
          `${where}: no rule of this limiter can hold a block for a key (concurrency rules cannot; a global rule only when named in { rule }).`,
        );
      }
      return chosen.length === own.length ? this.active : this.activeFor(chosen.map(optionsOf));
    }
    const rule = own.find((r) => r.name === name);
    if (rule === undefined || !ALGORITHMS[rule.algorithm].blocks) {
      throw new FloodgateError(
        ErrorCodes.OPTION,
        `${where}: rule must name one of this limiter's rules that can hold a block (${own
          .filter((r) => ALGORITHMS[r.algorithm].blocks)
          .map((r) => `'${r.name}'`)
          .join(', ')}), got ${describe(name)}.`,
      );
    }
    return this.activeFor([optionsOf(rule)]);
  }

  async reset(keys: Keys, options?: PeekOptions): Promise<void> {
    checkCall(options, RESET);
    const active = this.overridden(this.activeFor(options?.rules), keys);
    const ids = await storeKeys(active.keying, keys);
    this.denials?.forget(denialKey(active, ids));
    // A reset lifts blocks too: their records go with the states (so that blocked() no longer lists them), at the same time.
    const result = this.store.reset(ids, active.ruleSet);
    await Promise.all([isPromise(result) ? withTimeout(result, this.config.timeoutMs) : undefined, this.forgetBlocks(keys, active)]);
    this.waiting?.wake(this.lineOf(active, ids));
  }

  /** Deletes the records of the keys' blocks under the rules of `active` (what blocked() lists). */
  private async forgetBlocks(keys: Keys, active: Active): Promise<void> {
    const records = this.store.records;
    if (records === undefined) return;
    const names: string[] = [];
    for (const rule of active.ruleSet.rules) {
      const key = scopeKeyOf(keys, rule.scope);
      if (key !== undefined) names.push(blockRecordName(this.config.prefix, rule.name, key));
    }
    if (names.length > 0) await withTimeout(Promise.resolve(records.delete(names)), this.config.timeoutMs);
  }

  /** Applies onStoreError. */
  private async storeFailed(
    { keys, active, cost, started }: Pick<Call, 'keys' | 'active' | 'cost' | 'started'>,
    error: Error,
    operation: 'consume' | 'peek',
  ): Promise<Decision> {
    const { ruleSet, given } = active;
    if (error instanceof FloodgateError && (error.code === ErrorCodes.KEY || error.code === ErrorCodes.COST)) throw error;
    const policy: StoreErrorPolicy = this.config.onStoreError;
    let decision: Decision;
    if (policy === 'allow' || policy === 'deny') {
      decision = unmeasured(ruleSet.rules, policy === 'allow');
    } else if (operation === 'peek') {
      decision = unmeasured(ruleSet.rules, true);
    } else {
      decision = { ...(await policy.consume(keys, given === undefined ? { cost } : { cost, rules: given })) };
      if (decision.leaseId !== undefined) decision.leaseId = INSURED + decision.leaseId;
    }
    decision.storeError = error;
    this.reportError(keys, error, operation, started, decision);
    return decision;
  }

  private reportError(keys: Keys, error: Error, operation: StoreOperation, started: number, decision?: Decision): void {
    if (this.events.has('error')) {
      const latencyMs = started >= 0 ? performance.now() - started : 0;
      this.events.emit('error', decision === undefined ? { key: keys, error, operation, latencyMs } : { key: keys, error, operation, decision, latencyMs });
      return;
    }
    // Nobody listens: log, but at most once per 10 s, so that a dead store does not flood the logs.
    const now = Date.now();
    if (now - this.lastErrorLog >= 10_000) {
      const more = this.unloggedErrors > 0 ? ` (${this.unloggedErrors} more since the last report)` : '';
      const decided = decision === undefined ? '' : ` (onStoreError ${decision.allowed ? 'allowed' : 'denied'} the call)`;
      const what = operation === 'settle' ? 'settle function failed' : `store error during ${operation}`;
      console.warn(`[floodgate] ${what}${more}: ${error.message}${decided}`);
      this.lastErrorLog = now;
      this.unloggedErrors = 0;
    } else {
      this.unloggedErrors++;
    }
  }
}

const unmeasuredDecisions = new WeakSet<Decision>();

/**
 * `limiter.consume()`, answered synchronously when the limiter is one of Floodgate's and its
 * store can (MemoryStore): for the request flow, which then needs no promise either. Throws
 * what consume() rejects with.
 */
export function consumeNow(limiter: Limiter, keys: Keys, options?: ConsumeOptions): Decision | Promise<Decision> {
  return limiter instanceof RateLimiter ? limiter.consumeNow(keys, options) : limiter.consume(keys, options);
}

/**
 * Takes more units for a call already admitted, without reporting a call of
 * its own ('allowed'/'limited'), when the limiter is one of Floodgate's.
 */
export function consumeUnreported(limiter: Limiter, keys: Keys, options: ConsumeOptions): Promise<Decision> {
  return limiter instanceof RateLimiter ? limiter.consumeUnreported(keys, options) : limiter.consume(keys, options);
}

/** Reports an adapter's failed `settle` function through the limiter's 'error' event (or its log). */
export function reportSettleError(limiter: Limiter, keys: Keys, error: Error): void {
  if (limiter instanceof RateLimiter) limiter.reportSettleError(keys, error);
  else console.warn(`[floodgate] ${error.message}`);
}

/** Says when each block of a denial ends, on the limiter's clock. */
function stampBlocks(decision: Decision, now: number): void {
  for (const rule of decision.rules) if (rule.blocked !== undefined) rule.blocked.untilMs = now + rule.blocked.leftMs;
}

/** Whether onStoreError 'allow' or 'deny' made this decision (rather than the store or an insurance limiter). */
export function isUnmeasured(decision: Decision): boolean {
  return unmeasuredDecisions.has(decision);
}

/** The decision onStoreError 'allow'/'deny' gives: the numbers are unknown. */
function unmeasured(rules: readonly CompiledRule[], allowed: boolean): Decision {
  const perRule: RuleDecision[] = rules.map((rule) => ({
    name: rule.name,
    scope: rule.scope,
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
 *
 * @example Several keys in one call: for everyone, per IP and per user, all or nothing
 * ```ts
 * const orders = createLimiter({
 *   rules: [
 *     { name: 'all', scope: 'global', limit: 50, windowMs: 10_000 },
 *     { name: 'per-ip', scope: 'ip', limit: 5, windowMs: 2_000 },
 *     { name: 'per-user', scope: 'user', limit: 2, windowMs: 1_000 },
 *   ],
 * });
 * await orders.consume({ ip: '203.0.113.9', user: 'u42' });
 * ```
 */
export function createLimiter(options: LimiterOptions): Limiter {
  return new RateLimiter(parseLimiterOptions(options));
}
