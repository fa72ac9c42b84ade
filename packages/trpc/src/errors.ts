/*
 * How Floodgate's outcomes become tRPC errors: a denial is TOO_MANY_REQUESTS
 * (429), a store that failed closed SERVICE_UNAVAILABLE (503), a bad key or
 * cost INTERNAL_SERVER_ERROR (500) carrying the FloodgateError.
 */
import { type Decision, ErrorCodes, isFloodgateError, RateLimitedError } from '@floodgate/core';
import { isUnmeasured } from '@floodgate/core/adapter';
import { TRPCError } from '@trpc/server';

export const DEFAULT_MESSAGE = 'Too many requests, please try again later.';
const UNAVAILABLE_MESSAGE = 'Service unavailable: the rate limiter cannot reach its store.';

/**
 * The error a denied call throws. Its `cause` is a `RateLimitedError` with the decision and
 * `retryAfterMs`. A denial made because the store failed and `onStoreError` is `'deny'`
 * (no rule was measured) is SERVICE_UNAVAILABLE, HTTP's 503, as the HTTP adapters answer.
 */
export function denial(decision: Decision, message: string): TRPCError {
  const cause = new RateLimitedError(decision);
  if (decision.storeError !== undefined && isUnmeasured(decision)) return new TRPCError({ code: 'SERVICE_UNAVAILABLE', message: UNAVAILABLE_MESSAGE, cause });
  return new TRPCError({ code: 'TOO_MANY_REQUESTS', message, cause });
}

/**
 * An error met while deciding a call, as the call fails with it. A FloodgateError (a bad key or
 * cost) is INTERNAL_SERVER_ERROR with its message and code, but one that wraps a callback's
 * TRPCError (a key function's UNAUTHORIZED) gives that TRPCError back, as the callback meant it;
 * anything else (what skip throws) passes as it is.
 */
export function failure(error: unknown): unknown {
  if (!isFloodgateError(error)) return error;
  if (error.cause instanceof TRPCError) return error.cause;
  return new TRPCError({ code: 'INTERNAL_SERVER_ERROR', message: error.message, cause: error });
}

/** What a client may be told about a denial: add it to `shape.data` in your `errorFormatter`. */
export interface RateLimitData {
  /** ms until the same call would pass; `null` when it never will (its cost exceeds the rule's capacity: Infinity, which JSON cannot carry). */
  readonly retryAfterMs: number | null;
  /** The rule that denied (the binding rule of the decision). */
  readonly rule: string;
}

/**
 * The rate-limit facts of an error thrown by `rateLimit()` (TOO_MANY_REQUESTS or
 * SERVICE_UNAVAILABLE), or `undefined` for any other error. For the `errorFormatter` of
 * `initTRPC.create()`, so that clients read `error.data.retryAfterMs`.
 *
 * @example
 * ```ts
 * const t = initTRPC.create({
 *   errorFormatter: ({ shape, error }) => ({ ...shape, data: { ...shape.data, ...rateLimitData(error) } }),
 * });
 * ```
 */
export function rateLimitData(error: unknown): RateLimitData | undefined {
  const cause = (error as { cause?: unknown } | null)?.cause;
  if (!(error instanceof TRPCError) || !isFloodgateError(cause) || cause.code !== ErrorCodes.RATE_LIMITED) return undefined;
  const { decision, retryAfterMs } = cause as RateLimitedError;
  if (typeof decision !== 'object' || decision === null) return undefined;
  return { retryAfterMs: Number.isFinite(retryAfterMs) ? retryAfterMs : null, rule: decision.rule };
}
