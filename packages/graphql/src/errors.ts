/*
 * How Floodgate's outcomes become GraphQL errors: a denial is RATE_LIMITED
 * (HTTP 429), a store that failed closed RATE_LIMITER_UNAVAILABLE (503, as the
 * HTTP adapters and @floodgate/socket.io answer), a bad key or cost the
 * FloodgateError's code (500). Their messages are the client's to read, so
 * they are GraphQLErrors of their own: servers that mask unexpected errors
 * (Yoga's maskedErrors, Apollo's) let them through.
 */
import { type Decision, isFloodgateError } from '@floodgate/core';
import { isUnmeasured } from '@floodgate/core/adapter';
import { GraphQLError } from 'graphql';

export const DEFAULT_MESSAGE = 'Too many requests, please try again later.';
export const UNAVAILABLE_MESSAGE = 'Service unavailable: the rate limiter cannot reach its store.';

/** The `extensions` of a denial, as the client reads them. */
export interface RateLimitExtensions {
  /** `RATE_LIMITED`; `RATE_LIMITER_UNAVAILABLE` when the store failed and `onStoreError: 'deny'` refused (HTTP's 503). */
  readonly code: 'RATE_LIMITED' | 'RATE_LIMITER_UNAVAILABLE';
  /** ms until the same operation would pass; `null` when it never will (its cost exceeds the rule's capacity: Infinity, which JSON cannot carry). */
  readonly retryAfterMs: number | null;
  /** The rule that denied (the binding rule of the decision). */
  readonly rule: string;
}

/** Whether onStoreError 'deny' made this denial, rather than a rule (or an insurance limiter). */
export const unavailable = (decision: Decision): boolean => decision.storeError !== undefined && isUnmeasured(decision);

/** The HTTP status a denial is answered with: 503 when the store failed closed, else 429. */
export const statusOf = (decision: Decision): 429 | 503 => (unavailable(decision) ? 503 : 429);

export function denialExtensions(decision: Decision): RateLimitExtensions {
  return {
    code: unavailable(decision) ? 'RATE_LIMITER_UNAVAILABLE' : 'RATE_LIMITED',
    retryAfterMs: Number.isFinite(decision.retryAfterMs) ? decision.retryAfterMs : null,
    rule: decision.rule,
  };
}

/**
 * The error of a denied operation or field. `http` (GraphQL Yoga's and Apollo Server's way to
 * set the response's status and headers from an error; both strip it from what they send) is
 * added where the operation came over HTTP.
 */
export function denialError(decision: Decision, message: string, http?: { status: number; headers?: Record<string, string> }): GraphQLError {
  const extensions: Record<string, unknown> = { ...denialExtensions(decision) };
  if (http !== undefined) extensions.http = http;
  return new GraphQLError(unavailable(decision) ? UNAVAILABLE_MESSAGE : message, { extensions });
}

/**
 * A FloodgateError met while deciding (a bad key or cost, a context without a client address):
 * its message, and its code (`ERR_FG_KEY`, `ERR_FG_COST`, `ERR_FG_OPTION`) as `extensions.code`.
 * Anything else is rethrown: it is the server's to report.
 */
export function failureError(error: unknown, http?: { status: number }): GraphQLError {
  if (!isFloodgateError(error)) throw error;
  const extensions: Record<string, unknown> = { code: error.code };
  if (http !== undefined) extensions.http = http;
  return new GraphQLError(error.message, { extensions });
}
