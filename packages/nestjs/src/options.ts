import { type Decision, ErrorCodes, FloodgateError, type KeyBy, type KeyFunction, type Limiter } from '@floodgate/core';
import {
  createKeyBy,
  createRateLimitFlow,
  inheritOptions,
  type OptionLevel,
  proxyTrustOf,
  type RateLimitFlow,
  type RateLimitOptions,
  type RequestReader,
} from '@floodgate/core/adapter';
import type { ExecutionContext } from '@nestjs/common';
import { callOf, missingAddress, type NestCall, type NestRequest } from './contexts.js';

export type { NestRequest } from './contexts.js';

/**
 * What `key`, `cost`, `skip` and `message` receive: the request and Nest's ExecutionContext
 * (`callOf(context)` tells a gateway's client, a resolver's GraphQL context and connectionParams).
 */
export type NestArgs = [request: NestRequest, context: ExecutionContext];

/**
 * A custom denial: returns (or throws) the exception to throw instead of
 * `RateLimitedException`; Nest's exception layer answers with it. The
 * rate-limit headers are already set on the response.
 */
export type NestHandler = (request: NestRequest, context: ExecutionContext, decision: Decision) => Error | Promise<Error>;

/** Options of `FloodgateModule.forRoot()` and `@RateLimit()` (see `@floodgate/core` RateLimitOptions). */
export interface NestRateLimitOptions extends RateLimitOptions<NestArgs, NestHandler> {
  /**
   * For a controller's or a handler's `@RateLimit()` with limits of its own: `true`, they are added to
   * the limits of the levels above (a request must pass the module's, the controller's and its own);
   * `false`, they replace them. On the module: the default of every level. @defaultValue true
   */
  stack?: boolean;
}

export type Flow = RateLimitFlow<NestArgs, NestHandler>;

/** The call the guard is deciding with this context: undefined when a flow runs outside the guard (the HTTP request alone). */
const callIn = (context: ExecutionContext | undefined): NestCall | undefined => (context === undefined ? undefined : callOf(context));

/*
 * HTTP routes: the platform's `request.ip` (its trust-proxy setting) and socket. Gateways and
 * resolvers: the address the guard found (a Socket.IO handshake's TCP peer, the stored upgrade
 * request's socket, the GraphQL request's ip or socket); none is an error that says where to put it.
 */
const reader: RequestReader<NestArgs> = {
  clientIp(request, context) {
    const call = callIn(context);
    if (call === undefined || call.type === 'http') return request.ip;
    if (call.address === undefined) throw missingAddress(call);
    return call.address;
  },
  socketIp(request, context) {
    const call = callIn(context);
    return call === undefined || call.type === 'http' ? request.socket?.remoteAddress : call.address;
  },
  header: (name, request) => request.headers[name],
};

/** Options of `keyBy.user()`. */
export interface UserKeyOptions {
  /** Key for calls without a user (or whose user gives no id). @defaultValue keyBy.ip() */
  fallback?: KeyFunction<NestArgs>;
}

/** The user an authentication guard left for this call: see keyBy.user(). */
function userOf(request: NestRequest, context: ExecutionContext | undefined): unknown {
  const call = callIn(context);
  if (call?.type === 'graphql') return call.graphqlContext?.user ?? call.request?.user;
  if (call?.type === 'ws') return call.client?.data?.user ?? call.client?.user;
  return request.user;
}

// biome-ignore lint/suspicious/noExplicitAny: the app's own user object.
function userKey(select: (user: any) => unknown = (user) => user?.id, options: UserKeyOptions = {}): KeyFunction<NestArgs> {
  if (typeof select !== 'function')
    throw new FloodgateError(ErrorCodes.OPTION, `keyBy.user takes a function of the user that returns its id, like (user) => user.id, got ${typeof select}.`);
  const fallback = options.fallback ?? base.ip();
  if (typeof fallback !== 'function') throw new FloodgateError(ErrorCodes.OPTION, 'keyBy.user fallback must be a key function.');
  return function userIdKey(request, context) {
    const user = userOf(request, context);
    const id = user === undefined || user === null ? undefined : select(user);
    if ((typeof id === 'string' && id !== '') || (typeof id === 'number' && Number.isFinite(id))) return `user:${id}`;
    return fallback(request, context);
  };
}

/** The key extractors of `@floodgate/nestjs`: those of every adapter, and `user`. */
export type NestKeyBy = KeyBy<NestArgs> & {
  /**
   * The id of the user your authentication guard left for the call (`user:<id>`), found where
   * Nest apps keep it: `request.user` (Passport) on HTTP routes; the GraphQL context's `user`,
   * else its request's, in resolvers; a Socket.IO socket's `data.user` (else `client.user`) in
   * gateways. `select` picks the id (default `user.id`); calls without one are keyed by `fallback`.
   * The guard that authenticates must run before Floodgate's (a global guard runs first:
   * authenticate in a global guard registered before FloodgateModule, or at the connection).
   *
   * @example
   * ```ts
   * @RateLimit({ limit: 30, windowMs: 60_000, key: keyBy.user((user) => user.sub) })
   * ```
   */
  // biome-ignore lint/suspicious/noExplicitAny: the app's own user object.
  user(select?: (user: any) => unknown, options?: UserKeyOptions): KeyFunction<NestArgs>;
};

const base = createKeyBy(reader);

/**
 * Key extractors for Nest. `keyBy.ip()` reads `request.ip` on HTTP routes, so it follows the
 * platform's trust-proxy setting (Express `app.set('trust proxy', ...)`,
 * `new FastifyAdapter({ trustProxy })`); in gateways the Socket.IO handshake's address (or
 * the upgrade request stored as `client.request` on a `ws` client), in resolvers the address
 * of the request in the GraphQL context (for graphql-ws subscriptions, the upgrade request's).
 * `keyBy.header(name)` reads the request's headers (a handshake's, an upgrade request's);
 * `keyBy.user()` the user your authentication left.
 *
 * @example
 * ```ts
 * @RateLimit({ limit: 1, windowMs: 60_000, key: keyBy.header('x-user-id') })
 * ```
 */
export const keyBy: NestKeyBy = { ...base, user: userKey };

/** Something that looks like a limiter: lets options that name none be checked by the flow. */
const noLimiter = { consume: () => {} } as unknown as Limiter;

/** The options of one level (module, controller, handler) over those of the level above, and its flow: none when no level names a limit. */
export interface Level extends OptionLevel {
  readonly flow: Flow | undefined;
  /** The level's own `stack` option, when given. */
  readonly stack?: boolean;
}

function createFlow(options: NestRateLimitOptions): Flow {
  return createRateLimitFlow<NestArgs, NestHandler>(options, {
    name: '@floodgate/nestjs',
    defaultKey: () => keyBy.ip(),
    // On HTTP routes only: a gateway's or a subscription's request is shared by every call of its connection.
    expose: (decision, request, context) => {
      if (callIn(context)?.type !== 'ws' && callIn(context)?.type !== 'graphql') request.rateLimit = decision;
    },
    clientIp: reader.clientIp,
    header: reader.header,
    // The reports behind the headers are kept per HTTP request, per call elsewhere (a connection's request outlives its calls).
    request: (request, context) => {
      const type = callIn(context)?.type;
      return type === 'ws' || type === 'graphql' ? context : request;
    },
    // Express's request has its app, Fastify's its server.
    trust: proxyTrustOf,
  });
}

/** A level's own options over `parent`'s (the module's when there is none): see inheritOptions in @floodgate/core/adapter. */
export function inherit(parent: Level | undefined, own: NestRateLimitOptions, namespace?: string): Level {
  if (typeof own !== 'object' || own === null || Array.isArray(own)) createFlow(own); // throws, saying what it takes
  const { stack, ...options } = own;
  const where = namespace === undefined ? 'FloodgateModule' : `@RateLimit() of ${namespace}`;
  if (stack !== undefined && typeof stack !== 'boolean') {
    throw new FloodgateError(ErrorCodes.OPTION, `${where}: stack must be true or false, got ${JSON.stringify(stack)}.`);
  }
  const { flowOptions, limited, ...level } = inheritOptions(parent, options as Record<string, unknown>, namespace);
  // The module's options limit every route when they name a limit; otherwise they are defaults for @RateLimit().
  if (parent === undefined && !limited) {
    createFlow({ ...level.options, limiter: noLimiter }); // checks them now all the same
    return { ...level, stack, flow: undefined };
  }
  const flow = createFlow(flowOptions);
  if (stack === false && parent !== undefined && flow.limiter === parent.limiter) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `${where} has stack: false but no limit of its own (limit, rules or limiter) to replace the limits above with: give it one, or exempt the route with @SkipRateLimit().`,
    );
  }
  return { ...level, stack, limiter: flow.limiter, flow };
}
