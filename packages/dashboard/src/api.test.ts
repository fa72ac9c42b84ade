import middie from '@fastify/middie';
import { FloodgateError, RedisRuleSource } from '@floodgate/core';
import { serveHttp, useRedisServer } from '@floodgate/test-support';
import { getRequestListener } from '@hono/node-server';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { dashboard } from './index.js';
import { startApp, type TestApp, token } from './test/app.js';

const redis = useRedisServer();
const apps: TestApp[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

async function start(...args: Parameters<typeof startApp>): Promise<TestApp> {
  const app = await startApp(...args);
  apps.push(app);
  return app;
}

/** A call to the dashboard's API as its page makes it: authorized, from its own origin. */
async function api(app: TestApp, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(`${app.url}/floodgate/api/${path}`, {
    method,
    headers: {
      authorization: token,
      origin: app.url,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, json: text === '' ? undefined : JSON.parse(text) };
}

describe('dashboard() options', () => {
  it('refuses to be created without auth, and names auth: false', async () => {
    const app = await start();
    // @ts-expect-error: auth is required
    expect(() => dashboard({ limiter: app.limiter })).toThrow(/auth: false/);
    expect(() => dashboard({ limiter: app.limiter, auth: 'yes' as never })).toThrow(FloodgateError);
    expect(() => dashboard({ limiter: app.limiter, auth: false, bsaePath: '/x' } as never)).toThrow(/no option 'bsaePath'/);
    expect(() => dashboard({ limiter: app.limiter, auth: false, basePath: 'floodgate/' })).toThrow(/basePath/);
  });
});

describe('access', () => {
  it('answers 401 when auth says no, and lets auth set headers', async () => {
    const app = await start(
      {},
      {
        auth: (req, res) => {
          res.setHeader('www-authenticate', 'Basic realm="floodgate"');
          return Promise.resolve(req.headers.authorization === token);
        },
      },
    );
    const page = await fetch(`${app.url}/floodgate/`);
    expect(page.status).toBe(401);
    expect(page.headers.get('www-authenticate')).toBe('Basic realm="floodgate"');
    expect((await fetch(`${app.url}/floodgate/api/blocked`)).status).toBe(401);
    expect((await api(app, 'GET', 'blocked')).status).toBe(200);
  });

  it('with auth: false, answers loopback addresses only', async () => {
    const local = await start({}, { auth: false });
    expect((await fetch(`${local.url}/floodgate/api/rules`)).status).toBe(200);
    const remote = await start({}, { auth: false }, (app) =>
      app.use((req, _res, next) => {
        Object.defineProperty(req.socket, 'remoteAddress', { value: '203.0.113.9', configurable: true });
        next();
      }),
    );
    const refused = await fetch(`${remote.url}/floodgate/api/rules`);
    expect(refused.status).toBe(403);
    expect(await refused.json()).toEqual({ error: { message: expect.stringMatching(/loopback/) } });
  });

  it('refuses changes that do not come from its own origin (CSRF)', async () => {
    const app = await start();
    const block = { key: 'k', ms: 60_000 };
    expect((await api(app, 'POST', 'block', block, { origin: 'https://evil.example' })).status).toBe(403);
    expect((await api(app, 'POST', 'block', block, { 'sec-fetch-site': 'cross-site' })).status).toBe(403);
    expect((await api(app, 'POST', 'block', block, { 'sec-fetch-site': 'same-site' })).status).toBe(403);
    const bare = await fetch(`${app.url}/floodgate/api/block`, {
      method: 'POST',
      headers: { authorization: token, 'content-type': 'application/json' },
      body: JSON.stringify(block),
    });
    expect(bare.status).toBe(403);
    expect((await app.limiter.blocked()).items).toEqual([]);
    expect((await api(app, 'POST', 'block', block, { 'sec-fetch-site': 'same-origin' })).status).toBe(204);
  });
});

describe('the page', () => {
  it('is served at the mount path with a policy that keeps it to its own origin', async () => {
    const app = await start();
    const redirect = await fetch(`${app.url}/floodgate`, { headers: { authorization: token }, redirect: 'manual' });
    expect(redirect.status).toBe(308);
    expect(redirect.headers.get('location')).toBe('/floodgate/');
    const page = await fetch(`${app.url}/floodgate/`, { headers: { authorization: token } });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.headers.get('content-security-policy')).toMatch(/frame-ancestors 'none'/);
    expect(await page.text()).toMatch(/<script src="dashboard.js"/);
    const script = await fetch(`${app.url}/floodgate/dashboard.js`, { headers: { authorization: token } });
    expect(script.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect((await fetch(`${app.url}/floodgate/nothing`, { headers: { authorization: token } })).status).toBe(404);
    expect((await api(app, 'GET', 'nothing')).status).toBe(404);
    expect((await api(app, 'PUT', 'block')).status).toBe(405);
  });
});

describe('blocks', () => {
  it('blocks a key on the app, lists it, and unblocks it', async () => {
    const app = await start();
    expect(await app.call('203.0.113.9')).toBe(200);
    expect((await api(app, 'POST', 'block', { key: '203.0.113.9', ms: 600_000, reason: 'stuffing' })).status).toBe(204);
    expect(await app.call('203.0.113.9')).toBe(429);
    expect(await app.call('198.51.100.1')).toBe(200);
    const { json } = await api(app, 'GET', 'blocked');
    expect(json).toEqual({
      items: [{ key: '203.0.113.9', scope: 'key', rule: 'per-minute', untilMs: expect.any(Number), reason: 'stuffing', manual: true }],
      cursor: '',
    });
    expect((await api(app, 'POST', 'unblock', { key: '203.0.113.9' })).status).toBe(204);
    expect(await app.call('203.0.113.9')).toBe(200);
    expect((await api(app, 'GET', 'blocked')).json.items).toEqual([]);
  });

  it('blocks and unblocks under the scope of a rule', async () => {
    const app = await start({ rules: [{ name: 'per-ip', scope: 'ip', limit: 3, windowMs: 60_000 }] } as never);
    expect((await api(app, 'POST', 'block', { key: '203.0.113.9', scope: 'ip', rule: 'per-ip', ms: 60_000 })).status).toBe(204);
    expect((await app.limiter.consume({ ip: '203.0.113.9' })).allowed).toBe(false);
    expect((await api(app, 'GET', 'blocked')).json.items).toEqual([expect.objectContaining({ key: '203.0.113.9', scope: 'ip', rule: 'per-ip' })]);
    expect((await api(app, 'POST', 'unblock', { key: '203.0.113.9', scope: 'ip', rule: 'per-ip' })).status).toBe(204);
    expect((await app.limiter.consume({ ip: '203.0.113.9' })).allowed).toBe(true);
  });

  it('pages through blocked keys', async () => {
    const app = await start();
    for (const key of ['a', 'b', 'c']) await app.limiter.block(key, 60_000);
    const first = await api(app, 'GET', 'blocked?count=2');
    expect(first.json.items.map((b: { key: string }) => b.key)).toEqual(['a', 'b']);
    const second = await api(app, 'GET', `blocked?count=2&cursor=${encodeURIComponent(first.json.cursor)}`);
    expect(second.json).toEqual({ items: [expect.objectContaining({ key: 'c' })], cursor: '' });
  });

  it('refuses bad input with 400 and an ERR_FG_* code, blocking nothing', async () => {
    const app = await start();
    const refused = async (path: string, body: unknown, headers?: Record<string, string>) => {
      const { status, json } = await api(app, 'POST', path, body, headers);
      return { status, code: json?.error?.code };
    };
    expect(await refused('block', { key: 'k', ms: 0 })).toEqual({ status: 400, code: 'ERR_FG_OPTION' });
    expect(await refused('block', { key: 'k', ms: '60000' })).toEqual({ status: 400, code: 'ERR_FG_OPTION' });
    expect(await refused('block', { key: '', ms: 1000 })).toEqual({ status: 400, code: 'ERR_FG_KEY' });
    expect(await refused('block', { key: 'k', ms: 1000, until: 5 })).toEqual({ status: 400, code: 'ERR_FG_UNKNOWN_OPTION' });
    expect(await refused('block', { key: 'k', ms: 1000, rule: 'per-hour' })).toEqual({ status: 400, code: 'ERR_FG_OPTION' });
    expect(await refused('block', { key: 'k', ms: 1000, reason: 'x'.repeat(501) })).toEqual({ status: 400, code: 'ERR_FG_OPTION' });
    expect(await refused('block', '{"key": "k",')).toEqual({ status: 400, code: 'ERR_FG_OPTION' });
    expect(await refused('block', '[1]')).toEqual({ status: 400, code: 'ERR_FG_OPTION' });
    expect(await refused('block', 'key=k', { 'content-type': 'application/x-www-form-urlencoded' })).toEqual({ status: 415, code: 'ERR_FG_OPTION' });
    expect(await refused('block', { key: 'k', ms: 1000, reason: 'x'.repeat(20_000) })).toEqual({ status: 413, code: 'ERR_FG_OPTION' });
    expect(await refused('unblock', { key: 42 })).toEqual({ status: 400, code: 'ERR_FG_KEY' });
    expect((await api(app, 'GET', 'blocked?count=-1')).json.error.code).toBe('ERR_FG_OPTION');
    expect((await api(app, 'GET', 'top?n=1000')).json.error.code).toBe('ERR_FG_OPTION');
    expect((await app.limiter.blocked()).items).toEqual([]);
  });

  it('reads a body a body parser before it has read', async () => {
    const express = (await import('express')).default;
    const app = await start({}, {}, (a) => a.use(express.json()));
    expect((await api(app, 'POST', 'block', { key: 'k', ms: 60_000 })).status).toBe(204);
    expect(await app.call('k')).toBe(429);
  });
});

describe('who is limited most', () => {
  it('says analytics are off when the limiter counts no denials', async () => {
    const app = await start();
    expect((await api(app, 'GET', 'top')).json).toEqual({ analytics: false });
  });

  it('lists the keys denied most', async () => {
    const app = await start({ analytics: true } as never);
    for (let i = 0; i < 6; i++) await app.call('noisy');
    for (let i = 0; i < 4; i++) await app.call('quiet');
    const { json } = await api(app, 'GET', 'top?n=5');
    expect(json).toEqual({
      analytics: true,
      sinceMs: expect.any(Number),
      items: [
        { key: 'noisy', scope: 'key', denied: 3, error: 0 },
        { key: 'quiet', scope: 'key', denied: 1, error: 0 },
      ],
    });
  });
});

describe('overrides', () => {
  it('says overrides are off when the limiter has none', async () => {
    const app = await start();
    expect((await api(app, 'GET', 'overrides')).json).toEqual({ overrides: false });
    expect((await api(app, 'POST', 'overrides', { key: 'acme', rules: [{ name: 'per-minute', limit: 10 }] })).json.error.code).toBe('ERR_FG_OPTION');
  });

  it('sets, lists and deletes an override, and the app decides by it', async () => {
    const app = await start({ overrides: true } as never);
    for (let i = 0; i < 3; i++) expect(await app.call('acme')).toBe(200);
    expect(await app.call('acme')).toBe(429);
    expect((await api(app, 'POST', 'overrides', { key: 'acme', rules: [{ name: 'per-minute', limit: 5 }], ttlMs: 3_600_000 })).status).toBe(204);
    expect(await app.call('acme')).toBe(200);
    const { json } = await api(app, 'GET', 'overrides');
    expect(json).toEqual({ overrides: true, items: [{ key: 'acme', rules: [{ name: 'per-minute', limit: 5 }], untilMs: expect.any(Number) }], cursor: '' });
    expect((await api(app, 'DELETE', 'overrides?key=acme')).status).toBe(204);
    expect(await app.call('acme')).toBe(429);
    expect((await api(app, 'GET', 'overrides')).json.items).toEqual([]);
  });

  it('refuses an invalid override with core code, keeping the one in force', async () => {
    const app = await start({ overrides: true } as never);
    await api(app, 'POST', 'overrides', { key: 'acme', rules: [{ name: 'per-minute', limit: 5 }] });
    const bad = await api(app, 'POST', 'overrides', { key: 'acme', rules: [{ name: 'per-minute', limit: -1 }] });
    expect(bad).toEqual({ status: 400, json: { error: { code: 'ERR_FG_LIMIT', message: expect.any(String) } } });
    expect((await api(app, 'POST', 'overrides', { key: 'acme', rules: [{ name: 'per-day', limit: 5 }] })).json.error.code).toBe('ERR_FG_RULES');
    expect((await api(app, 'POST', 'overrides', { key: 'acme', rules: 'limit: 5' })).json.error.code).toBe('ERR_FG_RULES');
    expect((await api(app, 'DELETE', 'overrides')).json.error.code).toBe('ERR_FG_KEY');
    expect((await api(app, 'GET', 'overrides')).json.items).toEqual([{ key: 'acme', rules: [{ name: 'per-minute', limit: 5 }] }]);
  });
});

describe('rules', () => {
  it('shows the rules in force, not editable without a rule source', async () => {
    const app = await start({ rules: [{ name: 'burst', algorithm: 'token-bucket', limit: 10, windowMs: 1_000, burst: 20 }] } as never);
    expect((await api(app, 'GET', 'rules')).json).toEqual({
      rules: [{ name: 'burst', scope: 'key', algorithm: 'token-bucket', limit: 10, windowMs: 1_000, burst: 20 }],
      editable: false,
    });
    const refused = await api(app, 'POST', 'rules', { rules: [{ name: 'burst', limit: 1, windowMs: 1_000 }] });
    expect(refused.json.error.code).toBe('ERR_FG_OPTION');
  });

  it('publishes rules through the RedisRuleSource; a bad list is refused with its code and nothing is pushed', async () => {
    const client = new Redis({ port: redis.server.port, host: '127.0.0.1' });
    const source = new RedisRuleSource({ client, key: 'fg:rules:dashboard', pollMs: 0 });
    try {
      const app = await start({}, { ruleSource: source });
      await source.attach(app.limiter);
      expect((await api(app, 'GET', 'rules')).json.editable).toBe(true);
      const rules = [{ name: 'per-minute', limit: 1, windowMs: 60_000 }];
      expect((await api(app, 'POST', 'rules', { rules })).status).toBe(204);
      await expect.poll(() => app.limiter.rules[0]?.limit, { timeout: 3_000 }).toBe(1);
      expect(await app.call('k')).toBe(200);
      expect(await app.call('k')).toBe(429);

      const bad = await api(app, 'POST', 'rules', { rules: [{ name: 'per-minute', limit: 0, windowMs: 60_000 }] });
      expect(bad).toEqual({ status: 400, json: { error: { code: 'ERR_FG_LIMIT', message: expect.any(String) } } });
      expect((await api(app, 'POST', 'rules', { rules: [] })).json.error.code).toBe('ERR_FG_RULES');
      expect(JSON.parse((await client.get('fg:rules:dashboard')) ?? '')).toEqual(rules);
      expect(app.limiter.rules[0]?.limit).toBe(1);
    } finally {
      source.close();
      client.disconnect();
    }
  });
});

describe('decisions per second', () => {
  it("counts the app's decisions by rule", async () => {
    const app = await start();
    for (let i = 0; i < 5; i++) await app.call('k');
    const { json } = await api(app, 'GET', 'rates');
    expect(json).toEqual({ perSecond: expect.any(Array), total: [{ rule: 'per-minute', allowed: 3, limited: 2 }], sinceMs: expect.any(Number) });
  });
});

describe('mounting', () => {
  it('serves a plain node:http server under basePath, and answers 404 elsewhere', async () => {
    const app = await start();
    const handler = dashboard({ limiter: app.limiter, auth: () => true, basePath: '/admin/floodgate' });
    const running = await serveHttp((req, res) => handler(req, res));
    try {
      expect((await fetch(`${running.url}/admin/floodgate/`)).status).toBe(200);
      const redirect = await fetch(`${running.url}/admin/floodgate`, { redirect: 'manual' });
      expect(redirect.headers.get('location')).toBe('/admin/floodgate/');
      expect((await fetch(`${running.url}/elsewhere`)).status).toBe(404);
      const block = await fetch(`${running.url}/admin/floodgate/api/block`, {
        method: 'POST',
        headers: { origin: running.url, 'content-type': 'application/json' },
        body: JSON.stringify({ key: 'k', ms: 60_000 }),
      });
      expect(block.status).toBe(204);
      expect(await app.call('k')).toBe(429);
    } finally {
      handler.close();
      await running.close();
    }
  });

  /** The page, then a block through the API, at `${url}/floodgate`: the app then denies the key. */
  async function blocksThrough(app: TestApp, url: string): Promise<void> {
    expect((await fetch(`${url}/floodgate/`)).status).toBe(200);
    const block = await fetch(`${url}/floodgate/api/block`, {
      method: 'POST',
      headers: { origin: url, 'content-type': 'application/json' },
      body: JSON.stringify({ key: 'k', ms: 60_000 }),
    });
    expect(block.status).toBe(204);
    expect(await app.call('k')).toBe(429);
  }

  it('mounts in Fastify through @fastify/middie', async () => {
    const app = await start();
    const handler = dashboard({ limiter: app.limiter, auth: () => true });
    const fastify = Fastify();
    await fastify.register(middie);
    fastify.use('/floodgate', handler);
    fastify.get('/', async () => 'home');
    const url = await fastify.listen({ port: 0, host: '127.0.0.1' });
    try {
      await blocksThrough(app, url);
      expect(await (await fetch(`${url}/`)).text()).toBe('home');
    } finally {
      handler.close();
      await fastify.close();
    }
  });

  it("mounts beside Hono on @hono/node-server's listener", async () => {
    const app = await start();
    const handler = dashboard({ limiter: app.limiter, auth: () => true, basePath: '/floodgate' });
    const hono = getRequestListener(new Hono().get('/', (c) => c.text('home')).fetch);
    const running = await serveHttp((req, res) => handler(req, res, () => hono(req, res)));
    try {
      await blocksThrough(app, running.url);
      expect(await (await fetch(`${running.url}/`)).text()).toBe('home');
    } finally {
      handler.close();
      await running.close();
    }
  });
});
