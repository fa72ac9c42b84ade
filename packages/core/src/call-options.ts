/*
 * The options every adapter takes, read once (`parseCallOptions`): the
 * limiter (made of its options, or given as `limiter`), the key, the cost,
 * `limit` and `rules` as functions of the call, skip, shadow and the headers
 * mode its reports ask for; what the call flow (call-flow.ts) then runs per
 * call, frozen. The HTTP flow reads its own options on top of these
 * (http/flow-options.ts).
 */
import { checkCost, describe, type ErrorCode, ErrorCodes, FloodgateError, isFloodgateError, orDefault } from './errors.js';
import { type HeadersMode, headersModes } from './http/headers.js';
import type { KeyFunction } from './http/keys.js';
import type { Keys } from './keys.js';
import { isPromise, type Later } from './later.js';
import { createLimiter, type Limiter } from './limiter.js';
import { type LimiterOptions, limiterOptionNames, rejectUnknownKeys, ruleShorthandNames } from './options.js';
import { optionsOf, type RuleOptions } from './rules.js';

/** A function of the call that returns a value (or a promise of it). */
type PerCall<Args extends unknown[], T> = (...args: Args) => T | Promise<T>;

/**
 * The `key` option: a function (scope `key`; it may also return an object of
 * keys by scope), or an object of functions, one per scope the rules use.
 */
export type KeyOption<Args extends unknown[]> = KeyFunction<Args> | PerCall<Args, Keys> | Readonly<Record<string, KeyFunction<Args>>>;

/** The options a call flow reads, as given (checked here). */
export interface GivenCallOptions {
  readonly [name: string]: unknown;
  readonly limit?: unknown;
  readonly rules?: unknown;
  readonly limiter?: unknown;
  readonly key?: unknown;
  readonly cost?: unknown;
  readonly skip?: unknown;
  readonly shadow?: unknown;
  readonly headers?: unknown;
}

/** What an adapter tells the call flow about its options. */
interface CallFacts<Args extends unknown[]> {
  /** Where the options were given, as errors name it: `"@floodgate/trpc's rateLimit()"`. */
  readonly where: string;
  /** The key function when the options give none. */
  readonly defaultKey?: () => KeyOption<Args>;
  /** The adapter's own options, which the call flow lets through. */
  readonly extraKeys?: readonly string[];
  /** Options the adapter does not take, each with what to do instead. */
  readonly unsupported?: Readonly<Record<string, string>>;
}

/** The options of a call, checked, with every default filled in, and the per-call functions built from them. */
export interface CallConfiguration<Args extends unknown[]> {
  readonly limiter: Limiter;
  readonly skip: ((...args: Args) => Later<boolean>) | undefined;
  /** The key option in force (the default key when none was given): the HTTP flow's setup warnings read it. */
  readonly key: KeyOption<Args>;
  readonly keysOf: (args: Args) => Later<Keys>;
  readonly costOf: (args: Args) => Later<number>;
  /** The rules of a call when `limit` or `rules` is a function of it; else the limiter's. */
  readonly rulesOf: ((args: Args) => Later<readonly RuleOptions[]>) | undefined;
  readonly shadow: boolean;
  readonly headersMode: HeadersMode;
}

/** The options a call flow reads itself; an adapter adds its own with `extraKeys`. */
const callOptionNames = ['limiter', 'key', 'cost', 'skip', 'shadow', 'headers'];

export function checkFunction(value: unknown, name: string): void {
  if (value !== undefined && typeof value !== 'function') {
    throw new FloodgateError(ErrorCodes.OPTION, `${name} must be a function, got ${describe(value)}.`);
  }
}

export function checkBoolean(value: unknown, name: string): void {
  if (value !== undefined && typeof value !== 'boolean') {
    throw new FloodgateError(ErrorCodes.OPTION, `${name} must be true or false, got ${describe(value)}.`);
  }
}

function checkKey(key: unknown, scope?: string): Keys {
  if (typeof key === 'string' ? key.length > 0 : scope === undefined && typeof key === 'object' && key !== null && !Array.isArray(key)) return key as Keys;
  throw new FloodgateError(
    ErrorCodes.KEY,
    scope === undefined
      ? `The key function returned ${describe(key)}; it must return a non-empty string (or an object of keys by scope).`
      : `The key function of scope '${scope}' returned ${describe(key)}; it must return a non-empty string.`,
  );
}

function checkLimit(limit: unknown): number {
  if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1) {
    throw new FloodgateError(ErrorCodes.LIMIT, `The limit function returned ${describe(limit)}; it must return a positive integer.`);
  }
  return limit;
}

/**
 * Runs a callback of the user's: what it throws (or rejects with) becomes a
 * FloodgateError with `code` that keeps it as `cause`, and keeps its HTTP
 * status when it has one (an authentication error thrown by a key function
 * still answers 401). FloodgateErrors pass as they are.
 */
export function guarded<Args extends unknown[], T>(fn: (...args: Args) => T | Promise<T>, args: Args, code: ErrorCode, what: string): T | Promise<T> {
  const wrap = (error: unknown): never => {
    if (isFloodgateError(error)) throw error;
    const given = (error as { status?: unknown; statusCode?: unknown } | null)?.status ?? (error as { statusCode?: unknown } | null)?.statusCode;
    const status = typeof given === 'number' && given >= 400 && given <= 599 ? given : 500;
    const reason = error instanceof Error ? error.message : describe(error);
    throw new FloodgateError(code, `The ${what} function threw: ${reason}`, { cause: error, status });
  };
  try {
    const value = fn(...args);
    return isPromise(value) ? value.catch(wrap) : value;
  } catch (error) {
    return wrap(error);
  }
}

/** How a flow reads the key(s) of a call, built once from the `key` option. */
function compileKey<Args extends unknown[]>(key: KeyOption<Args>): (args: Args) => Later<Keys> {
  if (typeof key === 'function') {
    return (args) => {
      const keyed = guarded(key as PerCall<Args, Keys>, args, ErrorCodes.KEY, 'key');
      return isPromise(keyed) ? keyed.then((k) => checkKey(k)) : checkKey(keyed);
    };
  }
  if (typeof key !== 'object' || key === null || Array.isArray(key) || Object.keys(key).length === 0) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `key must be a key function, or an object of key functions by scope like { ip: keyBy.ip(), user: keyBy.header('x-user-id') }, got ${describe(key)}.`,
    );
  }
  const scopes = Object.entries(key);
  for (const [scope, fn] of scopes) {
    if (typeof fn !== 'function') throw new FloodgateError(ErrorCodes.OPTION, `key.${scope} must be a key function, got ${describe(fn)}.`);
  }
  return async (args) => {
    const keys: Record<string, string> = {};
    for (const [scope, fn] of scopes) {
      const keyed = guarded(fn, args, ErrorCodes.KEY, `key.${scope}`);
      keys[scope] = checkKey(isPromise(keyed) ? await keyed : keyed, scope) as string;
    }
    return keys;
  };
}

/** How a flow reads the cost of a call, built once from the `cost` option. */
function compileCost<Args extends unknown[]>(cost: unknown): (args: Args) => Later<number> {
  if (typeof cost !== 'function') {
    const units = cost === undefined ? 1 : checkCost(cost);
    return () => units;
  }
  return (args) => {
    const units = guarded(cost as PerCall<Args, number>, args, ErrorCodes.COST, 'cost');
    return isPromise(units) ? units.then(checkCost) : checkCost(units);
  };
}

/**
 * The rules of a call when `limit` or `rules` is a function: the rule list
 * to decide it under, or undefined for the limiter's own. Lists built from a
 * limit are cached per limit value, so that the limiter compiles each plan
 * once.
 */
function compileRulesOption<Args extends unknown[]>(
  options: GivenCallOptions,
  limiter: Limiter,
  where: string,
): ((args: Args) => Later<readonly RuleOptions[]>) | undefined {
  if (typeof options.rules === 'function') {
    const rules = options.rules as PerCall<Args, readonly RuleOptions[]>;
    return (args) => guarded(rules, args, ErrorCodes.RULES, 'rules');
  }
  if (typeof options.limit !== 'function') return undefined;
  const limit = options.limit as PerCall<Args, number>;
  const [rule, ...more] = limiter.rules;
  if (rule === undefined || more.length > 0) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `${where}: limit as a function replaces the limit of the limiter's one rule, and this limiter has ${limiter.rules.length}; use rules: (req) => [...] instead.`,
    );
  }
  // The rule as options, but its limit and burst, which follow the limit the function gives.
  const { limit: _limit, burst: _burst, ...template } = optionsOf(rule) as RuleOptions & Record<string, unknown>;
  const byLimit = new Map<number, readonly RuleOptions[]>();
  const rulesOf = (value: unknown): readonly RuleOptions[] => {
    const n = checkLimit(value);
    let rules = byLimit.get(n);
    if (rules === undefined) {
      // A bucket's burst follows the limit, unless the options fixed one.
      const burst = options.burst as number | undefined;
      rules = Object.freeze([Object.freeze({ ...template, limit: n, ...(burst === undefined ? {} : { burst }) } as RuleOptions)]);
      if (byLimit.size >= 1024) byLimit.clear();
      byLimit.set(n, rules);
    }
    return rules;
  };
  return (args) => {
    const value = guarded(limit, args, ErrorCodes.LIMIT, 'limit');
    return isPromise(value) ? value.then(rulesOf) : rulesOf(value);
  };
}

/** The limiter of the options: the one given as `limiter`, or one made of the limiter options (never both). */
function limiterOf(options: GivenCallOptions, where: string): Limiter {
  // limit and rules as functions of the call are decided per call; the limiter is made of the rest.
  const limiterOptions: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(options)) {
    if (limiterOptionNames.has(name) && value !== undefined && !((name === 'limit' || name === 'rules') && typeof value === 'function')) {
      limiterOptions[name] = value;
    }
  }
  const given = options.limiter as Limiter | undefined;
  if (typeof options.limit === 'function' && given === undefined) limiterOptions.limit = 1; // replaced per call
  if (typeof options.rules === 'function') {
    if (Object.keys(limiterOptions).some((name) => ruleShorthandNames.has(name))) {
      throw new FloodgateError(ErrorCodes.RULES, `${where} has both 'rules' and rule shorthand options; give either one rule in shorthand or rules.`);
    }
    // Never consulted: every call is decided under the rules the function returns.
    if (given === undefined) limiterOptions.rules = [{ name: 'per-request', limit: 1, windowMs: 1000 }];
  }
  if (given === undefined) return createLimiter(limiterOptions as LimiterOptions); // it checks every option it takes
  const also = Object.keys(limiterOptions);
  if (also.length > 0) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `${where} got both 'limiter' and ${also.map((name) => `'${name}'`).join(', ')}; set those on the shared limiter instead.`,
    );
  }
  if (typeof given !== 'object' || given === null || typeof given.consume !== 'function') {
    throw new FloodgateError(ErrorCodes.OPTION, `limiter must be a limiter from createLimiter(), got ${describe(given)}.`);
  }
  return given;
}

/** Reads and checks the options of a call flow once; throws ERR_FG_* naming the option. */
export function parseCallOptions<Args extends unknown[]>(options: GivenCallOptions, facts: CallFacts<Args>): CallConfiguration<Args> {
  const { where, unsupported = {} } = facts;
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new FloodgateError(ErrorCodes.OPTION, `${where} takes an options object like { limit: 100, windowMs: 60_000 }, got ${describe(options)}.`);
  }
  const refused = Object.keys(options).filter((name) => Object.hasOwn(unsupported, name));
  if (refused.length > 0) {
    throw new FloodgateError(ErrorCodes.UNKNOWN_OPTION, `${where} has no ${refused.map((name) => `option '${name}' (${unsupported[name]})`).join(', no ')}.`);
  }
  rejectUnknownKeys(options, new Set([...callOptionNames, ...limiterOptionNames, ...(facts.extraKeys ?? [])]), where);

  const limiter = limiterOf(options, where);
  checkFunction(options.skip, 'skip');
  checkBoolean(options.shadow, 'shadow');
  const headersMode = orDefault(options.headers, 'legacy') as HeadersMode;
  if (!headersModes.includes(headersMode)) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `headers must be one of ${headersModes.map((mode) => (mode === false ? 'false' : `'${mode}'`)).join(', ')}, got ${describe(options.headers)}.`,
    );
  }
  const key = (options.key === undefined ? facts.defaultKey?.() : options.key) as KeyOption<Args> | undefined;
  if (key === undefined) throw new FloodgateError(ErrorCodes.OPTION, `${where} needs a key option: the key(s) a call is limited under.`);
  return Object.freeze({
    limiter,
    skip: options.skip as CallConfiguration<Args>['skip'],
    key,
    keysOf: compileKey(key),
    costOf: compileCost<Args>(options.cost),
    rulesOf: compileRulesOption<Args>(options, limiter, where),
    shadow: options.shadow === true,
    headersMode,
  });
}
