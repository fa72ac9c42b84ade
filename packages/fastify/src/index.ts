import { type Decision, ErrorCodes, FloodgateError, type KeyBy, type Limiter } from '@floodgate/core';
import {
  createKeyBy,
  createRateLimitFlow,
  handlerSignals,
  inheritOptions,
  type OptionLevel,
  proxyTrustOf,
  type RateLimitFlow,
  type RateLimitOptions,
  type RequestReader,
  settleWhenDone,
} from '@floodgate/core/adapter';
import type { FastifyInstance, FastifyPluginCallback, FastifyReply, FastifyRequest, onSendHookHandler, RouteOptions } from 'fastify';
import fp from 'fastify-plugin';

export { createLimiter, type Decision, FloodgateError, type Limiter, MemoryStore, type RuleOptions } from '@floodgate/core';

declare module 'fastify' {
  interface FastifyRequest {
    /** The rate-limit decision for this request, set by @floodgate/fastify. */
    rateLimit?: Decision;
  }
  interface FastifyContextConfig {
    /** This route's own rate-limit options, merged over the plugin's (limits of its own are added to the plugin's: `stack`); `false` exempts the route. */
    rateLimit?: FastifyRouteRateLimitOptions | false;
  }
}

/** What `key`, `cost`, `skip`, `message`, `allowList` and `denyList` receive. */
export type FastifyArgs = [request: FastifyRequest, reply: FastifyReply];

/** A custom denial response: send it with `reply` or return the payload. The status (statusCode) and rate-limit headers are already set. */
export type FastifyHandler = (request: FastifyRequest, reply: FastifyReply, decision: Decision) => unknown;

/** The request lifecycle hook a limit runs in: `onRequest` before the body is parsed, the others after. */
export type RateLimitHook = 'onRequest' | 'preValidation' | 'preHandler';

/** Options of a route's `config: { rateLimit }`: any plugin option but `global`. */
export interface FastifyRouteRateLimitOptions extends RateLimitOptions<FastifyArgs, FastifyHandler> {
  /** Where in the request lifecycle the limit runs; a key that reads the body needs 'preValidation' or 'preHandler'. @defaultValue 'onRequest' */
  hook?: RateLimitHook;
  /**
   * For a route with limits of its own: `true`, they are added to the plugin's (a request must pass
   * both, and spends the plugin's budget too); `false`, they replace it (the route counts apart, as
   * with @fastify/rate-limit). On the plugin: the default of its routes. @defaultValue true
   */
  stack?: boolean;
}

/** Options of the `rateLimit` plugin (see `@floodgate/core` RateLimitOptions). */
export interface FastifyRateLimitOptions extends FastifyRouteRateLimitOptions {
  /** Limit every route of the context (true), or only routes with `config: { rateLimit: {...} }` (false). @defaultValue true */
  global?: boolean;
}

type HookDone = (error?: Error) => void;
type Hook = (request: FastifyRequest, reply: FastifyReply, done: HookDone) => void;
type RouteHook = { stage: RateLimitHook; hook: Hook };

/** Header names as Fastify keeps them, in lower case: reply.header() then makes no new string per request. */
const lowerCaseNames = new Map<string, string>();

function setHeaders(reply: FastifyReply, headers: readonly (readonly [name: string, value: string])[]): void {
  for (const [name, value] of headers) {
    let lower = lowerCaseNames.get(name);
    if (lower === undefined) {
      lower = name.toLowerCase();
      lowerCaseNames.set(name, lower);
    }
    reply.header(lower, value);
  }
}

const reader: RequestReader<FastifyArgs> = {
  clientIp: (request) => request.ip,
  socketIp: (request) => request.raw.socket?.remoteAddress,
  header: (name, request) => request.headers[name],
};

/**
 * Key extractors for Fastify. `keyBy.ip()` reads `request.ip`, so it follows
 * Fastify's `trustProxy` option.
 *
 * @example
 * ```ts
 * app.post('/sms', { config: { rateLimit: { limit: 1, windowMs: 60_000, key: keyBy.header('x-user-id') } } }, send);
 * ```
 */
export const keyBy: KeyBy<FastifyArgs> = createKeyBy(reader);

/** Per request, when the route's handler is done: once it sent its reply (errors too), whether or not the client is still there to read it. */
const handlers = handlerSignals();

const signalHandlerDone: onSendHookHandler = (request, reply, payload, next) => {
  handlers.done(request, reply.statusCode);
  next(null, payload);
};

function createHook(options: RateLimitOptions<FastifyArgs, FastifyHandler>): { hook: Hook; limiter: Limiter } {
  const flow = createRateLimitFlow<FastifyArgs, FastifyHandler>(options, {
    name: '@floodgate/fastify',
    defaultKey: () => keyBy.ip(),
    expose: (decision, request) => {
      request.rateLimit = decision;
    },
    clientIp: reader.clientIp,
    header: reader.header,
    trust: proxyTrustOf,
  });
  const answer = (outcome: RateLimitFlow.Outcome, request: FastifyRequest, reply: FastifyReply, done: HookDone): void => {
    if (outcome.kind !== 'skip') setHeaders(reply, outcome.headers);
    if (outcome.kind !== 'deny') {
      // The work is over when the handler has sent its reply and the response is sent or cut off.
      if (outcome.kind === 'pass' && flow.mustSettle(outcome)) settleWhenDone(flow, outcome, reply.raw, handlers.wait(request));
      done();
      return;
    }
    reply.code(outcome.status);
    const handler = outcome.custom ? flow.handler : undefined;
    if (handler === undefined) reply.type(outcome.contentType).send(outcome.body);
    else {
      // done() is never called: the request ends with what the handler sent or returned, the route handler does not run.
      new Promise((resolve) => resolve(handler(request, reply, outcome.decision))).then((payload) => {
        if (payload !== undefined) reply.send(payload);
      }, done);
    }
  };
  // A callback hook, not an async one: with the memory store the outcome is known at once, and
  // the request goes on without the promises and microtask turns of async functions.
  const hook: Hook = function floodgateRateLimit(request, reply, done) {
    let outcome: RateLimitFlow.Outcome | Promise<RateLimitFlow.Outcome>;
    try {
      outcome = flow.runNow([request, reply]);
    } catch (error) {
      done(error as Error);
      return;
    }
    if (!('kind' in outcome)) outcome.then((settled) => answer(settled, request, reply, done)).catch(done);
    else answer(outcome, request, reply, done);
  };
  return { hook, limiter: flow.limiter };
}

function checkHook(hook: unknown, where: string): RateLimitHook {
  if (typeof hook !== 'string' || !['onRequest', 'preValidation', 'preHandler'].includes(hook)) {
    throw new FloodgateError(ErrorCodes.OPTION, `${where}hook must be 'onRequest', 'preValidation' or 'preHandler', got ${JSON.stringify(hook)}.`);
  }
  return hook as RateLimitHook;
}

function checkStack(stack: unknown, where: string): boolean {
  if (typeof stack !== 'boolean') throw new FloodgateError(ErrorCodes.OPTION, `${where}stack must be true or false, got ${JSON.stringify(stack)}.`);
  return stack;
}

/** Adds `hook` to the route's hooks of its stage, after the route's own (authentication, say), so that a key can read what they set. */
function addRouteHook(route: RouteOptions, { stage, hook }: RouteHook): void {
  const existing: unknown = route[stage];
  route[stage] = (existing === undefined ? [hook] : [existing, hook].flat()) as RouteOptions['onRequest'];
}

function install(fastify: FastifyInstance, options: FastifyRateLimitOptions): void {
  const { global = true, hook: stage = 'onRequest', stack = true, ...pluginOptions } = options as FastifyRateLimitOptions & Record<string, unknown>;
  if (typeof global !== 'boolean') throw new FloodgateError(ErrorCodes.OPTION, `global must be true or false, got ${JSON.stringify(global)}.`);
  checkHook(stage, '');
  checkStack(stack, '');
  // Built now, so that bad options fail at register time; its limiter is the one routes without limits of their own share.
  const plugin = inheritOptions(undefined, pluginOptions);
  const base = global || plugin.limited ? createHook(plugin.flowOptions) : undefined;
  const pluginLevel: OptionLevel = { ...plugin, limiter: base?.limiter };
  /** Route hooks by the route's own options object and URL: a GET route and its automatic HEAD route share one. */
  const routeHooks = new WeakMap<object, Map<string, RouteHook>>();
  /** The route options whose own limits are added to the plugin's: those routes spend the plugin's budget too. */
  const stacked = new WeakSet<object>();

  if (!fastify.hasRequestDecorator('rateLimit')) fastify.decorateRequest('rateLimit', undefined);
  fastify.addHook('onSend', signalHandlerDone);
  fastify.addHook('onRoute', (route) => {
    const own: unknown = route.config?.rateLimit;
    if (own === undefined || own === false) return;
    const name = `${[route.method].flat().join(',')} ${route.url}`;
    if (typeof own !== 'object' || own === null || Array.isArray(own)) {
      throw new FloodgateError(ErrorCodes.OPTION, `${name}: config.rateLimit must be an options object or false, got ${JSON.stringify(own)}.`);
    }
    const byUrl = routeHooks.get(own) ?? new Map<string, RouteHook>();
    routeHooks.set(own, byUrl);
    let built = byUrl.get(route.url);
    const { hook: ownStage = stage, stack: ownStack, ...routeOptions } = own as FastifyRouteRateLimitOptions;
    if (built === undefined) {
      // Without limits of its own the route shares the plugin's limiter (one budget); with them it gets
      // a limiter of its own, in a key namespace of its own, so that it never shares counts with another route.
      const level = inheritOptions(pluginLevel, routeOptions, name);
      if (!level.limited) {
        throw new FloodgateError(
          ErrorCodes.RULES,
          `${name}: config.rateLimit sets no limit and neither does the plugin: give one of them limit and windowMs, rules or a limiter.`,
        );
      }
      const where = `${name}: config.rateLimit.`;
      const ownLimits = base === undefined || level.flowOptions.limiter !== base.limiter;
      if (ownStack !== undefined && !checkStack(ownStack, where) && !ownLimits) {
        throw new FloodgateError(
          ErrorCodes.OPTION,
          `${name}: config.rateLimit has stack: false but no limit of its own (limit, rules or limiter) to replace the plugin's with: give it one, or exempt the route with config: { rateLimit: false }.`,
        );
      }
      // Stacked, the plugin limits the route as it limits a route without config: its key, its cost, in its stage.
      if (base !== undefined && ownLimits && (ownStack ?? stack)) stacked.add(own);
      built = { stage: checkHook(ownStage, where), hook: createHook(level.flowOptions).hook };
      byUrl.set(route.url, built);
    }
    // A global registration's context hook runs the plugin's limit; otherwise it is a hook of the route's.
    if (!global && base !== undefined && stacked.has(own)) addRouteHook(route, { stage, hook: base.hook });
    addRouteHook(route, built);
  });
  if (base !== undefined && global) {
    // A context hook, not a route hook: it limits every route of the context whenever it was
    // declared, and the context's not-found handler, so that guessing URLs is limited too.
    fastify.addHook(stage, function floodgateRateLimitAll(request: FastifyRequest, reply: FastifyReply, done: HookDone) {
      const own = request.routeOptions.config?.rateLimit;
      if (own === undefined || (own !== false && stacked.has(own))) base.hook(request, reply, done);
      else if (own === false || routeHooks.has(own)) done();
      else {
        done(
          new FloodgateError(
            ErrorCodes.OPTION,
            `${request.method} ${request.url} has config.rateLimit but was declared before @floodgate/fastify was loaded: await app.register(rateLimit, ...) before declaring routes.`,
          ),
        );
      }
    });
  }
}

// A callback plugin that reports bad options to done() before it returns (avvio does not catch a throw).
const plugin: FastifyPluginCallback<FastifyRateLimitOptions> = (fastify, options, done) => {
  try {
    install(fastify, options);
  } catch (error) {
    return done(error as Error);
  }
  done();
};

/**
 * Rate limiting for Fastify 4 and 5, as a plugin. Registered with `global: true`
 * (the default) it limits every route of the context it is registered in (and
 * that context's not-found handler: every 404 at the root); with `global: false`, only routes with
 * `config: { rateLimit: {...} }`. A route's own options are merged over the
 * plugin's, and a route's own limits are added to the plugin's: a request
 * must pass both (`stack: false` makes them replace it instead);
 * `config: { rateLimit: false }` exempts a route. The decision is
 * `request.rateLimit`.
 *
 * @example
 * ```ts
 * import Fastify from 'fastify';
 * import { rateLimit } from '@floodgate/fastify';
 *
 * const app = Fastify();
 * await app.register(rateLimit, { limit: 100, windowMs: 60_000 }); // 100 requests a minute per client IP
 * app.post('/export', { config: { rateLimit: { limit: 5 } } }, exportData); // 5 a minute, within the 100
 * app.get('/health', { config: { rateLimit: false } }, () => 'ok');
 * ```
 */
export const rateLimit = fp(plugin, { fastify: '^4.23.0 || ^5.0.0', name: '@floodgate/fastify' });
