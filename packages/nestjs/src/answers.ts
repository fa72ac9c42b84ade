/*
 * How a denial reaches a gateway's client or a resolver's caller, as their
 * kind answers errors: a WsException (Nest's gateways emit its data to the
 * client as the 'exception' event) or a GraphQLError whose extensions are
 * @floodgate/graphql's ({ code: 'RATE_LIMITED', retryAfterMs, rule }).
 */
import { isFloodgateError } from '@floodgate/core';
import type { RateLimitFlow } from '@floodgate/core/adapter';
import { loadGraphqlJs, loadWebsockets, type NestCall } from './contexts.js';

const DEFAULT_MESSAGE = 'Too many requests, please try again later.';

/**
 * What a gateway's client or a resolver's caller is told about a denial: the `extensions` of the
 * GraphQL error (as `@floodgate/graphql` sends them), or with `status`, `message` and `event` the
 * data of the WsException (what the client's `exception` event gets).
 */
export interface RateLimitDenial {
  /**
   * `RATE_LIMITED`; `RATE_LIMITER_UNAVAILABLE` when the store failed and `onStoreError: 'deny'`
   * refused (HTTP's 503); `FORBIDDEN` for a client of the `denyList` (HTTP's 403).
   */
  readonly code: 'RATE_LIMITED' | 'RATE_LIMITER_UNAVAILABLE' | 'FORBIDDEN';
  /** ms until the same call would pass; `null` when it never will (a cost above the rule's capacity, the deny list). */
  readonly retryAfterMs: number | null;
  /** The rule that denied (the binding rule of the decision; `deny-list` for the deny list). */
  readonly rule: string;
}

/** The data of a gateway's WsException: Nest's `{ status: 'error', message }`, the denial, and the message's pattern. */
export interface WsRateLimitDenial extends RateLimitDenial {
  readonly status: 'error';
  readonly message: string;
  /** The message's pattern (the event name), when Nest tells it. */
  readonly event?: string;
}

type Denied = Extract<RateLimitFlow.Outcome, { kind: 'deny' }>;

function denial(outcome: Denied): RateLimitDenial {
  const { decision, status } = outcome;
  return {
    code: status === 503 ? 'RATE_LIMITER_UNAVAILABLE' : status === 403 ? 'FORBIDDEN' : 'RATE_LIMITED',
    // Infinity is no JSON number: said as null on both ends.
    retryAfterMs: Number.isFinite(decision.retryAfterMs) ? decision.retryAfterMs : null,
    rule: decision.rule,
  };
}

/** The denial's message: the `message` option when it is text (an object's goes to HTTP only), the store's or deny list's. */
const messageOf = (outcome: Denied): string => (outcome.contentType.startsWith('text/') ? outcome.body : DEFAULT_MESSAGE);

/** The error a denied gateway message or resolver call throws. */
export async function denialOf(call: NestCall, outcome: Denied): Promise<Error> {
  const message = messageOf(outcome);
  if (call.type === 'graphql') {
    const { GraphQLError } = await loadGraphqlJs();
    return new GraphQLError(message, { extensions: { ...denial(outcome) } });
  }
  const { WsException } = await loadWebsockets();
  const data: WsRateLimitDenial = { status: 'error', message, ...denial(outcome), ...(call.event === undefined ? {} : { event: call.event }) };
  return new WsException(data);
}

/**
 * A FloodgateError met while deciding (a bad key or cost, a call without a client address): its
 * code and message, as the caller's error. Anything else is the app's, thrown as it is.
 */
export async function failureOf(call: NestCall, error: unknown): Promise<unknown> {
  if (!isFloodgateError(error)) return error;
  if (call.type === 'graphql') {
    const { GraphQLError } = await loadGraphqlJs();
    return new GraphQLError(error.message, { extensions: { code: error.code } });
  }
  const { WsException } = await loadWebsockets();
  return new WsException({ status: 'error', message: error.message, code: error.code });
}
