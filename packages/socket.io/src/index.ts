/**
 * @packageDocumentation
 * Floodgate rate limiting for Socket.IO 4: `io.use(rateLimit(options))` limits connections at the
 * handshake and, with `events`, the events of every socket it admits.
 */
import { type Decision, ErrorCodes, FloodgateError, type Limiter, type LimiterOptions } from '@floodgate/core';
import type { Socket } from 'socket.io';
import { denialOf, failureOf, type RateLimitDenial } from './denial.js';
import { type EventsOptions, eventsGuard } from './events.js';
import { type CostOption, createGate, decide, type Gate, type KeyOption, SHARED_OPTIONS } from './gate.js';
import type { SocketArgs } from './keys.js';

export {
  createLimiter,
  type Decision,
  FloodgateError,
  type Keys,
  type Limiter,
  MemoryStore,
  type RuleOptions,
} from '@floodgate/core';
export type { RateLimitDenial, RateLimitFailure } from './denial.js';
export type { DisconnectAfter, EventCost, EventLimit, EventsOptions } from './events.js';
export type { CostOption, KeyOption, PerSocket } from './gate.js';
export { type AuthKeyOptions, keyBy, type SocketArgs, type SocketKeyBy } from './keys.js';

/** Options of `rateLimit()`: a connection limit (any limiter option, or `limiter`) and `events`. */
export interface SocketRateLimitOptions extends LimiterOptions, EventsOptions {
  /** A limiter to limit connections with, instead of one made of these options (share one between namespaces). */
  limiter?: Limiter;
  /** The key connections (and events, unless an event has its own) are limited under. @defaultValue keyBy.ip() */
  key?: KeyOption;
  /** Units a connection takes. @defaultValue 1 */
  cost?: CostOption;
  /** Connections and events for which this returns true are not limited. Called `(socket)` at the handshake, `(socket, event, args)` for events. */
  skip?: (...args: SocketArgs) => boolean | Promise<boolean>;
  /** The message of the `connect_error` a refused connection gets. @defaultValue 'Too many connections, please try again later.' */
  message?: string;
}

/** The middleware `rateLimit()` returns, for `io.use()` (or `io.of(name).use()`). */
export interface RateLimitMiddleware {
  (socket: Socket, next: (err?: Error & { data?: unknown }) => void): void;
  /** The limiters at work: the connection limit's (if any), one per listed event, and `otherEvents`' (if any). Listen to their events here. */
  readonly limiters: {
    readonly connection: Limiter | undefined;
    readonly events: Readonly<Record<string, Limiter>>;
    readonly otherEvents: Limiter | undefined;
  };
}

/** The options of `rateLimit()` beyond the connection limit's (its limiter's, key, cost, skip). */
const SOCKET_OPTIONS = ['message', 'events', 'otherEvents', 'deniedEvent', 'disconnectAfter'];
const DEFAULT_MESSAGE = 'Too many connections, please try again later.';
const UNAVAILABLE_MESSAGE = 'Service unavailable: the rate limiter cannot reach its store.';

/** The handshake's decision of each socket admitted by a connection limit. */
const handshakes = new WeakMap<object, Decision>();

/**
 * The decision the connection limit made about this socket at its handshake (undefined when no
 * connection limit decided it: none set, or skipped).
 *
 * @example
 * ```ts
 * io.on('connection', (socket) => socket.emit('quota', getRateLimit(socket)?.remaining));
 * ```
 */
export function getRateLimit(socket: Socket): Decision | undefined {
  return handshakes.get(socket);
}

const isShared = (name: string): boolean => (SHARED_OPTIONS as readonly string[]).includes(name);

/** The options of the connection limit (none: no connection limit), and the limiter options every event limit shares. */
function split(options: SocketRateLimitOptions) {
  const connection: Record<string, unknown> = {};
  const shared: Record<string, unknown> = {};
  let limited = options.limiter !== undefined;
  for (const [name, value] of Object.entries(options)) {
    if (value === undefined || SOCKET_OPTIONS.includes(name)) continue;
    if (isShared(name)) shared[name] = value;
    // A connection limit needs a rule (or a limiter); options that only say where state lives are for the events.
    else if (!['limiter', 'key', 'cost', 'skip', 'prefix'].includes(name)) limited = true;
    // With a limiter of its own, the connection limit leaves those to the events.
    if (!(isShared(name) && options.limiter !== undefined)) connection[name] = value;
  }
  return { connection: limited ? connection : undefined, shared };
}

/**
 * Rate limiting for Socket.IO 4. As `io.use()` middleware it limits connections at the
 * handshake (keyed like HTTP: the client address by default) and refuses the ones over the
 * limit with an error whose `data` is `{ code: 'RATE_LIMITED', retryAfterMs, rule }` (the
 * client's `connect_error`). With `events`, it limits the events of every socket it admits:
 * a denied event is not delivered; its acknowledgement, if the client asked for one, gets
 * `{ error: { code: 'RATE_LIMITED', retryAfterMs, rule, event } }`, else the socket gets a
 * `rate_limited` event with it.
 *
 * @example
 * ```ts
 * import { Server } from 'socket.io';
 * import { rateLimit } from '@floodgate/socket.io';
 *
 * const io = new Server(3000);
 * io.use(
 *   rateLimit({
 *     limit: 10, windowMs: 60_000, // 10 connections a minute per client address
 *     events: { chat: { limit: 5, windowMs: 1_000 } }, // and 5 chat messages a second
 *   }),
 * );
 * ```
 */
export function rateLimit(options: SocketRateLimitOptions): RateLimitMiddleware {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new FloodgateError(ErrorCodes.OPTION, "@floodgate/socket.io's rateLimit() takes an options object like { limit: 10, windowMs: 60_000 }.");
  }
  const message = options.message ?? DEFAULT_MESSAGE;
  if (typeof message !== 'string') throw new FloodgateError(ErrorCodes.OPTION, 'message must be a string (the message of the connect_error).');
  if (options.skip !== undefined && typeof options.skip !== 'function') throw new FloodgateError(ErrorCodes.OPTION, 'skip must be a function.');
  const limits = split(options);
  const connection: Gate | undefined = limits.connection === undefined ? undefined : createGate(limits.connection);
  const { key, skip, prefix } = options;
  const events = eventsGuard(options, { key, shared: limits.shared, prefix, now: options.now ?? Date.now, skip });

  const refusal = (decision: Decision): Error & { data: RateLimitDenial } => {
    const data = denialOf(decision);
    return Object.assign(new Error(data.code === 'RATE_LIMITED' ? message : UNAVAILABLE_MESSAGE), { data });
  };

  /** The handshake: undefined to admit, or the error that refuses. */
  const handshake = async (socket: Socket): Promise<Error | undefined> => {
    if (connection === undefined) return undefined;
    const verdict = await decide(connection, [socket]);
    if (verdict.kind === 'skip') return undefined;
    if (verdict.kind === 'deny') return refusal(verdict.decision);
    handshakes.set(socket, verdict.decision);
    // A concurrency rule counts open connections: the lease ends with the connection.
    if (verdict.decision.leaseId !== undefined) socket.once('disconnect', () => connection.settle(verdict));
    return undefined;
  };

  const middleware = (socket: Socket, next: (err?: Error & { data?: unknown }) => void): void => {
    handshake(socket).then(
      (refused) => {
        if (refused !== undefined) return next(refused);
        if (events.guard !== undefined) socket.use(events.guard(socket));
        next();
      },
      (error: unknown) => {
        // A bad key or cost refuses this connection with the FloodgateError (the client reads err.data.code); the server goes on.
        const refused = error instanceof Error ? error : new Error(String(error));
        next(Object.assign(refused, { data: failureOf(error) }));
      },
    );
  };
  return Object.assign(middleware, {
    limiters: { connection: connection?.limiter, events: events.limiters, otherEvents: events.otherEvents },
  });
}
