/*
 * An adapter's options, read once (`parseFlowOptions`): every check of the
 * options `rateLimit()` takes beyond the limiter's own (those are
 * createLimiter's, in options.ts), and what the request flow then calls per
 * request, frozen. The flow itself is http/middleware.ts.
 */
import { checkCost, describe, type ErrorCode, ErrorCodes, FloodgateError, isFloodgateError, orDefault } from '../errors.js';
import type { Keys } from '../keys.js';
import { isPromise, type Later } from '../later.js';
import { createLimiter, type Limiter } from '../limiter.js';
import { adapterOptionNames, type LimiterOptions, limiterOptionNames, rejectUnknownKeys, ruleShorthandNames } from '../options.js';
import { optionsOf, type RuleOptions } from '../rules.js';
import { type HeadersMode, headersModes } from './headers.js';
import type { KeyFunction } from './keys.js';
import { compileAccessList } from './lists.js';
import type { ProxyTrust } from './proxy-trust.js';
import { checkSettled } from './settle.js';
import { createValidations } from './validate.js';

/** A denial body: a string (sent as text), an object (sent as JSON), or a function of the request (undefined: the default message). */
type Message<Args extends unknown[]> = string | object | ((...args: Args) => string | object | undefined | Promise<string | object | undefined>);

/** A value, or a function of the request that returns it (or a promise of it). */
type PerRequest<Args extends unknown[], T> = (...args: Args) => T | Promise<T>;

/**
 * The key(s) a request is limited under: a function (scope `key`; it may also
 * return an object of keys by scope), or an object of functions, one per
 * scope the rules use: `{ ip: keyBy.ip(), user: keyBy.header('x-user-id') }`.
 */
type KeyOption<Args extends unknown[]> = KeyFunction<Args> | PerRequest<Args, Keys> | Readonly<Record<string, KeyFunction<Args>>>;

function checkFunction(value: unknown, name: string): void {
  if (value !== undefined && typeof value !== 'function') {
    throw new FloodgateError(ErrorCodes.OPTION, `${name} must be a function, got ${describe(value)}.`);
  }
}

function checkBoolean(value: unknown, name: string): void {
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

export function render(message: string | object): { body: string; contentType: string } {
  return typeof message === 'string'
    ? { body: message, contentType: 'text/plain; charset=utf-8' }
    : { body: JSON.stringify(message), contentType: 'application/json; charset=utf-8' };
}

/** How a flow reads the key(s) of a request, built once from the `key` option. */
function compileKey<Args extends unknown[]>(key: KeyOption<Args>): (args: Args) => Keys | Promise<Keys> {
  if (typeof key === 'function') {
    return (args) => {
      const keyed = guarded(key as PerRequest<Args, Keys>, args, ErrorCodes.KEY, 'key');
      return isPromise(keyed) ? keyed.then((k) => checkKey(k)) : checkKey(keyed);
    };
  }
  if (typeof key !== 'object' || key === null || Array.isArray(key) || Object.keys(key).length === 0) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `key must be a function of the request, or an object of key functions by scope like { ip: keyBy.ip(), user: keyBy.header('x-user-id') }, got ${describe(key)}.`,
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

/**
 * The rules of a request when `limit` or `rules` is a function: the rule
 * list to decide it under, or undefined for the limiter's own. Lists built
 * from a limit are cached per limit value, so that the limiter compiles each
 * plan once.
 */
function compileRulesOption<Args extends unknown[]>(
  options: { limit?: unknown; rules?: unknown },
  limiter: Limiter,
  where: string,
): ((args: Args) => readonly RuleOptions[] | Promise<readonly RuleOptions[]>) | undefined {
  if (typeof options.rules === 'function') {
    const rules = options.rules as PerRequest<Args, readonly RuleOptions[]>;
    return (args) => guarded(rules, args, ErrorCodes.RULES, 'rules');
  }
  if (typeof options.limit !== 'function') return undefined;
  const limit = options.limit as PerRequest<Args, number>;
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
      const burst = (options as { burst?: number }).burst;
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

export const DEFAULT_MESSAGE = 'Too many requests, please try again later.';

/** What the flow needs of the adapter to read options: its name, its default key, its own options, and for the setup warnings how it reads headers and proxy trust. */
interface AdapterFacts<Args extends unknown[]> {
  name: string;
  defaultKey: () => KeyFunction<Args>;
  extraKeys?: readonly string[];
  header?: (name: string, ...args: Args) => string | readonly string[] | undefined;
  trust?: (...args: Args) => ProxyTrust | undefined;
}

/** An adapter's options, checked, with every default filled in, and the per-request functions built from them. */
export interface FlowConfiguration<Args extends unknown[], Handler> {
  readonly limiter: Limiter;
  readonly handler: Handler | undefined;
  readonly skip: ((...args: Args) => Later<boolean>) | undefined;
  /** Whether a request is on the deny list, or on the allow list (by the client address, or the list's function). */
  readonly denied: ((clientIp: string | undefined, args: Args) => Later<boolean>) | undefined;
  readonly allowed: ((clientIp: string | undefined, args: Args) => Later<boolean>) | undefined;
  readonly keysOf: (args: Args) => Later<Keys>;
  /** The setup warnings' check of a request and the key it got, when any is on. */
  readonly validate: ((args: Args, key: string) => void) | undefined;
  readonly costOf: (args: Args) => Later<number>;
  /** The rules of a request when `limit` or `rules` is a function of it; else the limiter's. */
  readonly rulesOf: ((args: Args) => Later<readonly RuleOptions[]>) | undefined;
  readonly statusCode: number;
  readonly headersMode: HeadersMode;
  readonly problemDetails: boolean;
  readonly message: Message<Args>;
  /** The denial body when it is the same for every request. */
  readonly staticBody: { readonly body: string; readonly contentType: string } | undefined;
  readonly shadow: boolean;
  readonly skipSuccessfulRequests: boolean;
  readonly skipFailedRequests: boolean;
  /** The units a request took, once its response is over (the `settle` option), checked: undefined keeps the estimate. */
  readonly settle: ((args: Args) => Later<number | undefined>) | undefined;
}

/** Reads and checks an adapter's options once; throws ERR_FG_* naming the option. */
export function parseFlowOptions<Args extends unknown[], Handler>(
  options: {
    readonly [name: string]: unknown;
    limit?: unknown;
    rules?: unknown;
    limiter?: Limiter;
    key?: unknown;
    cost?: unknown;
    skip?: unknown;
    handler?: Handler;
    message?: unknown;
    statusCode?: number;
    headers?: HeadersMode;
    problemDetails?: boolean;
    skipSuccessfulRequests?: boolean;
    skipFailedRequests?: boolean;
    shadow?: boolean;
    settle?: unknown;
    allowList?: unknown;
    denyList?: unknown;
    validate?: unknown;
  },
  adapter: AdapterFacts<Args>,
): FlowConfiguration<Args, Handler> {
  const where = `${adapter.name}'s rateLimit()`;
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new FloodgateError(ErrorCodes.OPTION, `${where} takes an options object like { limit: 100, windowMs: 60_000 }, got ${describe(options)}.`);
  }
  rejectUnknownKeys(options, new Set<string>([...adapterOptionNames, ...limiterOptionNames, ...(adapter.extraKeys ?? [])]), where);

  // limit and rules as functions of the request are decided per call; the limiter is made of the rest.
  const perRequest = typeof options.limit === 'function' || typeof options.rules === 'function';
  const limiterOptions: Record<string, unknown> = {};
  for (const name of Object.keys(options)) {
    const value = options[name as keyof typeof options];
    if (limiterOptionNames.has(name) && typeof value !== 'function') limiterOptions[name] = value;
    else if (name === 'now' && typeof value === 'function') limiterOptions[name] = value;
  }
  if (typeof options.limit === 'function' && options.limiter === undefined) limiterOptions.limit = 1; // replaced per call
  if (typeof options.rules === 'function') {
    if (Object.keys(limiterOptions).some((name) => ruleShorthandNames.has(name))) {
      throw new FloodgateError(ErrorCodes.RULES, `${where} has both 'rules' and rule shorthand options; give either one rule in shorthand or rules.`);
    }
    // Never consulted: every call is decided under the rules the function returns.
    if (options.limiter === undefined) limiterOptions.rules = [{ name: 'per-request', limit: 1, windowMs: 1000 }];
  }
  let limiter: Limiter;
  if (options.limiter !== undefined) {
    const given = Object.keys(limiterOptions);
    if (given.length > 0) {
      throw new FloodgateError(
        ErrorCodes.OPTION,
        `${where} got both 'limiter' and ${given.map((k) => `'${k}'`).join(', ')}; set those on the shared limiter instead.`,
      );
    }
    if (typeof options.limiter !== 'object' || options.limiter === null || typeof options.limiter.consume !== 'function') {
      throw new FloodgateError(ErrorCodes.OPTION, `limiter must be a limiter from createLimiter(), got ${describe(options.limiter)}.`);
    }
    limiter = options.limiter;
  } else {
    limiter = createLimiter(limiterOptions as LimiterOptions);
  }

  checkFunction(options.skip, 'skip');
  checkFunction(options.handler, 'handler');
  checkBoolean(options.skipSuccessfulRequests, 'skipSuccessfulRequests');
  checkBoolean(options.skipFailedRequests, 'skipFailedRequests');
  checkBoolean(options.shadow, 'shadow');
  checkFunction(options.settle, 'settle');
  if (typeof options.cost !== 'function' && options.cost !== undefined) checkCost(options.cost);
  const statusCode = orDefault(options.statusCode, 429);
  if (!Number.isInteger(statusCode) || statusCode < 400 || statusCode > 599) {
    throw new FloodgateError(ErrorCodes.OPTION, `statusCode must be an HTTP error status (400-599), got ${describe(options.statusCode)}.`);
  }
  const headersMode = orDefault<HeadersMode>(options.headers, 'legacy');
  if (!headersModes.includes(headersMode)) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `headers must be one of ${headersModes.map((mode) => (mode === false ? 'false' : `'${mode}'`)).join(', ')}, got ${describe(options.headers)}.`,
    );
  }
  checkBoolean(options.problemDetails, 'problemDetails');
  const problemDetails = options.problemDetails === true;
  const message = orDefault(options.message, DEFAULT_MESSAGE) as Message<Args>;
  if (typeof message !== 'string' && typeof message !== 'function' && (typeof message !== 'object' || message === null)) {
    throw new FloodgateError(ErrorCodes.OPTION, `message must be a string, an object (sent as JSON) or a function, got ${describe(options.message)}.`);
  }

  const keyOption = (options.key === undefined ? adapter.defaultKey() : options.key) as KeyOption<Args>;
  const cost = options.cost === undefined ? 1 : (options.cost as number | PerRequest<Args, number>);
  const settled = options.settle as PerRequest<Args, number | undefined> | undefined;
  return Object.freeze({
    limiter,
    handler: options.handler,
    skip: options.skip as FlowConfiguration<Args, Handler>['skip'],
    denied: compileAccessList<Args>(options.denyList, 'denyList'),
    allowed: compileAccessList<Args>(options.allowList, 'allowList'),
    keysOf: compileKey<Args>(keyOption),
    validate: createValidations<Args>(options.validate, keyOption, adapter),
    costOf:
      typeof cost === 'number'
        ? () => cost
        : (args: Args) => {
            const units = guarded(cost, args, ErrorCodes.COST, 'cost');
            return isPromise(units) ? units.then(checkCost) : checkCost(units);
          },
    rulesOf: perRequest ? compileRulesOption<Args>(options, limiter, where) : undefined,
    statusCode,
    headersMode,
    problemDetails,
    message,
    staticBody: typeof message === 'function' || problemDetails ? undefined : render(message),
    shadow: options.shadow === true,
    skipSuccessfulRequests: options.skipSuccessfulRequests === true,
    skipFailedRequests: options.skipFailedRequests === true,
    settle:
      settled === undefined
        ? undefined
        : (args: Args) => {
            const units = guarded(settled, args, ErrorCodes.COST, 'settle');
            return isPromise(units) ? units.then(checkSettled) : checkSettled(units);
          },
  });
}
