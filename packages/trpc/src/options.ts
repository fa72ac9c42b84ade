/*
 * The options of rateLimit(), turned once into what a call needs: core's call
 * flow reads the limiter, key, cost, skip, shadow and headers options (every
 * value checked, the callbacks' errors made ERR_FG_* errors naming the fix);
 * the message is tRPC's own.
 */
import { ErrorCodes, FloodgateError, type Keys, type Limiter, type LimiterOptions } from '@floodgate/core';
import { type CallFlow, createCallFlow, type HeadersMode } from '@floodgate/core/adapter';
import { DEFAULT_MESSAGE } from './errors.js';
import { defaultKey, type TrpcArgs, type TrpcCall } from './keys.js';

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
  /** Skip, key, cost and the limiter: the verdict on a call. */
  readonly flow: CallFlow<TrpcArgs>;
  readonly messageOf: (call: AnyCall) => Promise<string>;
}

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

export function parseOptions(options: TrpcRateLimitOptions<never, never>): Configuration {
  const message = (options as { message?: unknown } | null)?.message;
  if (message !== undefined && typeof message !== 'string' && typeof message !== 'function') {
    throw new FloodgateError(ErrorCodes.OPTION, `message must be a string or a function of the call, got ${typeof message}.`);
  }
  const flow = createCallFlow<TrpcArgs>(options as CallFlow.Options<TrpcArgs>, {
    where: "@floodgate/trpc's rateLimit()",
    defaultKey: () => defaultKey,
    extraKeys: ['message'],
    unsupported: HTTP_ONLY,
  });
  const messageOf: Configuration['messageOf'] =
    typeof message === 'function'
      ? async (call) => (await (message as PerCall<unknown, unknown, string>)(call)) ?? DEFAULT_MESSAGE
      : () => Promise.resolve(message ?? DEFAULT_MESSAGE);
  return { flow, messageOf };
}
