import { createHash } from 'node:crypto';
import { ErrorCodes, FloodgateError, type KeyBy, type KeyFunction } from '@floodgate/core';
import { createKeyBy, type RequestReader } from '@floodgate/core/adapter';
import type { Socket } from 'socket.io';

/**
 * What the callbacks (`key`, `cost`, `skip`) receive: the socket, and for an event its name and
 * arguments (without the acknowledgement callback). At the handshake, only the socket.
 */
// biome-ignore lint/suspicious/noExplicitAny: what the client sent, as Socket.IO's own untyped listeners get it; a callback that trips on it is an ERR_FG_COST or ERR_FG_KEY for that event
export type SocketArgs = [socket: Socket, event?: string, args?: readonly any[]];

/** A request header of the handshake; repeated values joined with ', ', as Node's http does for most. */
function handshakeHeader(name: string, socket: Socket): string | undefined {
  const value = socket.handshake.headers[name];
  return typeof value === 'string' || value === undefined ? value : value.join(', ');
}

/*
 * Socket.IO has no trust-proxy setting: the client address is the TCP peer of the handshake
 * (`socket.handshake.address`), which no header can change. Behind proxies of your own, say so
 * with keyBy.forwardedFor({ hops }), as with the fetch and Hono adapters.
 */
const reader: RequestReader<SocketArgs> = {
  clientIp: (socket) => socket.handshake.address,
  socketIp: (socket) => socket.handshake.address,
  header: (name, socket) => handshakeHeader(name, socket),
};

/** Options of `keyBy.auth()`. */
export interface AuthKeyOptions {
  /** Key for handshakes without the field (or with something other than a string or a number in it). @defaultValue keyBy.ip() */
  fallback?: KeyFunction<SocketArgs>;
}

/** The key extractors of `@floodgate/socket.io`: those of every adapter, read from the handshake, and `auth`. */
export type SocketKeyBy = KeyBy<SocketArgs> & {
  /**
   * A field of the handshake's `auth` object (what the client passes as `io(url, { auth: { token } })`):
   * `auth.token:<SHA-256 of the value, hex>`, so that a credential never reaches the store, the
   * limiter's events or your logs in clear. Handshakes without it fall back to `fallback` (the client address).
   *
   * @example
   * ```ts
   * io.use(rateLimit({ limit: 20, windowMs: 60_000, key: keyBy.auth('token') }));
   * ```
   */
  auth(field: string, options?: AuthKeyOptions): KeyFunction<SocketArgs>;
};

const base = createKeyBy(reader);

function authKey(field: string, options: AuthKeyOptions = {}): KeyFunction<SocketArgs> {
  if (typeof field !== 'string' || field === '') {
    throw new FloodgateError(ErrorCodes.OPTION, `keyBy.auth needs the name of a field of the handshake's auth object, like 'token', got ${typeof field}.`);
  }
  const fallback = options.fallback ?? base.ip();
  if (typeof fallback !== 'function') throw new FloodgateError(ErrorCodes.OPTION, 'keyBy.auth fallback must be a key function.');
  return function authFieldKey(...args: SocketArgs): string | Promise<string> {
    const auth: unknown = args[0].handshake.auth;
    // The auth object is the client's: read own properties only, and only strings and numbers.
    const value = typeof auth === 'object' && auth !== null && Object.hasOwn(auth, field) ? (auth as Record<string, unknown>)[field] : undefined;
    const text = typeof value === 'string' ? value : typeof value === 'number' && Number.isFinite(value) ? String(value) : '';
    if (text === '') return fallback(...args);
    return `auth.${field}:${createHash('sha256').update(text).digest('hex')}`;
  };
}

/**
 * Key extractors for Socket.IO, reading the handshake. `keyBy.ip()` (the default key) is the
 * handshake's TCP peer address, which no header can change; `keyBy.forwardedFor({ hops })`
 * reads X-Forwarded-For as your own proxies wrote it; `keyBy.auth('token')` keys by a field of
 * the handshake's `auth`.
 *
 * @example
 * ```ts
 * io.use(rateLimit({ limit: 30, windowMs: 60_000, key: keyBy.forwardedFor({ hops: 1 }) })); // behind one proxy
 * ```
 */
export const keyBy: SocketKeyBy = { ...base, auth: authKey };
