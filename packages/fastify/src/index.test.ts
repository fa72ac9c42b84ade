import { Readable } from 'node:stream';
import { createLimiter, type Decision, MemoryStore } from '@floodgate/core';
import { type AdapterUnderTest, adapterContract, captureWarnings, held, type Options, type Route, type Running } from '@floodgate/test-support';
import Fastify5, { type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import Fastify4 from 'fastify4';
import { describe, expect, it } from 'vitest';
import { type FastifyRouteRateLimitOptions, keyBy, rateLimit } from './index.js';

type Fastify = typeof Fastify5;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Listens on a free loopback port; close() also ends the connections of requests still held. */
async function listen(app: FastifyInstance): Promise<Running> {
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  return { url, close: () => app.close() };
}

const newApp = (Fastify: Fastify, options: FastifyServerOptions = {}) => Fastify({ forceCloseConnections: true, ...options });

/** The contract's route: answers with the status in `status` and the decision; `throw`, `hang`, `wait`, `hold` as the suite needs. */
async function answer(request: FastifyRequest, reply: FastifyReply) {
  const query = request.query as Record<string, string | undefined>;
  if (query.throw) throw new Error('the route failed');
  if (query.hang) return new Promise(() => {});
  if (query.used) reply.header('x-used', query.used);
  if (query.hold) await held(query.hold);
  if (query.wait) await sleep(Number(query.wait));
  reply.code(Number(query.status ?? 200));
  return request.rateLimit ?? { skipped: true };
}

/**
 * The adapter under the contract suite. `perContext`: each route in a context of its own with the
 * plugin registered there (`global: true`); otherwise one registration with `global: false` and each
 * route's options in its `config: { rateLimit }`.
 */
function fastifyUnderTest(name: string, Fastify: Fastify, mount: 'per context' | 'route config'): AdapterUnderTest {
  return {
    name: `${name} (${mount})`,
    // The plugin as Fastify calls it, on a fresh instance: it hands bad options to done() before it returns.
    rateLimit: (options: Options) =>
      rateLimit(Fastify(), options, (error) => {
        if (error) throw error;
      }),
    keyBy,
    createLimiter,
    header: ([request], header) => (request as FastifyRequest).headers[header] as string | undefined,
    teapot: (_request: FastifyRequest, reply: FastifyReply, decision: Decision) =>
      reply.code(418).send({ rule: decision.rule, retryAfter: reply.getHeader('retry-after') }),
    seesAbandonedRequests: true,
    reported: ([, reply]) => (reply as FastifyReply).getHeader('x-used') as string | undefined,
    async start(routes: Route[], settings = {}) {
      const app = newApp(Fastify, { trustProxy: settings.trustProxy === true ? 'loopback' : false });
      if (mount === 'route config') {
        await app.register(rateLimit, { global: false });
        for (const route of routes) {
          const [options, ...more] = [route.options].flat();
          if (more.length === 0) {
            app.route({ method: route.method ?? 'GET', url: route.path, config: { rateLimit: options }, handler: answer });
            continue;
          }
          // A route has one config.rateLimit (over a plugin without limits here): several stacked limits are plugins registered in a context.
          await app.register(async (child) => {
            for (const each of [route.options].flat()) await child.register(rateLimit, each);
            child.route({ method: route.method ?? 'GET', url: route.path, handler: answer });
          });
        }
      } else {
        for (const route of routes) {
          await app.register(async (child) => {
            for (const options of [route.options].flat()) await child.register(rateLimit, options);
            child.route({ method: route.method ?? 'GET', url: route.path, handler: answer });
          });
        }
      }
      return listen(app);
    },
  };
}

const frameworks: [string, Fastify][] = [
  ['Fastify 4', Fastify4 as unknown as Fastify],
  ['Fastify 5', Fastify5],
];

for (const [name, Fastify] of frameworks) {
  adapterContract(fastifyUnderTest(name, Fastify, 'per context'));
  adapterContract(fastifyUnderTest(name, Fastify, 'route config'));
}

/** Starts `app`, runs `body` with a fetch bound to it, always closes. */
async function serve(app: FastifyInstance, body: (get: (path: string, init?: RequestInit) => Promise<Response>) => Promise<void>) {
  const running = await listen(app);
  try {
    await body((path, init) => fetch(running.url + path, init));
  } finally {
    await running.close();
  }
}

async function statuses(get: (path: string, init?: RequestInit) => Promise<Response>, path: string, n: number, init?: RequestInit) {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const res = await get(path, init);
    await res.arrayBuffer();
    out.push(res.status);
  }
  return out;
}

// The clock stands still at the start of a window: no window ends while a test runs, and Reset/t= are exact.
const minute = { algorithm: 'fixed-window', windowMs: 60_000, now: () => Date.UTC(2026, 0, 1) } as const;
const ok = () => ({ ok: true });

describe.each(frameworks)('%s specifics', (_, Fastify) => {
  it('with global: false and no limit, the plugin options are defaults for the routes that set one (a store, a window), as on NestJS', async () => {
    const store = new MemoryStore();
    const app = newApp(Fastify);
    await app.register(rateLimit, { global: false, store, windowMs: 60_000, algorithm: 'fixed-window', headers: 'draft-8' });
    app.get('/login', { config: { rateLimit: { limit: 2 } } }, ok);
    app.get('/free', ok);
    await serve(app, async (get) => {
      expect(await statuses(get, '/login', 3)).toEqual([200, 200, 429]);
      expect((await get('/login')).headers.get('ratelimit-policy')).toBe('"default";q=2;w=60');
      expect(await statuses(get, '/free', 3)).toEqual([200, 200, 200]);
    });
    expect(store.size('fg:GET /login:', 'default')).toBe(1); // the plugin's store, in the route's own namespace
    store.close();
  });

  it('with global: false limits only routes with config.rateLimit: they share the plugin budget, and spend it too with limits of their own unless stack: false', async () => {
    const app = newApp(Fastify);
    await app.register(rateLimit, { global: false, ...minute, limit: 2, headers: 'draft-8' });
    app.get('/free', (request) => ({ decision: request.rateLimit ?? null }));
    app.get('/a', { config: { rateLimit: {} } }, ok);
    app.get('/b', { config: { rateLimit: { cost: 2 } } }, ok);
    app.get('/stacked', { config: { rateLimit: { limit: 5 } } }, ok);
    app.get('/own', { config: { rateLimit: { limit: 1, stack: false } } }, ok); // windowMs, algorithm and headers from the plugin
    app.get('/rules', { config: { rateLimit: { rules: [{ name: 'burst', limit: 3, windowMs: 1000 }], stack: false } } }, ok);
    await serve(app, async (get) => {
      const free = await get('/free');
      expect(await free.json()).toEqual({ decision: null });
      expect(free.headers.get('ratelimit')).toBeNull();
      expect(await statuses(get, '/free', 3)).toEqual([200, 200, 200]);
      expect((await get('/a')).headers.get('ratelimit')).toBe('"default";r=1;t=60');
      expect(await statuses(get, '/b', 1)).toEqual([429]); // 2 units, 1 left in the shared budget
      expect(await statuses(get, '/a', 2)).toEqual([200, 429]);
      const stacked = await get('/stacked'); // the plugin's budget is spent: its limit answers, the route's never runs
      expect([stacked.status, stacked.headers.get('ratelimit-policy')]).toEqual([429, '"default";q=2;w=60']);
      const own = await get('/own');
      expect([own.status, own.headers.get('ratelimit-policy')]).toEqual([200, '"default";q=1;w=60']);
      expect(await statuses(get, '/own', 1)).toEqual([429]);
      expect((await get('/rules')).headers.get('ratelimit-policy')).toBe('"burst";q=3;w=1');
    });
  });

  it('exempts routes with config: { rateLimit: false } and limits the rest of the context, not-found answers included', async () => {
    const app = newApp(Fastify);
    await app.register(rateLimit, { ...minute, limit: 2 });
    app.get('/health', { config: { rateLimit: false } }, ok);
    app.get('/api', ok);
    await serve(app, async (get) => {
      const health = await get('/health');
      expect(health.headers.get('x-ratelimit-limit')).toBeNull();
      expect(await statuses(get, '/health', 3)).toEqual([200, 200, 200]);
      expect(await statuses(get, '/no-such-page', 2)).toEqual([404, 404]); // guessing URLs spends the budget too
      expect(await statuses(get, '/api', 1)).toEqual([429]);
      expect(await statuses(get, '/health', 1)).toEqual([200]);
    });
  });

  it('respects encapsulation: registered in one context, it limits that context and its children, not siblings or the parent', async () => {
    const app = newApp(Fastify);
    app.get('/root', ok);
    await app.register(
      async (limited) => {
        await limited.register(rateLimit, { ...minute, limit: 1 });
        limited.get('/x', ok);
        await limited.register(async (grandchild) => {
          grandchild.get('/y', ok);
        });
      },
      { prefix: '/limited' },
    );
    await app.register(
      async (sibling) => {
        sibling.get('/x', ok);
      },
      { prefix: '/sibling' },
    );
    await serve(app, async (get) => {
      expect(await statuses(get, '/limited/x', 2)).toEqual([200, 429]);
      expect(await statuses(get, '/limited/y', 1)).toEqual([429]); // one budget for the context
      expect(await statuses(get, '/sibling/x', 3)).toEqual([200, 200, 200]);
      expect(await statuses(get, '/root', 3)).toEqual([200, 200, 200]);
    });
  });

  it('warns once about X-Forwarded-For while no proxy is trusted, once about trustProxy: true, never with proxies named', async () => {
    const warnings = captureWarnings();
    /** What is warned while a plugin in a child context serves three X-Forwarded-For requests under this trustProxy. */
    const warned = async (trustProxy: FastifyServerOptions['trustProxy'] | 1, validate?: boolean) => {
      const app = newApp(Fastify, { trustProxy: trustProxy as FastifyServerOptions['trustProxy'] });
      await app.register(async (child) => {
        await child.register(rateLimit, { ...minute, limit: 100, validate });
        child.get('/', ok);
      });
      await serve(app, async (get) => {
        for (const xff of ['198.51.100.1', '198.51.100.2', '203.0.113.9, 198.51.100.3']) {
          expect(await statuses(get, '/', 1, { headers: { 'x-forwarded-for': xff } })).toEqual([200]);
        }
      });
      return warnings.taken();
    };
    try {
      const untrusted = await warned(false);
      expect(untrusted.map((w) => w.code)).toEqual(['WRN_FG_X_FORWARDED_FOR']);
      expect(untrusted[0]?.message).toContain('Fastify trusts no proxy (its trustProxy option is off)');
      const everyone = await warned(true);
      expect(everyone.map((w) => w.code)).toEqual(['WRN_FG_TRUST_PROXY']);
      expect(everyone[0]?.message).toContain("name the proxies in front of the app, Fastify({ trustProxy: '127.0.0.1' })");
      expect(await warned('127.0.0.1')).toEqual([]);
      expect(await warned(['127.0.0.0/8', '10.0.0.0/8'])).toEqual([]);
      // A number of proxies: trusted by Fastify 4, ignored by Fastify 5, which then sees only the proxy.
      const counted = await warned(1);
      if (Fastify === Fastify5) {
        expect(counted.map((w) => w.message)).toEqual([expect.stringContaining('Fastify 5 trusts no proxy when trustProxy is a number')]);
      } else expect(counted).toEqual([]);
      expect(await warned(false, false)).toEqual([]);
      expect(await warned(true, false)).toEqual([]);
    } finally {
      warnings.stop();
    }
  });

  it("follows Fastify's trustProxy: a trusted proxy's X-Forwarded-For is the client address", async () => {
    const app = newApp(Fastify, { trustProxy: '127.0.0.1' });
    await app.register(rateLimit, { ...minute, limit: 1 });
    app.get('/', (request) => ({ ip: request.ip }));
    await serve(app, async (get) => {
      const xff = (address: string) => ({ headers: { 'x-forwarded-for': address } });
      expect(await (await get('/', xff('198.51.100.1'))).json()).toEqual({ ip: '198.51.100.1' });
      expect(await statuses(get, '/', 1, xff('198.51.100.2'))).toEqual([200]);
      expect(await statuses(get, '/', 1, xff('198.51.100.1'))).toEqual([429]);
    });
  });

  it('types request.rateLimit as a Decision and config.rateLimit as the route options', async () => {
    const app = newApp(Fastify);
    await app.register(rateLimit, { ...minute, limit: 3 });
    const strict: FastifyRouteRateLimitOptions = { limit: 1, hook: 'preHandler' };
    // @ts-expect-error: Floodgate calls it limit, and config.rateLimit is typed
    const typo: FastifyRouteRateLimitOptions = { max: 1 };
    expect(typo).toEqual({ max: 1 });
    app.get('/', (request) => {
      const decision: Decision | undefined = request.rateLimit;
      return { remaining: decision?.remaining, rules: decision?.rules.length };
    });
    app.get('/strict', { config: { rateLimit: strict } }, (request) => ({ limit: request.rateLimit?.limit }));
    await serve(app, async (get) => {
      expect(await (await get('/')).json()).toEqual({ remaining: 2, rules: 1 });
      expect(await (await get('/strict')).json()).toEqual({ limit: 1 });
    });
  });

  it('rejects bad options with ERR_FG_* codes when the plugin is registered, and bad route options when the route is declared', async () => {
    const code = (c: string) => expect.objectContaining({ name: 'FloodgateError', code: c });
    const registering = async (options: Options) => newApp(Fastify).register(rateLimit, options);
    await expect(registering({ max: 5, windowMs: 1000 })).rejects.toThrow(code('ERR_FG_UNKNOWN_OPTION'));
    await expect(registering({ limit: 0, windowMs: 1000 })).rejects.toThrow(code('ERR_FG_LIMIT'));
    await expect(registering({ limit: 5, windowMs: 1000, hook: 'onSend' })).rejects.toThrow(code('ERR_FG_OPTION'));
    await expect(registering({ limit: 5, windowMs: 1000, global: 'yes' })).rejects.toThrow(code('ERR_FG_OPTION'));
    await expect(registering({ global: true })).rejects.toThrow(code('ERR_FG_RULES')); // limiting every route takes a limit
    await expect(registering({ limit: 5, windowMs: 1000, stack: 'yes' })).rejects.toThrow(/^stack must be true or false, got "yes"/);

    const app = newApp(Fastify);
    await app.register(rateLimit, { global: false, ...minute, limit: 5 });
    const declare = (rateLimitConfig: unknown) => () => app.get('/x', { config: { rateLimit: rateLimitConfig as false } }, ok);
    expect(declare({ limit: -1 })).toThrow(code('ERR_FG_LIMIT'));
    expect(declare({ global: false })).toThrow(code('ERR_FG_UNKNOWN_OPTION'));
    expect(declare({ hook: 'onResponse' })).toThrow(/GET \/x: config\.rateLimit\.hook must be/);
    expect(declare('strict')).toThrow(code('ERR_FG_OPTION'));
    expect(declare({ limit: 1, stack: 'no' })).toThrow(/GET \/x: config\.rateLimit\.stack must be true or false/);
    // Nothing of its own to replace the plugin's limit with: an exemption is config: { rateLimit: false }.
    expect(declare({ cost: 2, stack: false })).toThrow(code('ERR_FG_OPTION'));
    expect(declare({ cost: 2, stack: false })).toThrow(/stack: false but no limit of its own .* config: \{ rateLimit: false \}/);
    await app.close();
    const unlimited = newApp(Fastify);
    await unlimited.register(rateLimit, { global: false, headers: 'draft-8' });
    expect(() => unlimited.get('/y', { config: { rateLimit: { cost: 2 } } }, ok)).toThrow(
      /GET \/y: config\.rateLimit sets no limit and neither does the plugin/,
    );
    await unlimited.close();
  });

  it("passes request-time errors to Fastify's error handler as a FloodgateError, and Fastify answers 500", async () => {
    const errors: string[] = [];
    const app = newApp(Fastify);
    app.setErrorHandler((error: Error & { code?: string }, _request, reply) => {
      errors.push(`${error.name} ${error.code}: ${error.message}`);
      return reply.code(500).send('handled');
    });
    await app.register(rateLimit, { ...minute, limit: 10, key: () => '' });
    app.get('/', ok);
    const plain = newApp(Fastify);
    await plain.register(rateLimit, { ...minute, limit: 10, cost: () => 0 });
    plain.get('/', ok);
    await serve(app, async (get) => {
      const res = await get('/');
      expect([res.status, await res.text()]).toEqual([500, 'handled']);
      expect(errors).toEqual([
        'FloodgateError ERR_FG_KEY: The key function returned ""; it must return a non-empty string (or an object of keys by scope). [ERR_FG_KEY]',
      ]);
    });
    await serve(plain, async (get) => {
      const res = await get('/');
      expect(res.status).toBe(500);
      expect(await res.json()).toMatchObject({
        statusCode: 500,
        code: 'ERR_FG_COST',
        message: expect.stringContaining('cost must be a positive integer, got 0'),
      });
    });
  });

  it('answers errors the same whether the limit decided at once or waited: a key that rejects, a handler that throws or rejects', async () => {
    const app = newApp(Fastify);
    app.setErrorHandler((error: Error & { code?: string }, _request, reply) => reply.code(500).send(`${error.code ?? error.name}: ${error.message}`));
    await app.register(rateLimit, { ...minute, limit: 10, key: async () => '', validate: false });
    app.get('/', ok);
    const denials = newApp(Fastify);
    denials.setErrorHandler((error: Error, _request, reply) => reply.code(500).send(`handled: ${error.message}`));
    await denials.register(async (scope) => {
      await scope.register(rateLimit, {
        ...minute,
        limit: 1,
        handler: () => {
          throw new Error('sync handler');
        },
      });
      scope.get('/sync', ok);
    });
    await denials.register(async (scope) => {
      await scope.register(rateLimit, {
        ...minute,
        limit: 1,
        handler: async () => {
          throw new Error('async handler');
        },
      });
      scope.get('/async', ok);
    });
    await serve(app, async (get) => {
      const res = await get('/');
      expect([res.status, await res.text()]).toEqual([500, expect.stringContaining('ERR_FG_KEY: The key function returned ""')]);
      expect((await get('/')).status).toBe(500); // and keeps serving
    });
    await serve(denials, async (get) => {
      for (const path of ['/sync', '/async']) {
        expect(await statuses(get, path, 1)).toEqual([200]);
        const denied = await get(path);
        expect([denied.status, await denied.text()]).toEqual([500, `handled: ${path.slice(1)} handler`]);
      }
    });
  });

  it('never runs the route handler of a denied request; a handler may return the denial payload (status already set)', async () => {
    let handled = 0;
    const app = newApp(Fastify);
    await app.register(rateLimit, { ...minute, limit: 1, handler: (request) => ({ denied: request.url }) });
    app.get('/', () => {
      handled++;
      return { ok: true };
    });
    await serve(app, async (get) => {
      expect(await statuses(get, '/', 1)).toEqual([200]);
      const denied = await get('/');
      expect([denied.status, await denied.json(), denied.headers.get('retry-after')]).toEqual([429, { denied: '/' }, '60']);
      expect(await statuses(get, '/', 2)).toEqual([429, 429]);
      expect(handled).toBe(1);
    });
  });

  it('limits in preHandler or preValidation with hook, for keys that read the body; preValidation also counts bodies the schema rejects', async () => {
    const handled: string[] = [];
    const app = newApp(Fastify);
    const phone = (request: FastifyRequest) => `phone:${(request.body as { phone?: string } | undefined)?.phone}`;
    await app.register(rateLimit, { ...minute, limit: 1, key: phone, hook: 'preHandler' });
    const schema = { body: { type: 'object', required: ['phone'], properties: { phone: { type: 'string', pattern: '^\\+[0-9]+$' } } } };
    const send = (request: FastifyRequest) => {
      handled.push(phone(request));
      return { sent: true };
    };
    app.post('/sms', { schema }, send);
    app.post('/strict-sms', { schema, config: { rateLimit: { hook: 'preValidation', key: phone } } }, send);
    app.post('/early', { config: { rateLimit: { hook: 'onRequest' } } }, send);
    await serve(app, async (get) => {
      const post = (phoneNumber: string) => ({
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ phone: phoneNumber }),
      });
      expect(await statuses(get, '/sms', 2, post('+15550100'))).toEqual([200, 429]);
      expect(await statuses(get, '/sms', 1, post('+15550199'))).toEqual([200]);
      expect(await statuses(get, '/sms', 2, post('not a number'))).toEqual([400, 400]); // preHandler: after validation
      expect(handled).toEqual(['phone:+15550100', 'phone:+15550199']);
      // The plugin budget is per phone number; preValidation runs before the schema: an invalid body counts.
      expect(await statuses(get, '/strict-sms', 2, post('bogus'))).toEqual([400, 429]);
      // In onRequest the body is not parsed yet: a key that reads it sees none, so every number shares one key.
      expect(await statuses(get, '/early', 1, post('+15550142'))).toEqual([200]);
      expect(await statuses(get, '/early', 1, post('+15550143'))).toEqual([429]);
      expect(handled).toEqual(['phone:+15550100', 'phone:+15550199', 'phone:+15550142']);
    });
  });

  it("runs a route's limit after the route's own hooks of that stage, so that a key can read what they set", async () => {
    const app = newApp(Fastify);
    app.decorateRequest('user', '');
    await app.register(rateLimit, { global: false, ...minute, limit: 1, key: (request) => (request as FastifyRequest & { user: string }).user });
    app.get(
      '/me',
      {
        onRequest: async (request) => {
          (request as FastifyRequest & { user: string }).user = String(request.headers['x-user']);
        },
        config: { rateLimit: {} },
      },
      ok,
    );
    await serve(app, async (get) => {
      expect(await statuses(get, '/me', 2, { headers: { 'x-user': 'ada' } })).toEqual([200, 429]);
      expect(await statuses(get, '/me', 1, { headers: { 'x-user': 'grace' } })).toEqual([200]);
    });
  });

  it('keeps the counts of routes with limits of their own apart on a store the plugin shares', async () => {
    const app = newApp(Fastify);
    await app.register(rateLimit, { ...minute, limit: 10, store: new MemoryStore() });
    app.get('/a', ok);
    app.get('/b', { config: { rateLimit: { limit: 2 } } }, ok);
    app.get('/c', { config: { rateLimit: { limit: 2 } } }, ok);
    await serve(app, async (get) => {
      expect(await statuses(get, '/a', 1)).toEqual([200]);
      expect(await statuses(get, '/b', 3)).toEqual([200, 200, 429]);
      expect(await statuses(get, '/c', 3)).toEqual([200, 200, 429]); // not the plugin's count of this IP (4), not /b's
      expect((await get('/a')).headers.get('x-ratelimit-remaining')).toBe('2'); // every request spent the plugin's budget
    });
  });

  it("reads a route option set to undefined as not given: the plugin's windowMs and limit still apply", async () => {
    // Route options built from optional fields, as in { limit: tier.limit, rules: tier.rules } for a tier without rules.
    const tier: { limit?: number; rules?: FastifyRouteRateLimitOptions['rules'] } = { limit: 1 };
    const app = newApp(Fastify);
    await app.register(rateLimit, { ...minute, limit: 5 });
    app.get('/tier', { config: { rateLimit: { limit: tier.limit, rules: tier.rules } } }, ok);
    app.get('/none', { config: { rateLimit: { rules: tier.rules } } }, ok);
    await serve(app, async (get) => {
      expect(await statuses(get, '/tier', 2)).toEqual([200, 429]);
      expect(await statuses(get, '/none', 4)).toEqual([200, 200, 200, 429]); // the plugin's 5, of which /tier spent 2
    });
  });

  it("keeps the plugin's values for route options set to undefined: a route's prefix: undefined still counts in the route's own namespace", async () => {
    const own: { prefix?: string; message?: string } = {};
    const app = newApp(Fastify);
    await app.register(rateLimit, { ...minute, limit: 3, message: 'plugin says slow down' });
    app.get('/own', { config: { rateLimit: { limit: 1, prefix: own.prefix, message: own.message } } }, ok);
    await serve(app, async (get) => {
      expect(await statuses(get, '/own', 2)).toEqual([200, 429]);
      expect(await (await get('/own')).text()).toContain('plugin says slow down');
    });
  });

  it('stacks registrations: per client IP and per user on the same routes, each limit applies', async () => {
    const app = newApp(Fastify);
    await app.register(rateLimit, { ...minute, limit: 3 });
    await app.register(rateLimit, { ...minute, limit: 1, key: keyBy.header('x-user-id') });
    app.get('/', ok);
    await serve(app, async (get) => {
      const as = (user: string) => ({ headers: { 'x-user-id': user } });
      expect(await statuses(get, '/', 2, as('ada'))).toEqual([200, 429]); // the per-user limit
      expect(await statuses(get, '/', 1, as('grace'))).toEqual([200]);
      expect(await statuses(get, '/', 1, as('linus'))).toEqual([429]); // the per-IP limit: three requests so far
    });
  });

  it("spends the plugin's budget on a route with limits of its own too: 300 guesses from one IP under new x-user-ids reach the login handler 100 times (issue #29.5)", async () => {
    const perIp = createLimiter({ ...minute, limit: 100 });
    let guesses = 0;
    const app = newApp(Fastify);
    await app.register(rateLimit, { limiter: perIp });
    // The README's login before issue #29.5: keyed by a header the client picks before it has logged in.
    app.post('/login', { config: { rateLimit: { ...minute, limit: 5, key: keyBy.header('x-user-id') } } }, async (_request, reply) => {
      guesses++;
      return reply.code(401).send({ ok: false });
    });
    await serve(app, async (get) => {
      const answers: number[] = [];
      for (let i = 0; i < 300; i++) answers.push(...(await statuses(get, '/login', 1, { method: 'POST', headers: { 'x-user-id': `guess-${i}` } })));
      expect(guesses).toBe(100);
      expect(answers).toEqual([...Array(100).fill(401), ...Array(200).fill(429)]);
    });
    expect((await perIp.peek('127.0.0.1')).remaining).toBe(0);
  });

  it("checks the plugin's limit, then the route's: both must pass, a request the route refuses has spent the plugin's unit, the headers report both", async () => {
    const perIp = createLimiter({ ...minute, limit: 10 });
    const app = newApp(Fastify);
    await app.register(rateLimit, { limiter: perIp, headers: 'draft-8' });
    app.post('/otp', { config: { rateLimit: { ...minute, limit: 2, key: () => 'otp' } } }, (request) => ({ limit: request.rateLimit?.limit }));
    await serve(app, async (get) => {
      const first = await get('/otp', { method: 'POST' });
      expect(await first.json()).toEqual({ limit: 2 }); // request.rateLimit: the route's decision, the last one made
      expect(first.headers.get('ratelimit-policy')).toBe('"default";q=10;w=60, "2:default";q=2;w=60');
      expect(first.headers.get('ratelimit')).toBe('"default";r=9;t=60, "2:default";r=1;t=60');
      expect(await statuses(get, '/otp', 3, { method: 'POST' })).toEqual([200, 429, 429]);
    });
    expect((await perIp.peek('127.0.0.1')).remaining).toBe(6);
  });

  it("replaces the plugin's limit with the route's own under stack: false, as @fastify/rate-limit does; the plugin's stack is the default of its routes", async () => {
    const perRoute = newApp(Fastify);
    await perRoute.register(rateLimit, { ...minute, limit: 1 });
    perRoute.get('/a', ok);
    perRoute.get('/apart', { config: { rateLimit: { limit: 3, stack: false } } }, ok);
    perRoute.get('/both', { config: { rateLimit: { limit: 3 } } }, ok);
    const plugin = newApp(Fastify);
    await plugin.register(rateLimit, { ...minute, limit: 1, stack: false });
    plugin.get('/a', ok);
    plugin.get('/apart', { config: { rateLimit: { limit: 3 } } }, ok);
    plugin.get('/both', { config: { rateLimit: { limit: 3, stack: true } } }, ok);
    for (const app of [perRoute, plugin]) {
      await serve(app, async (get) => {
        expect(await statuses(get, '/a', 2)).toEqual([200, 429]);
        expect(await statuses(get, '/apart', 4)).toEqual([200, 200, 200, 429]); // a budget of its own, and only that
        expect(await statuses(get, '/both', 1)).toEqual([429]); // the plugin's budget is spent
      });
    }
  });

  it("limits the README's login per client IP and per account name from the body, over the plugin's limit: new names or new addresses do not buy more guesses", async () => {
    let guesses = 0;
    const perIp = createLimiter({ ...minute, limit: 100 });
    const app = newApp(Fastify, { trustProxy: '127.0.0.1' }); // each X-Forwarded-For address is a client of its own
    await app.register(rateLimit, { limiter: perIp });
    const schema = {
      body: { type: 'object', required: ['account', 'password'], properties: { account: { type: 'string', minLength: 1 }, password: { type: 'string' } } },
    };
    const login: FastifyRouteRateLimitOptions = {
      hook: 'preHandler', // the key reads the body: after parsing and validation
      now: minute.now,
      rules: [
        { name: 'login-ip', scope: 'ip', algorithm: 'sliding-log', limit: 20, windowMs: 15 * 60_000 },
        { name: 'login-account', scope: 'account', algorithm: 'sliding-log', limit: 5, windowMs: 15 * 60_000 },
      ],
      key: { ip: keyBy.ip(), account: (request) => (request.body as { account: string }).account.toLowerCase() },
      skipSuccessfulRequests: true,
    };
    app.post('/login', { schema, config: { rateLimit: login } }, async (request, reply) => {
      guesses++;
      const { password } = request.body as { password: string };
      return password === 'right' ? { ok: true } : reply.code(401).send({ ok: false });
    });
    await serve(app, async (get) => {
      const post = (ip: string, account: string, password = 'wrong') => ({
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': ip },
        body: JSON.stringify({ account, password }),
      });
      const answers = async (n: number, init: (i: number) => RequestInit) => {
        const out: number[] = [];
        for (let i = 0; i < n; i++) out.push(...(await statuses(get, '/login', 1, init(i))));
        return out;
      };
      // One address, a new account name each time: stopped by the per-IP login rule.
      expect(await answers(30, (i) => post('198.51.100.1', `guess-${i}`))).toEqual([...Array(20).fill(401), ...Array(10).fill(429)]);
      // One account, a new address each time: stopped by the per-account rule, whatever the case of the name.
      expect(await answers(30, (i) => post(`203.0.113.${i + 1}`, i % 2 ? 'ADA' : 'ada'))).toEqual([...Array(5).fill(401), ...Array(25).fill(429)]);
      expect(guesses).toBe(25);
      expect(await answers(1, () => post('192.0.2.1', 'grace', 'right'))).toEqual([200]);
    });
    expect((await perIp.peek('198.51.100.1')).remaining).toBe(70); // every try spent the plugin's budget too
  });

  it('settles each stacked limit: both give back the units of a failed request', async () => {
    const first = createLimiter({ ...minute, limit: 1 });
    const second = createLimiter({ ...minute, limit: 1 });
    const app = newApp(Fastify);
    await app.register(rateLimit, { limiter: first, key: () => 'k', skipFailedRequests: true });
    await app.register(rateLimit, { limiter: second, key: () => 'k', skipFailedRequests: true });
    app.get('/', () => {
      throw new Error('the route failed');
    });
    await serve(app, async (get) => {
      expect(await statuses(get, '/', 1)).toEqual([500]);
      const deadline = Date.now() + 3000;
      const refunded = async () => (await first.peek('k')).remaining === 1 && (await second.peek('k')).remaining === 1;
      while (!(await refunded()) && Date.now() < deadline) await sleep(5);
      expect(await refunded()).toBe(true);
    });
  });

  it('gives a GET route and its automatic HEAD route one budget', async () => {
    const app = newApp(Fastify);
    await app.register(rateLimit, { global: false });
    app.get('/report', { config: { rateLimit: { ...minute, limit: 2 } } }, ok);
    await serve(app, async (get) => {
      expect(await statuses(get, '/report', 1, { method: 'HEAD' })).toEqual([200]);
      expect(await statuses(get, '/report', 2)).toEqual([200, 429]);
      expect(await statuses(get, '/report', 1, { method: 'HEAD' })).toEqual([429]);
    });
  });

  it('limits routes declared before the plugin was loaded, and fails loudly for their own config it never saw', async () => {
    const app = newApp(Fastify);
    app.register(rateLimit, { ...minute, limit: 1 }); // not awaited: the routes below are declared first
    app.get('/early', ok);
    app.get('/early-own', { config: { rateLimit: { limit: 5 } } }, ok);
    await serve(app, async (get) => {
      expect(await statuses(get, '/early', 2)).toEqual([200, 429]);
      const own = await get('/early-own');
      expect(own.status).toBe(500);
      expect(await own.json()).toMatchObject({ code: 'ERR_FG_OPTION', message: expect.stringContaining('declared before @floodgate/fastify was loaded') });
    });
  });

  it('ends the lease of a streamed response when the client leaves it: the handler was done when it sent the stream', async () => {
    const limiter = createLimiter({ algorithm: 'concurrency', limit: 1, windowMs: 60_000 });
    const app = newApp(Fastify);
    await app.register(rateLimit, { limiter, key: () => 'k' });
    app.get('/stream', (_request, reply) =>
      reply.type('text/plain').send(
        new Readable({
          read() {
            this.push('tick\n');
          },
        }),
      ),
    );
    await serve(app, async (get) => {
      const controller = new AbortController();
      const res = await get('/stream', { signal: controller.signal });
      expect(res.status).toBe(200);
      expect((await limiter.peek('k')).remaining).toBe(0);
      controller.abort();
      const deadline = Date.now() + 3000;
      while ((await limiter.peek('k')).remaining !== 1 && Date.now() < deadline) await sleep(10);
      expect((await limiter.peek('k')).remaining).toBe(1);
    });
  });
});
