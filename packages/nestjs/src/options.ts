import type { Decision, Limiter } from '@floodgate/core';
import {
  createKeyBy,
  createRateLimitFlow,
  expressProxyTrust,
  fastifyProxyTrust,
  givenOptions,
  joinHeader,
  type KeyBy,
  limiterOptionNames,
  overlayLimiterOptions,
  type RateLimitFlow,
  type RateLimitOptions,
  type RequestReader,
} from '@floodgate/core/adapter';
import type { ExecutionContext } from '@nestjs/common';

/**
 * The request as Nest hands it to guards: Express's `Request` or Fastify's
 * `FastifyRequest`, whichever platform the app runs on. Floodgate puts its
 * decision on `request.rateLimit`.
 */
// biome-ignore lint/suspicious/noExplicitAny: the request is the platform's own object; callbacks read what they need from it.
export type NestRequest = Record<string, any> & {
  headers: Record<string, string | string[] | undefined>;
  ip?: string;
  rateLimit?: Decision;
};

/** What `key`, `cost`, `skip` and `message` receive: the request and Nest's ExecutionContext. */
export type NestArgs = [request: NestRequest, context: ExecutionContext];

/**
 * A custom denial: returns (or throws) the exception to throw instead of
 * `RateLimitedException`; Nest's exception layer answers with it. The
 * rate-limit headers are already set on the response.
 */
export type NestHandler = (request: NestRequest, context: ExecutionContext, decision: Decision) => Error | Promise<Error>;

/** Options of `FloodgateModule.forRoot()` and `@RateLimit()` (see `@floodgate/core` RateLimitOptions). */
export type NestRateLimitOptions = RateLimitOptions<NestArgs, NestHandler>;

export type Flow = RateLimitFlow<NestArgs, NestHandler>;

const reader: RequestReader<NestArgs> = {
  clientIp: (request) => request.ip,
  socketIp: (request) => request.socket?.remoteAddress,
  header: (name, request) => joinHeader(request.headers[name]),
};

/**
 * Key extractors for Nest. `keyBy.ip()` reads `request.ip`, so it follows the
 * platform's trust-proxy setting (Express `app.set('trust proxy', ...)`,
 * `new FastifyAdapter({ trustProxy })`).
 *
 * @example
 * ```ts
 * @RateLimit({ limit: 1, windowMs: 60_000, key: keyBy.header('x-user-id') })
 * ```
 */
export const keyBy: KeyBy<NestArgs> = createKeyBy(reader);

/** Something that looks like a limiter: lets options that name none be checked by the flow. */
const noLimiter = { consume: () => {} } as unknown as Limiter;

/**
 * The options of one level (module, controller, handler) merged over those of
 * the level above, and its flow: none when no level names a limit.
 */
export interface Level {
  /** Everything but the limiter: what the next level starts from. */
  readonly options: Readonly<Record<string, unknown>>;
  /** The limiter options this level's limiter was made of (none when a `limiter` was given). */
  readonly limiterOptions: Readonly<Record<string, unknown>> | undefined;
  readonly flow: Flow | undefined;
}

function createFlow(options: NestRateLimitOptions): Flow {
  return createRateLimitFlow<NestArgs, NestHandler>(options, {
    name: '@floodgate/nestjs',
    defaultKey: () => keyBy.ip(),
    expose: (decision, request) => {
      request.rateLimit = decision;
    },
    clientIp: reader.clientIp,
    header: reader.header,
    // Express's request has its app, Fastify's its server.
    trust: (request) => expressProxyTrust(request.app) ?? fastifyProxyTrust(request.server),
  });
}

/**
 * Merges a level's own options over `parent`'s (the module's when there is
 * none). Adapter options (key, cost, message, headers, ...) are overridden one
 * by one. A level that names no limiter option keeps the limiter above (same
 * counts); one that gives `limiter` replaces the limiter options above; one
 * that gives limiter options gets its own limiter, made of them over the
 * limiter options above (`rules` replaces the shorthand `limit`/`windowMs`/...,
 * and the other way round).
 */
export function inherit(parent: Level | undefined, own: NestRateLimitOptions, namespace?: string): Level {
  if (typeof own !== 'object' || own === null || Array.isArray(own)) createFlow(own); // throws, saying what it takes
  const options: Record<string, unknown> = { ...parent?.options };
  const ownLimiter: Record<string, unknown> = {};
  // An option set to undefined is not given: what the level above says stays (a limit, headers, ...).
  for (const [name, value] of Object.entries(givenOptions(own))) {
    if (limiterOptionNames.has(name)) ownLimiter[name] = value;
    else if (name !== 'limiter') options[name] = value;
  }
  let limiterOptionsUsed = parent?.limiterOptions;
  // What this level's flow is given: limiter options (a new limiter), or a limiter.
  let limiter: Record<string, unknown> | undefined = limiterOptionsUsed;
  if (Object.keys(ownLimiter).length > 0) {
    // A limiter of its own counts in a namespace of its own: on a shared store it must not count the module's requests.
    limiterOptionsUsed = overlayLimiterOptions(parent?.limiterOptions, ownLimiter, own.limiter === undefined ? namespace : undefined);
    limiter = own.limiter === undefined ? limiterOptionsUsed : { ...limiterOptionsUsed, limiter: own.limiter }; // both: the flow says which to drop
  } else if (own.limiter !== undefined) {
    limiterOptionsUsed = undefined;
    limiter = { limiter: own.limiter };
  } else if (parent?.flow !== undefined) limiter = { limiter: parent.flow.limiter };
  // The module's options limit every route when they name a limit; otherwise they are defaults for @RateLimit().
  if (parent === undefined && !['limit', 'rules', 'limiter'].some((name) => limiter?.[name] !== undefined)) {
    createFlow({ ...options, limiter: noLimiter }); // checks them now all the same
    return { options, limiterOptions: limiterOptionsUsed, flow: undefined };
  }
  const flow = createFlow({ ...options, ...limiter });
  return { options, limiterOptions: limiterOptionsUsed, flow };
}
