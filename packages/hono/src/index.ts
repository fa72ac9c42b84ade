import { type Decision, ErrorCodes, FloodgateError, type KeyBy } from '@floodgate/core';
import {
  createKeyBy,
  createRateLimitFlow,
  type NodeResponse,
  type ProxyTrust,
  type RateLimitOptions,
  type RequestReader,
  settleWhenDone,
} from '@floodgate/core/adapter';
import type { Context, MiddlewareHandler, Next } from 'hono';
import type { GetConnInfo } from 'hono/conninfo';
import type { ContentfulStatusCode } from 'hono/utils/http-status';

export { createLimiter, type Decision, type Limiter, MemoryStore, type RuleOptions } from '@floodgate/core';
export { FloodgateError };

/** What Hono hands a middleware, minus `next`: what `key`, `cost`, `skip` and `message` receive. */
export type HonoArgs = [c: Context];

/** A custom denial response. Rate-limit headers are already set on `c`. */
export type HonoHandler = (c: Context, next: Next, decision: Decision) => Response | Promise<Response>;

/** Options of `rateLimit()` for Hono (see `@floodgate/core` RateLimitOptions). */
export interface HonoRateLimitOptions extends RateLimitOptions<HonoArgs, HonoHandler> {
  /**
   * How to find the client address on runtimes other than Node: pass the
   * runtime's helper (`getConnInfo` from `hono/bun`, `hono/deno`,
   * `hono/cloudflare-workers`, ...). On @hono/node-server nothing is needed.
   */
  getConnInfo?: GetConnInfo;
}

/** What the middleware adds to the context: `c.get('rateLimit')`. */
export interface RateLimitVariables {
  rateLimit: Decision;
}

/** getConnInfo given to the rateLimit() handling a request, for the key extractors. */
const connInfoOf = new WeakMap<Context, GetConnInfo>();

/** The client address: the runtime's getConnInfo, or the socket @hono/node-server puts on `c.env.incoming`. */
function clientAddress(c: Context): string | undefined {
  const getConnInfo = connInfoOf.get(c);
  if (getConnInfo !== undefined) return getConnInfo(c).remote.address;
  return (c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined)?.incoming?.socket?.remoteAddress;
}

/**
 * The Node response @hono/node-server puts on `c.env.outgoing`, when there is
 * one. Read by shape, not imported: this package loads on every runtime.
 */
function nodeResponse(c: Context): NodeResponse | undefined {
  const outgoing = (c.env as { outgoing?: Partial<NodeResponse> } | undefined)?.outgoing;
  return typeof outgoing?.once === 'function' ? (outgoing as NodeResponse) : undefined;
}

/** On @hono/node-server without getConnInfo the client address is the socket's: proxies go unnoticed. Elsewhere the runtime decides. */
const socketOnly: ProxyTrust = Object.freeze({
  level: 'none',
  setting: 'Hono has no trust-proxy setting: keyBy.ip() is the address of the connection',
  fix: 'key by the header your proxies set: keyBy.forwardedFor({ hops: 1 }) with one proxy in front (see the keyBy presets for platforms)',
});
const proxyTrust = (c: Context) => (connInfoOf.has(c) || (c.env as { incoming?: unknown } | undefined)?.incoming === undefined ? undefined : socketOnly);

const reader: RequestReader<HonoArgs> = {
  clientIp: clientAddress,
  socketIp: clientAddress,
  header: (name, c) => c.req.header(name),
};

/**
 * Key extractors for Hono. Hono has no trust-proxy setting: `keyBy.ip()` is
 * the connection's address (on Cloudflare Workers, `cf-connecting-ip` via
 * getConnInfo); behind your own proxies use `keyBy.forwardedFor({ hops })`.
 *
 * @example
 * ```ts
 * app.post('/sms', rateLimit({ limit: 1, windowMs: 60_000, key: keyBy.header('x-user-id') }), send);
 * ```
 */
export const keyBy: KeyBy<HonoArgs> = createKeyBy(reader);

/**
 * Rate-limiting middleware for Hono 4, on any runtime. The decision is
 * `c.get('rateLimit')`.
 *
 * @example
 * ```ts
 * import { Hono } from 'hono';
 * import { rateLimit } from '@floodgate/hono';
 *
 * const app = new Hono();
 * app.use(rateLimit({ limit: 100, windowMs: 60_000 })); // 100 requests a minute per client IP
 * // Bun: rateLimit({ limit: 100, windowMs: 60_000, getConnInfo }) with getConnInfo from 'hono/bun'
 * ```
 */
export function rateLimit(options: HonoRateLimitOptions): MiddlewareHandler<{ Variables: RateLimitVariables }> {
  const flow = createRateLimitFlow<HonoArgs, HonoHandler>(options, {
    name: '@floodgate/hono',
    defaultKey: () => keyBy.ip(),
    expose: (decision, c) => {
      c.set('rateLimit', decision);
    },
    clientIp: clientAddress,
    header: reader.header,
    trust: proxyTrust,
    extraKeys: ['getConnInfo'],
  });
  const getConnInfo = options.getConnInfo;
  if (getConnInfo !== undefined && typeof getConnInfo !== 'function') {
    throw new FloodgateError(ErrorCodes.OPTION, "getConnInfo must be the runtime's getConnInfo function (e.g. from 'hono/bun').");
  }
  return async function floodgateRateLimit(c, next) {
    if (getConnInfo !== undefined) connInfoOf.set(c, getConnInfo);
    const outcome = await flow.run([c]);
    if (outcome.kind === 'skip') return next();
    for (const [name, value] of outcome.headers) c.header(name, value);
    if (outcome.kind === 'deny') {
      if (outcome.custom && flow.handler !== undefined) return flow.handler(c, next, outcome.decision);
      return c.body(outcome.body, outcome.status as ContentfulStatusCode, { 'Content-Type': outcome.contentType });
    }
    if (!flow.mustSettle(outcome)) return next();
    const outgoing = nodeResponse(c);
    if (outgoing !== undefined) {
      // On Node the response is visible: the work is over when the handler is done and the
      // response (a streamed body included) is sent or cut off.
      const handled = next();
      const status = handled.then(() => c.res.status);
      settleWhenDone(flow, outcome, outgoing, status);
      return handled;
    }
    try {
      await next();
    } finally {
      // Fetch-style runtimes hide the connection: the lease ends when the handler returns.
      // Hono turns a handler's error into c.res (500) before next() returns: the status is final here.
      flow.settle(outcome, c.res.status);
    }
  };
}
