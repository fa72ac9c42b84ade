import type { Decision } from './decision.js';
import { describe, ErrorCodes, FloodgateError, orDefault } from './errors.js';
import type { Keys } from './keys.js';
import { type CompiledRule, compileRule, compileRules, type RuleOptions } from './rules.js';
import { MAX_TIMER_MS } from './sleep.js';
import { MemoryStore } from './stores/memory-store.js';
import type { Store } from './stores/types.js';

/** Options of `createLimiter`: one rule in shorthand, or `rules`. */
export interface LimiterOptions extends Partial<RuleOptions> {
  /** Several rules, all of which must admit a call (AND). Not together with the shorthand fields. */
  rules?: readonly RuleOptions[];
  /** Where state lives. @defaultValue `new MemoryStore()` */
  store?: Store;
  /** Key namespace, so limiters can share a store. @defaultValue `'fg:'` */
  prefix?: string;
  /** A store call slower than this counts as a store error. @defaultValue 200 */
  timeoutMs?: number;
  /** `'allow'` (fail open), `'deny'` (fail closed), or a limiter that decides instead. @defaultValue `'allow'` */
  onStoreError?:
    | 'allow'
    | 'deny'
    | {
        /** Decides instead of the store: a limiter on a MemoryStore, usually. */
        consume(keys: Keys, options?: { cost?: number; rules?: readonly RuleOptions[] }): Promise<Decision>;
        /** Gives back a lease the insurance took under a concurrency rule. */
        release?(keys: Keys, leaseId: string): Promise<void>;
      };
  /** The limiter's clock in ms. @defaultValue `Date.now` */
  now?: () => number;
  /**
   * Remember denials in this process: once a call is denied until T, the
   * same call (key and cost) is denied here until T without a store round
   * trip. Protects a shared store from a flood of one key. `true` keeps up
   * to 10 000 keys. @defaultValue false
   */
  localDenyCache?: boolean | { maxKeys?: number };
  /**
   * Apply the overrides kept in the store (`limiter.overrides`): loaded when
   * the limiter starts and again every `refreshMs`, so that a change made
   * anywhere is in force everywhere within it. Needs a store that keeps
   * records (every store of Floodgate's). `true` refreshes every 5 s. @defaultValue false
   */
  overrides?: boolean | { refreshMs?: number };
  /**
   * Count denied calls by key, for `limiter.top()`: each process keeps the
   * `size` keys denied most in each period of `periodMs` (a fixed-size
   * summary, apart from the rules' state) and writes it to the store's
   * records every few seconds. `true`: periods of a minute, 100 keys. @defaultValue false
   */
  analytics?: boolean | { periodMs?: number; size?: number };
}

/** What to do when the store fails or does not answer within `timeoutMs`. */
export type StoreErrorPolicy = NonNullable<LimiterOptions['onStoreError']>;
/** Something that decides like a limiter: what `onStoreError` accepts as insurance. */
export type InsuranceLimiter = Exclude<StoreErrorPolicy, string>;

/** LimiterOptions with every default filled in and every value checked. */
export interface LimiterConfiguration {
  rules: readonly CompiledRule[];
  store: Store;
  prefix: string;
  timeoutMs: number;
  onStoreError: StoreErrorPolicy;
  now: () => number;
  /** Most keys the local deny cache holds; 0 when it is off. */
  localDenyCacheKeys: number;
  /** How often overrides are loaded again; 0 when they are off. */
  overridesRefreshMs: number;
  /** The period denied calls are counted over for top(); 0 when analytics are off. */
  analyticsPeriodMs: number;
  /** Keys each process counts per period. */
  analyticsSize: number;
  /** Whether the limiter created its store (the default MemoryStore), and closes it with itself. */
  ownsStore: boolean;
  /** Whether `prefix` was given (not the default): two limiters given the same prefix share counters on purpose. */
  prefixGiven: boolean;
}

const shorthandKeys = ['name', 'algorithm', 'limit', 'windowMs', 'burst', 'segments', 'mode', 'scope', 'blockMs', 'maxBlockMs'] as const;
/**
 * The options that describe one rule in shorthand (createLimiter's own, or
 * updateRules'): replaced as a whole by `rules`, and the other way round.
 */
export const ruleShorthandNames: ReadonlySet<string> = new Set(shorthandKeys);

/** Every option createLimiter takes. */
export const limiterOptionNames: ReadonlySet<string> = new Set([
  ...shorthandKeys,
  'rules',
  'store',
  'prefix',
  'timeoutMs',
  'onStoreError',
  'now',
  'localDenyCache',
  'overrides',
  'analytics',
]);
/** The options adapters' rateLimit() takes on top of the limiter's. */
export const adapterOptionNames: ReadonlySet<string> = new Set([
  'limiter',
  'key',
  'cost',
  'skip',
  'statusCode',
  'message',
  'handler',
  'headers',
  'skipSuccessfulRequests',
  'skipFailedRequests',
  'shadow',
  'settle',
  'allowList',
  'denyList',
  'problemDetails',
  'validate',
]);

/** The longest `prefix` a limiter takes. */
export const MAX_PREFIX_LENGTH = 64;

/**
 * A key namespace of its own for a limiter an adapter derives from another's
 * options (a Fastify route's, a NestJS handler's own limits): `base` + `name`
 * + ':', so that it never shares counters with the limiter it inherits from.
 * A name too long for a prefix is shortened and made unique with a hash.
 *
 * @example
 * ```ts
 * derivedPrefix(undefined, 'POST /login'); // 'fg:POST /login:'
 * ```
 */
export function derivedPrefix(base: string | undefined, name: string): string {
  const prefix = `${base ?? 'fg:'}${name}:`;
  if (prefix.length <= MAX_PREFIX_LENGTH) return prefix;
  // FNV-1a, 32 bits: enough to tell apart the routes of one app.
  let hash = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) hash = Math.imul(hash ^ name.charCodeAt(i), 0x01000193);
  const tag = `~${(hash >>> 0).toString(16).padStart(8, '0')}:`;
  return `${base ?? 'fg:'}${name}`.slice(0, MAX_PREFIX_LENGTH - tag.length) + tag;
}

/**
 * The options a level gives: those set to `undefined` dropped, as
 * `createLimiter()` reads them (not given), so that `{ limit: tier.limit }`
 * for a tier without one keeps what the level above says.
 */
export function givenOptions<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined)) as Partial<T>;
}

/**
 * The limiter options of a nested level (a route under a plugin, a handler
 * under a controller) laid over the level above: the level's own options win;
 * its `rules` replace the one-rule shorthand above (`limit`, `windowMs`, ...)
 * and its shorthand replaces the `rules` above; and without a `prefix` of its
 * own it counts under `derivedPrefix(above.prefix, namespace)`, so that on a
 * shared store its counters are not the level above's (no namespace: the
 * prefix above stays). Only limiter options (`limiterOptionNames`) are read
 * from either side, and an option set to `undefined` counts as not given.
 *
 * @example
 * ```ts
 * overlayLimiterOptions({ limit: 100, windowMs: 60_000 }, { limit: 5 }, 'POST /login');
 * // { limit: 5, windowMs: 60_000, prefix: 'fg:POST /login:' }
 * ```
 */
export function overlayLimiterOptions(
  above: Readonly<Record<string, unknown>> | undefined,
  own: Readonly<Record<string, unknown>>,
  namespace?: string,
): Record<string, unknown> {
  const merged: Record<string, unknown> = {};
  const ownOptions: Record<string, unknown> = {};
  // An option set to undefined is not given (givenOptions): it neither replaces nor overrides what is above.
  for (const [name, value] of Object.entries(givenOptions(own))) if (limiterOptionNames.has(name)) ownOptions[name] = value;
  const ownShorthand = Object.keys(ownOptions).some((name) => ruleShorthandNames.has(name));
  for (const [name, value] of Object.entries(above ?? {})) {
    if (!limiterOptionNames.has(name)) continue;
    if ('rules' in ownOptions && ruleShorthandNames.has(name)) continue;
    if (ownShorthand && name === 'rules') continue;
    merged[name] = value;
  }
  if (namespace !== undefined) merged.prefix = derivedPrefix(merged.prefix as string | undefined, namespace);
  return { ...merged, ...ownOptions };
}

/**
 * One level of nested adapter options: a Fastify plugin and its routes; a
 * NestJS module, its controllers and their handlers.
 */
export interface OptionLevel {
  /** The adapter options (key, cost, headers, ...) given at this level or above: what the levels below start from. */
  readonly options: Readonly<Record<string, unknown>>;
  /** The limiter options this level's own limiter is made of (undefined: it was given a `limiter`, or shares the one above). */
  readonly limiterOptions: Readonly<Record<string, unknown>> | undefined;
  /** The limiter of this level's flow: the one levels below share when they name no limiter option of their own. */
  readonly limiter?: unknown;
}

/**
 * A level's own options over its parent's (none: the top level), as nested
 * adapters read them. Adapter options are overridden one by one. A level
 * that names no limiter option shares the limiter above (same counts); one
 * that gives `limiter` uses it; one that gives limiter options gets a
 * limiter of its own, made of them over the limiter options above
 * (`overlayLimiterOptions`, in the `namespace` of its own). An option set to
 * `undefined` is not given. `flowOptions` is what the level's request flow
 * is made of; `limited` says whether it names a limit at all (a top level
 * that does not only gives defaults to the levels below).
 *
 * @example
 * ```ts
 * const plugin = inheritOptions(undefined, { limit: 100, windowMs: 60_000, headers: 'draft-8' });
 * inheritOptions(plugin, { limit: 5 }, 'POST /login').flowOptions;
 * // { headers: 'draft-8', limit: 5, windowMs: 60_000, prefix: 'fg:POST /login:' }
 * ```
 */
export function inheritOptions(
  parent: OptionLevel | undefined,
  own: Readonly<Record<string, unknown>>,
  namespace?: string,
): OptionLevel & { readonly flowOptions: Record<string, unknown>; readonly limited: boolean } {
  const options: Record<string, unknown> = { ...parent?.options };
  const ownLimiter: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(givenOptions(own))) {
    if (limiterOptionNames.has(name)) ownLimiter[name] = value;
    else if (name !== 'limiter') options[name] = value;
  }
  const given = own.limiter;
  let limiterOptions = parent?.limiterOptions;
  // What the flow is given: limiter options (a limiter of its own), a limiter, or both (the flow says which to drop).
  let limiter: Record<string, unknown> | undefined = limiterOptions;
  if (Object.keys(ownLimiter).length > 0) {
    limiterOptions = overlayLimiterOptions(parent?.limiterOptions, ownLimiter, given === undefined ? namespace : undefined);
    limiter = given === undefined ? limiterOptions : { ...limiterOptions, limiter: given };
  } else if (given !== undefined) {
    limiterOptions = undefined;
    limiter = { limiter: given };
  } else if (parent?.limiter !== undefined) limiter = { limiter: parent.limiter };
  const limited = ['limit', 'rules', 'limiter'].some((name) => limiter?.[name] !== undefined);
  return { options, limiterOptions, flowOptions: { ...options, ...limiter }, limited };
}

/** Names users bring from other rate limiters, and what Floodgate calls them. */
const knownAliases: Record<string, string> = {
  max: "Floodgate calls it 'limit'",
  points: "Floodgate calls it 'limit'",
  duration: "Floodgate takes 'windowMs' (milliseconds, not seconds)",
  window: "Floodgate takes 'windowMs' (milliseconds)",
  keyGenerator: "Floodgate calls it 'key' (an adapter option)",
  keyPrefix: "Floodgate calls it 'prefix'",
  standardHeaders: "use headers: 'draft-6', 'draft-7', 'draft-8', 'draft-10' or 'both' (an adapter option)",
  legacyHeaders: "use headers: 'legacy' or false (an adapter option)",
  passOnStoreError: "use onStoreError: 'allow'",
  insuranceLimiter: 'pass the insurance limiter as onStoreError',
  storeClient: 'use store: new RedisStore({ client })',
  execEvenly: "use algorithm: 'leaky-bucket' with mode: 'shape'",
  limiter: "to share a limiter pass it to the adapter's rateLimit({ limiter }); createLimiter takes rules",
  timeout: "Floodgate calls it 'timeoutMs'",
  blockDuration: "Floodgate calls it 'blockMs' (milliseconds, not seconds), a rule option",
  requestPropertyName: 'the decision is always req.rateLimit (Express), ctx.state.rateLimit (Koa), c.get("rateLimit") (Hono), request.rateLimit (Fastify)',
  identifier: "the policy the draft headers name is each rule's name (rules: [{ name: 'api', ... }])",
  requestWasSuccessful: 'skipSuccessfulRequests and skipFailedRequests count a status below 400 as a success',
  ipv6Subnet: 'pass it to the key: key: keyBy.ip({ ipv6Subnet: 56 })',
};

/**
 * Throws ERR_FG_UNKNOWN_OPTION naming every key outside `allowed`, each with a hint where one helps: a
 * port from another library finds all its renames in one error, not one per rebuild.
 */
export function rejectUnknownKeys(options: object, allowed: ReadonlySet<string>, where: string, elsewhere?: ReadonlySet<string>, elsewhereHint?: string): void {
  const unknown = Object.keys(options).filter((key) => !allowed.has(key));
  if (unknown.length === 0) return;
  const named = unknown.map((key) => {
    // Own properties only: a name like 'constructor' must not find Object.prototype's.
    const hint = Object.hasOwn(knownAliases, key) ? knownAliases[key] : elsewhere?.has(key) ? elsewhereHint : undefined;
    return `'${key}'${hint ? ` (${hint})` : ''}`;
  });
  const what = unknown.length === 1 ? `no option ${named[0]}` : `no options ${named.slice(0, -1).join(', ')} and ${named[named.length - 1]}`;
  throw new FloodgateError(ErrorCodes.UNKNOWN_OPTION, `${where} has ${what}. Known options: ${[...allowed].join(', ')}.`);
}

export function isStore(value: unknown): value is Store {
  if (typeof value !== 'object' || value === null) return false;
  const store = value as Record<string, unknown>;
  return ['consume', 'peek', 'refund', 'reset'].every((method) => typeof store[method] === 'function');
}

/** Validates the rules a limiter is created or updated with (shorthand or `rules`). */
export function parseRules(options: Partial<RuleOptions> & { rules?: unknown }, where: string): readonly CompiledRule[] {
  const shorthand = shorthandKeys.filter((key) => options[key] !== undefined);
  if (options.rules !== undefined) {
    if (shorthand.length > 0) {
      throw new FloodgateError(
        ErrorCodes.RULES,
        `${where} has both 'rules' and ${shorthand.map((k) => `'${k}'`).join(', ')}; give either one rule in shorthand or a list of rules.`,
      );
    }
    return compileRules(options.rules);
  }
  if (shorthand.length === 0) {
    throw new FloodgateError(ErrorCodes.RULES, `${where} needs a rule: { limit: 100, windowMs: 60_000 } or rules: [...].`);
  }
  const rule: Record<string, unknown> = {};
  for (const key of shorthand) rule[key] = options[key];
  return Object.freeze([compileRule(rule, where === 'createLimiter()' ? 'rule' : `${where} rule`, 'default')]);
}

/** Turns user options into a configuration once, at construction. */
export function parseLimiterOptions(options: LimiterOptions): LimiterConfiguration {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new FloodgateError(ErrorCodes.OPTION, `createLimiter() takes an options object like { limit: 100, windowMs: 60_000 }, got ${describe(options)}.`);
  }
  rejectUnknownKeys(options, limiterOptionNames, 'createLimiter()', adapterOptionNames, 'it is an adapter option; pass it to rateLimit()');

  const rules = parseRules(options, 'createLimiter()');

  const store = options.store === undefined ? new MemoryStore() : options.store;
  if (!isStore(store)) {
    throw new FloodgateError(ErrorCodes.OPTION, `store must be a Store (an object with consume, peek, refund and reset), got ${describe(options.store)}.`);
  }

  const prefix = orDefault(options.prefix, 'fg:');
  if (typeof prefix !== 'string' || prefix.length > MAX_PREFIX_LENGTH) {
    throw new FloodgateError(ErrorCodes.OPTION, `prefix must be a string of at most 64 characters, got ${describe(options.prefix)}.`);
  }

  const timeoutMs = orDefault(options.timeoutMs, 200);
  if (typeof timeoutMs !== 'number' || !(timeoutMs > 0) || !(timeoutMs <= MAX_TIMER_MS)) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `timeoutMs must be a positive number of milliseconds, at most ${MAX_TIMER_MS} (about 24.8 days, the longest timer JavaScript keeps), got ${describe(options.timeoutMs)}.`,
    );
  }

  const onStoreError = orDefault<StoreErrorPolicy>(options.onStoreError, 'allow');
  if (
    onStoreError !== 'allow' &&
    onStoreError !== 'deny' &&
    (typeof onStoreError !== 'object' || onStoreError === null || typeof (onStoreError as InsuranceLimiter).consume !== 'function')
  ) {
    throw new FloodgateError(ErrorCodes.OPTION, `onStoreError must be 'allow', 'deny' or a limiter, got ${describe(options.onStoreError)}.`);
  }

  const now = orDefault(options.now, Date.now);
  if (typeof now !== 'function') {
    throw new FloodgateError(ErrorCodes.OPTION, `now must be a function returning the time in ms, got ${describe(options.now)}.`);
  }

  const cache = orDefault<LimiterOptions['localDenyCache']>(options.localDenyCache, false);
  if (typeof cache === 'object' && cache !== null) {
    for (const key of Object.keys(cache)) {
      if (key !== 'maxKeys') throw new FloodgateError(ErrorCodes.UNKNOWN_OPTION, `localDenyCache has no option '${key}'; it takes maxKeys.`);
    }
  }
  const cacheKeys = cache === false ? 0 : cache === true ? 10_000 : typeof cache === 'object' && cache !== null ? orDefault(cache.maxKeys, 10_000) : Number.NaN;
  if (!Number.isSafeInteger(cacheKeys) || cacheKeys < 0 || (cache !== false && cacheKeys === 0)) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `localDenyCache must be true, false or { maxKeys: <positive integer> }, got ${describe(options.localDenyCache)}.`,
    );
  }

  const overrides = orDefault<LimiterOptions['overrides']>(options.overrides, false);
  if (typeof overrides === 'object' && overrides !== null) {
    for (const key of Object.keys(overrides)) {
      if (key !== 'refreshMs') throw new FloodgateError(ErrorCodes.UNKNOWN_OPTION, `overrides has no option '${key}'; it takes refreshMs.`);
    }
  }
  const refreshMs =
    overrides === false
      ? 0
      : overrides === true
        ? 5_000
        : typeof overrides === 'object' && overrides !== null
          ? orDefault(overrides.refreshMs, 5_000)
          : Number.NaN;
  if (!Number.isSafeInteger(refreshMs) || refreshMs < 0 || (overrides !== false && (refreshMs < 100 || refreshMs > MAX_TIMER_MS))) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `overrides must be true, false or { refreshMs: <ms, from 100 to ${MAX_TIMER_MS}> }, got ${describe(options.overrides)}.`,
    );
  }
  if (refreshMs > 0 && store.records === undefined) {
    throw new FloodgateError(ErrorCodes.OPTION, 'overrides: this store keeps no records (StoreRecords), where overrides are kept.');
  }

  const analytics = orDefault<LimiterOptions['analytics']>(options.analytics, false);
  if (typeof analytics === 'object' && analytics !== null) {
    for (const key of Object.keys(analytics)) {
      if (key !== 'periodMs' && key !== 'size')
        throw new FloodgateError(ErrorCodes.UNKNOWN_OPTION, `analytics has no option '${key}'; it takes periodMs and size.`);
    }
  }
  const counted = typeof analytics === 'object' && analytics !== null ? analytics : {};
  const periodMs = analytics === false ? 0 : orDefault(counted.periodMs, 60_000);
  const size = orDefault(counted.size, 100);
  if (
    (analytics !== false && analytics !== true && (typeof analytics !== 'object' || analytics === null)) ||
    (analytics !== false && (!Number.isSafeInteger(periodMs) || periodMs < 1_000 || periodMs > 86_400_000)) ||
    !Number.isSafeInteger(size) ||
    size < 1 ||
    size > 10_000
  ) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `analytics must be true, false or { periodMs: <ms, from 1000 to 86400000>, size: <keys, from 1 to 10000> }, got ${describe(options.analytics)}.`,
    );
  }
  if (periodMs > 0 && store.records === undefined) {
    throw new FloodgateError(ErrorCodes.OPTION, 'analytics: this store keeps no records (StoreRecords), where the denial counts are kept.');
  }

  return {
    rules,
    store,
    prefix,
    timeoutMs,
    onStoreError,
    now,
    localDenyCacheKeys: cacheKeys,
    overridesRefreshMs: refreshMs,
    analyticsPeriodMs: periodMs,
    analyticsSize: size,
    ownsStore: options.store === undefined,
    prefixGiven: options.prefix !== undefined,
  };
}
