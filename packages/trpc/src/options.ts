/*
 * The options of rateLimit(), turned once into what a call needs: every
 * default filled in, every value checked, the callbacks wrapped so that what
 * they throw or return wrong is an ERR_FG_* error naming the fix.
 */
import { createLimiter, ErrorCodes, FloodgateError, type Keys, type Limiter, type LimiterOptions } from '@floodgate/core';
import type { HeadersMode } from '@floodgate/core/adapter';
import { DEFAULT_MESSAGE, fromCallback } from './errors.js';
import { defaultKey, type TrpcCall } from './keys.js';

/**
 * A function of the call. Its types never decide the middleware's: those come from the
 * procedure it is used on (or `rateLimit<Context, Input>()`), so that `keyBy.ip()`, which
 * takes any call, leaves `ctx` typed in the callbacks beside it.
 */
export type PerCall<TContext, TInput, T> = (call: TrpcCall<NoInfer<TContext>, NoInfer<TInput>>) => T | Promise<T>;

/** Options of `rateLimit()`: everything `createLimiter` takes (or `limiter`), and how to key, cost and answer calls. */
export interface TrpcRateLimitOptions<TContext = object, TInput = unknown> extends LimiterOptions {
  /** A limiter to use instead of creating one: share it between procedures. Not together with limiter options. */
  limiter?: Limiter;
  /**
   * The key(s) a call is limited under: a function of the call (a key, or an object of keys by
   * scope), or one function per scope the rules use: `{ ip: keyBy.ip(), user: ({ ctx }) => ctx.user.id }`.
   * @defaultValue the client address of `ctx.req` (`keyBy.ip()`); a context without one needs `key`
   */
  key?: PerCall<TContext, TInput, Keys> | Readonly<Record<string, PerCall<TContext, TInput, string>>>;
  /** Units a call takes: a positive integer, or a function of the call (`({ input }) => input.files.length`). @defaultValue 1 */
  cost?: number | PerCall<TContext, TInput, number>;
  /** Calls for which this returns true are not limited at all. */
  skip?: PerCall<TContext, TInput, boolean>;
  /** The message of the TOO_MANY_REQUESTS error. @defaultValue 'Too many requests, please try again later.' */
  message?: string | PerCall<TContext, TInput, string>;
  /**
   * Which rate-limit headers to set on the HTTP response, when the context exposes it
   * (`resHeaders` in the fetch adapter, a Node `res`): `'legacy'` (`X-RateLimit-*`), the IETF
   * drafts `'draft-6'`, `'draft-7'`, `'draft-8'`, `'draft-10'` (without `pk`), `'both'`
   * (legacy and draft-8), or `false`. `Retry-After` goes on a response that carries a denial.
   * @defaultValue 'legacy'
   */
  headers?: HeadersMode;
  /** Decide, set headers and emit events, but never deny: a dark launch. */
  shadow?: boolean;
}

type AnyCall = TrpcCall<unknown, unknown>;

/** Options turned once into what a call needs. */
export interface Configuration {
  readonly limiter: Limiter;
  readonly keysOf: (call: AnyCall) => Promise<Keys>;
  readonly costOf: (call: AnyCall) => Promise<number>;
  readonly skip: ((call: AnyCall) => boolean | Promise<boolean>) | undefined;
  readonly messageOf: (call: AnyCall) => Promise<string>;
  readonly headers: HeadersMode;
  readonly shadow: boolean;
}

const WHERE = "@floodgate/trpc's rateLimit()";
const ADAPTER_OPTIONS = new Set(['limiter', 'key', 'cost', 'skip', 'message', 'headers', 'shadow']);
const HEADERS_MODES: readonly HeadersMode[] = ['legacy', 'draft-6', 'draft-7', 'draft-8', 'draft-10', 'both', false];
/** Options of the HTTP adapters that have no meaning for a tRPC call, with what to do instead. */
const HTTP_ONLY: Readonly<Record<string, string>> = {
  statusCode: 'a denial is TRPCError TOO_MANY_REQUESTS, HTTP 429',
  handler: "catch the TRPCError in your errorFormatter or the adapter's onError",
  problemDetails: 'tRPC answers with its own error shape: see rateLimitData() for the errorFormatter',
  skipSuccessfulRequests: 'not supported by @floodgate/trpc',
  skipFailedRequests: 'not supported by @floodgate/trpc',
  allowList: 'use skip: ({ ctx }) => ...',
  denyList: 'throw a TRPCError FORBIDDEN from a middleware of your own',
  validate: 'the setup warnings are for HTTP adapters',
};

const describe = (value: unknown): string =>
  typeof value === 'string'
    ? JSON.stringify(value)
    : value === null
      ? 'null'
      : typeof value === 'object'
        ? Array.isArray(value)
          ? 'an array'
          : 'an object'
        : String(value);

function checkCost(cost: unknown): number {
  if (typeof cost === 'number' && Number.isSafeInteger(cost) && cost >= 1) return cost;
  throw new FloodgateError(ErrorCodes.COST, `cost must be a positive integer, got ${typeof cost === 'function' ? 'a function' : describe(cost)}.`);
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

function checkFunction(value: unknown, name: string): void {
  if (value !== undefined && typeof value !== 'function') throw new FloodgateError(ErrorCodes.OPTION, `${name} must be a function, got ${describe(value)}.`);
}

/** Runs a callback of the user's, its error made a FloodgateError of `code` (a TRPCError passes as it is). */
async function guarded<T>(
  fn: (call: TrpcCall<unknown, unknown>) => T | Promise<T>,
  call: TrpcCall<unknown, unknown>,
  code: 'ERR_FG_KEY' | 'ERR_FG_COST',
  what: string,
): Promise<T> {
  try {
    return await fn(call);
  } catch (error) {
    throw fromCallback(error, code, what);
  }
}

function compileKey(key: unknown): Configuration['keysOf'] {
  if (key === undefined) return async (call) => checkKey(await defaultKey(call));
  if (typeof key === 'function') return async (call) => checkKey(await guarded(key as PerCall<unknown, unknown, Keys>, call, ErrorCodes.KEY, 'key'));
  const scopes = typeof key === 'object' && key !== null && !Array.isArray(key) ? Object.entries(key) : [];
  if (scopes.length === 0 || scopes.some(([, fn]) => typeof fn !== 'function')) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `key must be a function of the call, or an object of key functions by scope like { ip: keyBy.ip(), user: ({ ctx }) => ctx.user.id }, got ${describe(key)}.`,
    );
  }
  return async (call) => {
    const keys: Record<string, string> = {};
    for (const [scope, fn] of scopes)
      keys[scope] = checkKey(await guarded(fn as PerCall<unknown, unknown, string>, call, ErrorCodes.KEY, `key.${scope}`), scope) as string;
    return keys;
  };
}

export function parseOptions(options: TrpcRateLimitOptions<never, never>): Configuration {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new FloodgateError(ErrorCodes.OPTION, `${WHERE} takes an options object like { limit: 100, windowMs: 60_000 }, got ${describe(options)}.`);
  }
  const httpOnly = Object.keys(options).filter((name) => Object.hasOwn(HTTP_ONLY, name));
  if (httpOnly.length > 0) {
    throw new FloodgateError(ErrorCodes.UNKNOWN_OPTION, `${WHERE} has no ${httpOnly.map((name) => `option '${name}' (${HTTP_ONLY[name]})`).join(', no ')}.`);
  }
  const limiterOptions: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(options)) if (!ADAPTER_OPTIONS.has(name) && value !== undefined) limiterOptions[name] = value;
  let limiter: Limiter;
  if (options.limiter === undefined)
    limiter = createLimiter(limiterOptions as LimiterOptions); // it checks every option it takes, and names the others
  else {
    const given = Object.keys(limiterOptions);
    if (given.length > 0) {
      throw new FloodgateError(
        ErrorCodes.OPTION,
        `${WHERE} got both 'limiter' and ${given.map((n) => `'${n}'`).join(', ')}; set those on the shared limiter instead.`,
      );
    }
    if (typeof options.limiter !== 'object' || options.limiter === null || typeof options.limiter.consume !== 'function') {
      throw new FloodgateError(ErrorCodes.OPTION, `limiter must be a limiter from createLimiter(), got ${describe(options.limiter)}.`);
    }
    limiter = options.limiter;
  }

  const { cost, skip, message, headers = 'legacy', shadow = false } = options;
  let costOf: Configuration['costOf'];
  if (typeof cost === 'function') costOf = async (call) => checkCost(await guarded(cost as PerCall<unknown, unknown, number>, call, ErrorCodes.COST, 'cost'));
  else {
    const units = cost === undefined ? 1 : checkCost(cost);
    costOf = () => Promise.resolve(units);
  }
  checkFunction(skip, 'skip');
  if (message !== undefined && typeof message !== 'string' && typeof message !== 'function') {
    throw new FloodgateError(ErrorCodes.OPTION, `message must be a string or a function of the call, got ${describe(message)}.`);
  }
  const messageOf: Configuration['messageOf'] =
    typeof message === 'function'
      ? async (call) => (await (message as PerCall<unknown, unknown, string>)(call)) ?? DEFAULT_MESSAGE
      : () => Promise.resolve(message ?? DEFAULT_MESSAGE);
  if (!HEADERS_MODES.includes(headers)) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `headers must be one of ${HEADERS_MODES.map((m) => (m === false ? 'false' : `'${m}'`)).join(', ')}, got ${describe(headers)}.`,
    );
  }
  if (typeof shadow !== 'boolean') throw new FloodgateError(ErrorCodes.OPTION, `shadow must be true or false, got ${describe(shadow)}.`);
  return { limiter, keysOf: compileKey(options.key), costOf, skip: skip as Configuration['skip'], messageOf, headers, shadow };
}
