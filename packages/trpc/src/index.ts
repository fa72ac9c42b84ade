/**
 * @packageDocumentation
 * Floodgate rate limiting for tRPC 11: `t.procedure.use(rateLimit(options))`. Denials throw
 * `TRPCError` `TOO_MANY_REQUESTS` whose cause carries `retryAfterMs`; the rate-limit headers
 * go on the HTTP response when the context exposes it.
 */
import type { Decision, Limiter } from '@floodgate/core';
import type { CallFlow } from '@floodgate/core/adapter';
import { denial, failure } from './errors.js';
import { report, responseHeadersOf } from './headers.js';
import type { ProcedureType, TrpcCall } from './keys.js';
import { parseOptions, type TrpcRateLimitOptions } from './options.js';

export {
  createLimiter,
  type Decision,
  FloodgateError,
  type Keys,
  type Limiter,
  MemoryStore,
  RateLimitedError,
  type RuleOptions,
} from '@floodgate/core';
export { type RateLimitData, rateLimitData } from './errors.js';
export { keyBy, type ProcedureType, type TrpcArgs, type TrpcCall } from './keys.js';
export type { PerCall, TrpcRateLimitOptions } from './options.js';

/**
 * What a tRPC 11 middleware is given, as far as `rateLimit()` reads it. tRPC's own options
 * (`MiddlewareFunction`) fit it, so the middleware goes to `.use()`, `t.middleware`'s
 * `.unstable_pipe()`, and takes the context and input types of the procedure it is used on.
 */
export interface RateLimitMiddlewareOptions<TContext, TInput, TResult> {
  readonly ctx: TContext;
  readonly path: string;
  readonly type: ProcedureType;
  readonly input: TInput;
  next(opts?: { ctx?: object }): Promise<TResult>;
}

/** The middleware `rateLimit()` returns, with the limiter at work (listen to its events, reset keys). */
export interface RateLimitMiddleware<TContext = object, TInput = unknown> {
  <TResult>(opts: RateLimitMiddlewareOptions<TContext, TInput, TResult>): Promise<TResult>;
  readonly limiter: Limiter;
}

/** The decision, under a key no context of the app's can clash with; spread contexts keep it. */
const RATE_LIMIT: unique symbol = Symbol.for('@floodgate/trpc: decision') as never;

/**
 * The decision the innermost `rateLimit()` took for this call, from the procedure's `ctx`
 * (undefined when none decided it: not rate limited, or skipped).
 *
 * @example
 * ```ts
 * const quota = limited.query(({ ctx }) => ({ remaining: getRateLimit(ctx)?.remaining }));
 * ```
 */
export function getRateLimit(ctx: unknown): Decision | undefined {
  return typeof ctx === 'object' && ctx !== null ? (ctx as { [RATE_LIMIT]?: Decision })[RATE_LIMIT] : undefined;
}

/** A subscription's iterable, ending `release` with it: a concurrency lease lasts as long as the subscription. */
async function* releasing<T>(iterable: AsyncIterable<T>, release: () => void): AsyncGenerator<T, unknown> {
  try {
    return yield* iterable;
  } finally {
    release();
  }
}

/**
 * Rate limiting for tRPC 11 procedures. Each call is keyed (the client address of `ctx.req`
 * by default), costed and decided before the procedure runs; a denial throws
 * `TRPCError` `TOO_MANY_REQUESTS` whose `cause` is a `RateLimitedError` (`retryAfterMs`,
 * `decision`). Subscriptions are limited when they start. With the fetch adapter's
 * `resHeaders` or a Node `res` in the context, the response carries the rate-limit headers
 * of every call it answers.
 *
 * @example
 * ```ts
 * import { initTRPC } from '@trpc/server';
 * import type { CreateHTTPContextOptions } from '@trpc/server/adapters/standalone';
 * import { rateLimit } from '@floodgate/trpc';
 *
 * const t = initTRPC.context<CreateHTTPContextOptions>().create();
 * export const limitedProcedure = t.procedure.use(rateLimit({ limit: 100, windowMs: 60_000 })); // per client address
 * ```
 */
export function rateLimit<TContext = object, TInput = unknown>(options: TrpcRateLimitOptions<TContext, TInput>): RateLimitMiddleware<TContext, TInput> {
  const { flow, messageOf } = parseOptions(options as TrpcRateLimitOptions<never, never>);
  const { limiter } = flow;

  async function floodgateRateLimit<TResult>(opts: RateLimitMiddlewareOptions<TContext, TInput, TResult>): Promise<TResult> {
    const call: TrpcCall<unknown, unknown> = { ctx: opts.ctx, path: opts.path, type: opts.type, input: opts.input };
    let verdict: CallFlow.Verdict;
    try {
      verdict = await flow.decide([call]);
    } catch (error) {
      throw failure(error);
    }
    if (verdict.kind === 'skip') return opts.next();
    const { decision } = verdict;
    const response = responseHeadersOf(opts.ctx);
    if (response !== undefined) report(response, limiter, verdict.keys, { ...verdict.report, label: opts.path });
    if (verdict.kind === 'deny') throw denial(decision, await messageOf(call));

    // A concurrency rule's lease lasts as long as the procedure (a subscription: as long as it is subscribed).
    const release = decision.leaseId === undefined ? undefined : () => void flow.settle(verdict);
    let result: TResult;
    try {
      result = await opts.next({ ctx: { [RATE_LIMIT]: decision } });
    } catch (error) {
      release?.();
      throw error;
    }
    if (release === undefined) return result;
    const { ok, data } = result as { ok?: boolean; data?: unknown };
    if (ok === true && opts.type === 'subscription' && typeof (data as AsyncIterable<unknown> | null)?.[Symbol.asyncIterator] === 'function') {
      return { ...result, data: releasing(data as AsyncIterable<unknown>, release) };
    }
    release();
    return result;
  }
  return Object.assign(floodgateRateLimit, { limiter });
}
