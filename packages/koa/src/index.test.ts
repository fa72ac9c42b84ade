import { createLimiter, type Decision } from '@floodgate/core';
import { type AdapterUnderTest, adapterContract, captureWarnings, held, serveHttp } from '@floodgate/test-support';
import Router from '@koa/router';
import Koa3, { type Context, type Next } from 'koa';
import Koa2 from 'koa2';
import { describe, expect, it } from 'vitest';
import { keyBy, rateLimit } from './index.js';

type KoaClass = typeof Koa3;

const listen = (app: { callback(): Parameters<typeof serveHttp>[0] }) => serveHttp(app.callback());

function koaUnderTest(name: string, Koa: KoaClass): AdapterUnderTest {
  return {
    name,
    rateLimit,
    keyBy,
    createLimiter,
    header: ([ctx], header) => (ctx as Context).get(header) || undefined,
    teapot: (ctx: Context, _next: Next, decision: Decision) => {
      ctx.status = 418;
      ctx.body = { rule: decision.rule, retryAfter: ctx.response.get('retry-after') };
    },
    seesAbandonedRequests: true,
    reported: ([ctx]) => (ctx as Context).response.get('x-used') || undefined,
    async start(routes, settings = {}) {
      const app = new Koa();
      app.silent = true; // errors the routes throw on purpose are not news
      app.proxy = settings.trustProxy === true;
      app.maxIpsCount = 1; // the test's requests come through one proxy, themselves
      const router = new Router();
      for (const route of routes) {
        const method = route.method === 'POST' ? 'post' : 'get';
        router[method](route.path, ...[route.options].flat().map(rateLimit), async (ctx: Context) => {
          if (ctx.query.throw) throw new Error('the route failed');
          if (ctx.query.hang) return new Promise(() => {});
          if (ctx.query.used) ctx.set('x-used', String(ctx.query.used));
          if (ctx.query.hold) await held(String(ctx.query.hold));
          if (ctx.query.wait) await new Promise((resolve) => setTimeout(resolve, Number(ctx.query.wait)));
          ctx.status = Number(ctx.query.status ?? 200);
          ctx.body = ctx.state.rateLimit ?? { skipped: true };
        });
      }
      app.use(router.routes());
      return listen(app);
    },
  };
}

const frameworks: [string, KoaClass][] = [
  ['Koa 2', Koa2 as unknown as KoaClass],
  ['Koa 3', Koa3],
];

for (const [name, Koa] of frameworks) adapterContract(koaUnderTest(name, Koa));

describe.each(frameworks)('%s specifics', (_, Koa) => {
  it('warns once about X-Forwarded-For while app.proxy is off, once about app.proxy without app.maxIpsCount, never with both set', async () => {
    const warnings = captureWarnings();
    /** Codes warned while serving `requests` X-Forwarded-For requests with these proxy settings (and `validate`). */
    const warned = async (proxy: boolean, maxIpsCount: number, validate?: boolean) => {
      const app = new Koa();
      app.proxy = proxy;
      app.maxIpsCount = maxIpsCount;
      app.use(rateLimit({ limit: 100, windowMs: 60_000, validate }));
      app.use((ctx: Context) => {
        ctx.body = 'ok';
      });
      const { url, close } = await listen(app);
      try {
        for (const xff of ['198.51.100.1', '198.51.100.2', '203.0.113.9, 198.51.100.3']) {
          expect((await fetch(url, { headers: { 'x-forwarded-for': xff } })).status).toBe(200);
        }
      } finally {
        await close();
      }
      return warnings.taken();
    };
    try {
      const untrusted = await warned(false, 0);
      expect(untrusted.map((w) => w.code)).toEqual(['WRN_FG_X_FORWARDED_FOR']);
      expect(untrusted[0]?.message).toContain('Koa trusts no proxy (app.proxy is false)');
      const everyone = await warned(true, 0);
      expect(everyone.map((w) => w.code)).toEqual(['WRN_FG_TRUST_PROXY']);
      expect(everyone[0]?.message).toContain('set app.proxy = true and app.maxIpsCount to the number of proxies');
      expect(await warned(true, 1)).toEqual([]);
      expect(await warned(false, 0, false)).toEqual([]);
      expect(await warned(true, 0, false)).toEqual([]);
    } finally {
      warnings.stop();
    }
  });

  it('follows app.proxy and app.maxIpsCount for ctx.ip', async () => {
    const app = new Koa();
    app.proxy = true;
    app.maxIpsCount = 1; // only the last X-Forwarded-For entry, the one our proxy appended
    app.use(rateLimit({ limit: 1, windowMs: 60_000 }));
    app.use((ctx: Context) => {
      ctx.body = ctx.state.rateLimit;
    });
    const { url, close } = await listen(app);
    try {
      const status = async (xff: string) => (await fetch(url, { headers: { 'x-forwarded-for': xff } })).status;
      expect(await status('6.6.6.1, 198.51.100.1')).toBe(200);
      expect(await status('6.6.6.2, 198.51.100.1')).toBe(429); // a spoofed left entry does not help
      expect(await status('6.6.6.1, 198.51.100.2')).toBe(200);
    } finally {
      await close();
    }
  });

  it('works as app-wide middleware and exposes ctx.state.rateLimit', async () => {
    const app = new Koa();
    app.use(rateLimit({ limit: 2, windowMs: 60_000 }));
    app.use((ctx: Context) => {
      const decision: Decision | undefined = ctx.state.rateLimit;
      ctx.body = { remaining: decision?.remaining };
    });
    const { url, close } = await listen(app);
    try {
      expect(await (await fetch(url)).json()).toEqual({ remaining: 1 });
      expect(await (await fetch(url)).json()).toEqual({ remaining: 0 });
      expect((await fetch(url)).status).toBe(429);
    } finally {
      await close();
    }
  });
});
