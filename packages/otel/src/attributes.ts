import type { Decision, LimiterEvents } from '@floodgate/core';
import { isUnmeasured } from '@floodgate/core/adapter';
import type { Attributes } from '@opentelemetry/api';

/** The limiter call whose store call failed. */
export type StoreOperation = LimiterEvents['error']['operation'];

/** Attribute names: `ratelimit.*` for what Floodgate decided, `error.type` as in OpenTelemetry's semantic conventions. */
export const LIMITER = 'ratelimit.limiter';
export const RULE = 'ratelimit.rule';
export const ALLOWED = 'ratelimit.allowed';
export const OPERATION = 'ratelimit.operation';
export const LIMIT = 'ratelimit.limit';
export const REMAINING = 'ratelimit.remaining';
export const RETRY_AFTER_MS = 'ratelimit.retry_after_ms';
export const ERROR_TYPE = 'error.type';

/** Codes and class names look like this; anything else would be an unbounded attribute value. */
const IDENTIFIER = /^[\w.-]{1,64}$/;

/**
 * `error.type` of a store error: its code when it has one (`ERR_FG_STORE_TIMEOUT`,
 * `ECONNREFUSED`), else its class name, else `_OTHER` (the conventions' fallback).
 * A fixed set per program, so a metric attribute can carry it.
 */
export function errorType(error: Error): string {
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && IDENTIFIER.test(code)) return code;
  return typeof error.name === 'string' && IDENTIFIER.test(error.name) ? error.name : '_OTHER';
}

/**
 * The attributes of `floodgate.store.errors`, besides the limiter's name. `ratelimit.allowed`:
 * what onStoreError decided, for a consume only (a peek admits nothing; a failed refund or
 * release decides nothing). `ratelimit.rule`: only when an insurance limiter measured the
 * call: onStoreError 'allow'/'deny' measure no rule (the decision core makes up names the
 * first rule, which would be a false attribute).
 */
export function storeErrorAttributes(limiter: string, operation: StoreOperation, error: Error, decision: Decision | undefined): Attributes {
  const attributes: Attributes = { [LIMITER]: limiter, [OPERATION]: operation, [ERROR_TYPE]: errorType(error) };
  if (operation !== 'consume' || decision === undefined) return attributes;
  attributes[ALLOWED] = decision.allowed;
  if (!isUnmeasured(decision)) attributes[RULE] = decision.rule;
  return attributes;
}

/**
 * What a span learns of one decision: the outcome, and the binding rule's numbers when they
 * were measured (by the store, or by an insurance limiter while the store failed). A decision
 * of onStoreError 'allow'/'deny' has no numbers: core fills them in, they measure nothing.
 */
export function decisionAttributes(limiter: string, decision: Decision): Attributes {
  const attributes: Attributes = { [LIMITER]: limiter, [ALLOWED]: decision.allowed };
  if (isUnmeasured(decision)) return attributes;
  attributes[RULE] = decision.rule;
  attributes[LIMIT] = decision.limit;
  attributes[REMAINING] = decision.remaining;
  // Infinity (a cost above the capacity never passes) is no number OTLP's JSON can carry: left
  // out, as adapters leave out Retry-After then.
  if (Number.isFinite(decision.retryAfterMs)) attributes[RETRY_AFTER_MS] = decision.retryAfterMs;
  return attributes;
}
