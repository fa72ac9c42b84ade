import { type Decision, isFloodgateError } from '@floodgate/core';
import { unmeasured } from './gate.js';

/**
 * What a client is told about a denial: in `connect_error` as `err.data`, as an event's
 * acknowledgement `{ error }`, or in the `rate_limited` event `{ error }`.
 */
export interface RateLimitDenial {
  /** `RATE_LIMITED`; `RATE_LIMITER_UNAVAILABLE` when the store failed and `onStoreError: 'deny'` refused (HTTP's 503). */
  readonly code: 'RATE_LIMITED' | 'RATE_LIMITER_UNAVAILABLE';
  /** When the same call would pass, in ms; `null` when it never will (its cost exceeds the rule's capacity). */
  readonly retryAfterMs: number | null;
  /** The rule that denied (the binding rule). */
  readonly rule: string;
  /** The event denied (absent at the handshake). */
  readonly event?: string;
}

/** What a client is told when Floodgate could not decide: a bad key or cost (a FloodgateError's code and message). */
export interface RateLimitFailure {
  /** The FloodgateError's code (`ERR_FG_KEY`, `ERR_FG_COST`, ...), or `INTERNAL_ERROR` for an error of another kind. */
  readonly code: string;
  readonly message: string;
}

export function denialOf(decision: Decision, event?: string): RateLimitDenial {
  const denial: { -readonly [K in keyof RateLimitDenial]: RateLimitDenial[K] } = {
    code: unmeasured(decision) ? 'RATE_LIMITER_UNAVAILABLE' : 'RATE_LIMITED',
    // Infinity is no JSON number (it would arrive as null anyway): said as null on both ends.
    retryAfterMs: Number.isFinite(decision.retryAfterMs) ? decision.retryAfterMs : null,
    rule: decision.rule,
  };
  if (event !== undefined) denial.event = event;
  return denial;
}

export function failureOf(error: unknown): RateLimitFailure {
  return {
    code: isFloodgateError(error) ? error.code : 'INTERNAL_ERROR',
    message: error instanceof Error ? error.message : 'The rate limiter failed.',
  };
}
