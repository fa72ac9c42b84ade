/*
 * Where a tRPC call's client address and headers are: the request that tRPC's
 * adapters hand `createContext` (`{ req, res, info }` on Node's http, Express,
 * Fastify and the standalone server; `{ req, resHeaders, info }` in the fetch
 * adapter), once the context returns it as `ctx.req`.
 */
import { ErrorCodes, FloodgateError, type KeyBy } from '@floodgate/core';
import { createKeyBy, type RequestReader } from '@floodgate/core/adapter';

/** tRPC's procedure types. */
export type ProcedureType = 'query' | 'mutation' | 'subscription';

/**
 * What the callbacks (`key`, `cost`, `skip`, `message`) receive: the call's context, the
 * procedure's path (`'post.create'`) and type, and its input as the validators before the
 * middleware left it (`undefined` when `.use(rateLimit(...))` comes before `.input(...)`).
 */
export interface TrpcCall<TContext = object, TInput = unknown> {
  readonly ctx: TContext;
  readonly path: string;
  readonly type: ProcedureType;
  readonly input: TInput;
}

/** The arguments key extractors take: one call. */
export type TrpcArgs = [call: TrpcCall<unknown, unknown>];

/** The request of a call's context: Node's IncomingMessage (Express, Fastify: their request objects), or a fetch Request. */
interface ContextRequest {
  readonly ip?: unknown;
  readonly socket?: { readonly remoteAddress?: string };
  readonly headers?: unknown;
}

function requestOf(call: TrpcCall<unknown, unknown>): ContextRequest | undefined {
  const ctx = call.ctx as { req?: unknown } | null | undefined;
  const req = typeof ctx === 'object' && ctx !== null ? ctx.req : undefined;
  return typeof req === 'object' && req !== null ? (req as ContextRequest) : undefined;
}

/** Node's socket address; a fetch Request has none. */
function socketIp(call: TrpcCall<unknown, unknown>): string | undefined {
  const address = requestOf(call)?.socket?.remoteAddress;
  return typeof address === 'string' ? address : undefined;
}

/** Express's and Fastify's `req.ip` (it follows their trust-proxy setting), else the socket address. */
function clientIp(call: TrpcCall<unknown, unknown>): string | undefined {
  const ip = requestOf(call)?.ip;
  return typeof ip === 'string' && ip !== '' ? ip : socketIp(call);
}

function header(name: string, call: TrpcCall<unknown, unknown>): string | readonly string[] | undefined {
  const headers = requestOf(call)?.headers as { get?: unknown } | Record<string, string | string[] | undefined> | undefined;
  if (typeof headers !== 'object' || headers === null) return undefined;
  if (typeof headers.get === 'function') return (headers as { get(name: string): string | null }).get(name) ?? undefined;
  const value = (headers as Record<string, unknown>)[name];
  return typeof value === 'string' || Array.isArray(value) ? (value as string | string[]) : undefined;
}

const reader: RequestReader<TrpcArgs> = { clientIp, socketIp, header };

/**
 * Key extractors for tRPC calls. They read `ctx.req`, the request your `createContext`
 * returns: `keyBy.ip()` is Express's or Fastify's `req.ip` (so it follows their trust-proxy
 * setting), else the socket's address on Node; `keyBy.forwardedFor({ hops })`,
 * `keyBy.cloudflare()`, `keyBy.header(name)` and the other presets read its headers, also
 * on a fetch Request, which carries no address.
 *
 * @example
 * ```ts
 * const limited = t.procedure.use(rateLimit({ limit: 100, windowMs: 60_000, key: keyBy.forwardedFor({ hops: 1 }) }));
 * ```
 */
export const keyBy: KeyBy<TrpcArgs> = createKeyBy(reader);

const byAddress = keyBy.ip();

/**
 * The key when none is given: the client address of `ctx.req`. A context without a request
 * (a WebSocket message still has the upgrade request; a server-side caller has none), or
 * with a fetch Request (no socket), cannot be keyed by address: `key` is needed.
 */
export function defaultKey(call: TrpcCall<unknown, unknown>): string | Promise<string> {
  if (clientIp(call) === undefined) {
    const req = requestOf(call);
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `@floodgate/trpc's rateLimit() has no key option, and ${req === undefined ? "this call's context has no req" : "this call's ctx.req carries no client address (a fetch Request has no socket)"} to key it by client address. Pass key: ({ ctx }) => ctx.user.id (or an object of keys by scope), a keyBy preset that reads headers (keyBy.cloudflare(), keyBy.forwardedFor({ hops: 1 })), or return the Node request from createContext: ({ req, res }) => ({ req, res }).`,
    );
  }
  return byAddress(call);
}
