/*
 * A gate: core's call flow for a connection or an event limit (its limiter,
 * and how a call is skipped, keyed and costed under it). The handshake and
 * each event limit are one gate each.
 */
import { type Decision, FloodgateError, isFloodgateError, type Keys } from '@floodgate/core';
import { type CallFlow, createCallFlow, isUnmeasured } from '@floodgate/core/adapter';
import { keyBy, type SocketArgs } from './keys.js';

/** A function of the socket (and, for an event, its name and arguments). */
export type PerSocket<T> = (...args: SocketArgs) => T | Promise<T>;

/**
 * The key(s) a connection or an event is limited under: a function (scope `key`; it may also
 * return an object of keys by scope), or one key function per scope the rules use:
 * `{ ip: keyBy.ip(), user: (socket) => socket.data.userId }`.
 */
export type KeyOption = PerSocket<Keys> | Readonly<Record<string, PerSocket<string>>>;

/** Units a call takes: a positive integer, or a function of the socket (and event) that returns one. */
export type CostOption = number | PerSocket<number>;

/** A connection or event limit: skip, key, cost and its limiter, deciding one call at a time. */
export type Gate = CallFlow<SocketArgs>;

/** The limiter options every limit of one `rateLimit()` shares: where and how state is kept. */
export const SHARED_OPTIONS = ['store', 'timeoutMs', 'onStoreError', 'now', 'localDenyCache'] as const;

/** Options of the HTTP adapters that Socket.IO has no use for, with what to do instead. */
const UNSUPPORTED: Readonly<Record<string, string>> = {
  headers: 'a Socket.IO denial carries retryAfterMs in its data; getRateLimit(socket) reads the handshake decision',
  shadow: 'not supported by @floodgate/socket.io',
};

/** A gate of its options (checked now): a limiter's options or `limiter`, and key, cost and skip. */
export function createGate(options: Readonly<Record<string, unknown>>): Gate {
  return createCallFlow<SocketArgs>(options as CallFlow.Options<SocketArgs>, {
    where: "@floodgate/socket.io's rateLimit()",
    defaultKey: () => keyBy.ip(),
    unsupported: UNSUPPORTED,
  });
}

/** A gate's verdict, as a promise also when it is decided at once (or fails at once). */
export const decide = async (gate: Gate, args: SocketArgs): Promise<CallFlow.Verdict> => gate.decide(args);

/** A FloodgateError's message without the ` [ERR_FG_...]` its constructor appends (it appends it again). */
const bare = (error: FloodgateError): string => error.message.replace(/ \[ERR_FG_[A-Z_]+\]$/, '');

/** Runs construction steps for a part of the options, naming the part in what they throw. */
export function within<T>(where: string, build: () => T): T {
  try {
    return build();
  } catch (error) {
    if (isFloodgateError(error)) throw new FloodgateError(error.code, `${where}: ${bare(error)}`, { cause: error });
    throw error;
  }
}

/** Whether onStoreError 'allow' or 'deny' made this decision, rather than a rule (or an insurance limiter): it carries no numbers. */
export const unmeasured = (decision: Decision): boolean => decision.storeError !== undefined && isUnmeasured(decision);
