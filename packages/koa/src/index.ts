import type { Decision, KeyBy } from '@floodgate/core';
import { createKeyBy, createRateLimitFlow, type ProxyTrust, type RateLimitOptions, type RequestReader, settleWhenDone } from '@floodgate/core/adapter';
import type { Context, Middleware, Next } from 'koa';

export { createLimiter, type Decision, FloodgateError, type Limiter, MemoryStore, type RuleOptions } from '@floodgate/core';

/** What Koa hands a middleware, minus `next`: what `key`, `cost`, `skip` and `message` receive. */
export type KoaArgs = [ctx: Context];

/** A custom denial response. Rate-limit headers are already set on `ctx`. */
export type KoaHandler = (ctx: Context, next: Next, decision: Decision) => unknown;

/** Options of `rateLimit()` for Koa (see `@floodgate/core` RateLimitOptions). */
export type KoaRateLimitOptions = RateLimitOptions<KoaArgs, KoaHandler>;

/** The state Floodgate adds: `ctx.state.rateLimit`. */
export interface RateLimitState {
  rateLimit?: Decision;
}

const KOA_FIX = 'set app.proxy = true and app.maxIpsCount to the number of proxies in front of the app (1 for one load balancer)';
const KOA_TRUST: Readonly<Record<ProxyTrust['level'], ProxyTrust>> = {
  none: Object.freeze({ level: 'none', setting: 'Koa trusts no proxy (app.proxy is false)', fix: KOA_FIX }),
  some: Object.freeze({ level: 'some', setting: 'Koa trusts app.maxIpsCount proxies', fix: KOA_FIX }),
  all: Object.freeze({ level: 'all', setting: 'Koa trusts every proxy (app.proxy is true and app.maxIpsCount is 0)', fix: KOA_FIX }),
};

/** How far Koa trusts proxies (`app.proxy`, `app.maxIpsCount`): what the setup warnings say. */
function koaProxyTrust(app: Context['app']): ProxyTrust {
  if (!app.proxy) return KOA_TRUST.none;
  return app.maxIpsCount > 0 ? KOA_TRUST.some : KOA_TRUST.all;
}

const reader: RequestReader<KoaArgs> = {
  clientIp: (ctx) => ctx.ip,
  socketIp: (ctx) => ctx.req.socket?.remoteAddress,
  header: (name, ctx) => ctx.req.headers[name],
};

/**
 * Key extractors for Koa. `keyBy.ip()` reads `ctx.ip`, so it follows
 * `app.proxy` and `app.maxIpsCount`.
 *
 * @example
 * ```ts
 * router.post('/sms', rateLimit({ limit: 1, windowMs: 60_000, key: keyBy.header('x-user-id') }), send);
 * ```
 */
export const keyBy: KeyBy<KoaArgs> = createKeyBy(reader);

/**
 * Rate-limiting middleware for Koa 2 and 3, for `app.use()` or one
 * `@koa/router` route. The decision is on `ctx.state.rateLimit`.
 *
 * @example
 * ```ts
 * import Koa from 'koa';
 * import { rateLimit } from '@floodgate/koa';
 *
 * const app = new Koa();
 * app.use(rateLimit({ limit: 100, windowMs: 60_000 })); // 100 requests a minute per client IP
 * ```
 */
export function rateLimit(options: KoaRateLimitOptions): Middleware<RateLimitState> {
  const flow = createRateLimitFlow<KoaArgs, KoaHandler>(options, {
    name: '@floodgate/koa',
    defaultKey: () => keyBy.ip(),
    expose: (decision, ctx) => {
      ctx.state.rateLimit = decision;
    },
    clientIp: reader.clientIp,
    header: reader.header,
    trust: (ctx) => koaProxyTrust(ctx.app),
  });
  return async function floodgateRateLimit(ctx, next) {
    const outcome = await flow.run([ctx as Context]);
    if (outcome.kind === 'skip') return next();
    for (const [name, value] of outcome.headers) ctx.set(name, value);
    if (outcome.kind === 'pass') {
      if (!flow.mustSettle(outcome)) return next();
      const handled = next();
      // The work is over when the rest of the chain is, and the response is sent or cut off.
      const status = handled.then(() => ctx.status);
      settleWhenDone(flow, outcome, ctx.res, status);
      return handled;
    }
    if (outcome.custom && flow.handler !== undefined) return flow.handler(ctx as Context, next, outcome.decision);
    ctx.status = outcome.status;
    ctx.type = outcome.contentType;
    ctx.body = outcome.body;
  };
}
