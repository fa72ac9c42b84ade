import { createLimiter, type Decision } from '@floodgate/core';
import { type AdapterUnderTest, adapterContract, captureWarnings, held, serveHttp } from '@floodgate/test-support';
import { getRequestListener } from '@hono/node-server';
import { type Context, Hono, type Next } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { describe, expect, it } from 'vitest';
import { keyBy, type RateLimitVariables, rateLimit } from './index.js';

const listen = (app: { fetch: Parameters<typeof getRequestListener>[0] }) => serveHttp(getRequestListener(app.fetch));

const hono: AdapterUnderTest = {
  name: 'Hono 4 (@hono/node-server)',
  rateLimit,
  keyBy,
  createLimiter,
  header: ([c], header) => (c as Context).req.header(header),
  teapot: (c: Context, _next: Next, decision: Decision) => c.json({ rule: decision.rule, retryAfter: c.res.headers.get('retry-after') }, 418),
  // On @hono/node-server the adapter watches the Node response on c.env.outgoing, as Express and Koa do.
  seesAbandonedRequests: true,
  reported: ([c]) => (c as Context).res.headers.get('x-used') ?? undefined,
  async start(routes, settings = {}) {
    const app = new Hono<{ Variables: RateLimitVariables }>();
    app.onError((_error, c) => c.text('Internal Server Error', 500));
    for (const route of routes) {
      // Hono has no trust-proxy setting: behind proxies, the key comes from X-Forwarded-For.
      const options = [route.options].flat().map((o) => (settings.trustProxy && o.key === undefined ? { ...o, key: keyBy.forwardedFor() } : o));
      const method = route.method ?? 'GET';
      for (const middleware of options.map(rateLimit)) app.on(method, route.path, middleware);
      app.on(method, route.path, async (c) => {
        if (c.req.query('throw')) throw new Error('the route failed');
        if (c.req.query('hang')) return new Promise<Response>(() => {});
        const used = c.req.query('used');
        if (used) c.header('x-used', used);
        const hold = c.req.query('hold');
        if (hold) await held(hold);
        if (c.req.query('wait')) await new Promise((resolve) => setTimeout(resolve, Number(c.req.query('wait'))));
        return c.json(c.get('rateLimit') ?? { skipped: true }, Number(c.req.query('status') ?? 200) as ContentfulStatusCode);
      });
    }
    return listen(app);
  },
};

adapterContract(hono);

describe('Hono specifics', () => {
  it('types c.get("rateLimit") through Variables', async () => {
    // Per-route middleware types its handler; for app.use, declare the Variables on the app.
    const app = new Hono<{ Variables: RateLimitVariables }>();
    app.use(rateLimit({ limit: 5, windowMs: 60_000 }));
    app.get('/', (c) => {
      const decision: Decision = c.get('rateLimit');
      return c.json({ remaining: decision.remaining });
    });
    app.get('/route', rateLimit({ limit: 2, windowMs: 60_000 }), (c) => {
      const decision: Decision = c.get('rateLimit');
      return c.json({ remaining: decision.remaining });
    });
    const { url, close } = await listen(app);
    try {
      expect(await (await fetch(url)).json()).toEqual({ remaining: 4 });
      expect(await (await fetch(`${url}/route`)).json()).toEqual({ remaining: 1 });
    } finally {
      await close();
    }
  });

  it('reads the client address from getConnInfo on runtimes other than Node', async () => {
    const app = new Hono();
    let address = '203.0.113.1';
    app.use(rateLimit({ limit: 1, windowMs: 60_000, getConnInfo: () => ({ remote: { address } }) }));
    app.get('/', (c) => c.text('ok'));
    // app.request runs the app without a server, as Workers, Bun and Deno do: no socket at all.
    expect((await app.request('/')).status).toBe(200);
    expect((await app.request('/')).status).toBe(429);
    address = '203.0.113.2';
    expect((await app.request('/')).status).toBe(200);
  });

  it('on Node, warns once that X-Forwarded-For arrives while keyBy.ip() reads the socket, naming keyBy.forwardedFor(); elsewhere the runtime decides', async () => {
    const warnings = captureWarnings();
    const warned = async (options: Parameters<typeof rateLimit>[0]) => {
      const app = new Hono();
      app.use(rateLimit(options));
      app.get('/', (c) => c.text('ok'));
      const { url, close } = await listen(app);
      try {
        for (const xff of ['198.51.100.1', '198.51.100.2']) expect((await fetch(url, { headers: { 'x-forwarded-for': xff } })).status).toBe(200);
      } finally {
        await close();
      }
      return warnings.taken();
    };
    try {
      const untrusted = await warned({ limit: 100, windowMs: 60_000 });
      expect(untrusted.map((w) => w.code)).toEqual(['WRN_FG_X_FORWARDED_FOR']);
      expect(untrusted[0]?.message).toContain('Hono has no trust-proxy setting');
      expect(untrusted[0]?.message).toContain('keyBy.forwardedFor({ hops: 1 })');
      expect(await warned({ limit: 100, windowMs: 60_000, key: keyBy.forwardedFor() })).toEqual([]);
      // With getConnInfo the runtime's answer is the client (Workers: cf-connecting-ip): nothing to say.
      expect(await warned({ limit: 100, windowMs: 60_000, getConnInfo: () => ({ remote: { address: '203.0.113.1' } }) })).toEqual([]);
      expect(await warned({ limit: 100, windowMs: 60_000, validate: false })).toEqual([]);
    } finally {
      warnings.stop();
    }
  });

  it('rejects a getConnInfo that is not a function', () => {
    expect(() => rateLimit({ limit: 1, windowMs: 1000, getConnInfo: 'bun' as never })).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
  });

  it('without a socket or getConnInfo, answers 500 with a message that says to pass getConnInfo', async () => {
    const app = new Hono();
    let message = '';
    app.onError((error, c) => {
      message = error.message;
      return c.text('error', 500);
    });
    app.use(rateLimit({ limit: 1, windowMs: 60_000 }));
    app.get('/', (c) => c.text('ok'));
    expect((await app.request('/')).status).toBe(500);
    expect(message).toContain('getConnInfo');
  });

  it('runs without a server (fetch-style), keyed by a header', async () => {
    const app = new Hono();
    app.use(rateLimit({ limit: 1, windowMs: 60_000, key: keyBy.header('x-api-key', { fallback: () => 'anonymous' }) }));
    app.get('/', (c) => c.text('ok'));
    expect((await app.request('/', { headers: { 'x-api-key': 'a' } })).status).toBe(200);
    expect((await app.request('/', { headers: { 'x-api-key': 'a' } })).status).toBe(429);
    expect((await app.request('/')).status).toBe(200);
    expect((await app.request('/')).status).toBe(429);
  });

  it('without a Node response (fetch-style), ends a lease and refunds a failed request when the handler returns', async () => {
    const leases = createLimiter({ algorithm: 'concurrency', limit: 1, windowMs: 60_000 });
    const failures = createLimiter({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000 });
    const app = new Hono();
    let inFlight = -1;
    app.get('/lease', rateLimit({ limiter: leases, key: () => 'k' }), async (c) => {
      inFlight = (await leases.peek('k')).remaining;
      return c.text('ok');
    });
    app.get('/fail', rateLimit({ limiter: failures, skipFailedRequests: true, key: () => 'k' }), (c) => c.text('no', 500));
    expect((await app.request('/lease')).status).toBe(200);
    expect(inFlight).toBe(0); // the lease is held while the handler runs ...
    expect((await app.request('/lease')).status).toBe(200); // ... and ended once it returned
    for (let i = 0; i < 3; i++) expect((await app.request('/fail')).status).toBe(500);
    expect((await failures.peek('k')).remaining).toBe(1);
  });
});
