import { type Decision, ErrorCodes, FloodgateError, type KeyBy, type Limiter } from '@floodgate/core';
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
export interface NestRateLimitOptions extends RateLimitOptions<NestArgs, NestHandler> {
  /**
   * For a controller's or a handler's `@RateLimit()` with limits of its own: `true`, they are added to
   * the limits of the levels above (a request must pass the module's, the controller's and its own);
   * `false`, they replace them. On the module: the default of every level. @defaultValue true
   */
  stack?: boolean;
}

export type Flow = RateLimitFlow<NestArgs, NestHandler>;

const reader: RequestReader<NestArgs> = {
  clientIp: (request) => request.ip,
  socketIp: (request) => request.socket?.remoteAddress,
  header: (name, request) => request.headers[name],
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
    expose: (decision, request) => {
      request.rateLimit = decision;
    },
    clientIp: reader.clientIp,
    header: reader.header,
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
