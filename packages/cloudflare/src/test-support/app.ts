/*
 * The Worker the tests of this package run in workerd: Floodgate's Web
 * adapters with the Durable Object store, and with RedisStore over
 * @upstash/redis (to the REST bridge of the test, on loopback).
 *
 *   /fetch/...     @floodgate/fetch, 100 an hour for everyone (fixed window)
 *   /hono/...      @floodgate/hono, 100 an hour per x-user-id
 *   /scoped        3 an hour per x-user-id and 10 an hour for everyone, in two objects
 *   /redis         @floodgate/fetch on RedisStore over @upstash/redis, 5 an hour per x-user-id
 *   /slow          a store whose objects answer after SLOW_MS: timeoutMs 100, onStoreError from ?policy=
 *                  (allow, deny, insurance); ?policy=cached: timeoutMs 10 s and localDenyCache
 *   /object?name=  GET: what an object holds (entries, alarm); POST: the body as a call of the object
 *   /short         1 a second per x-user-id, in objects swept every 200 ms
 *   /login?at=     5 tries a minute per x-user-id, then blocked for 15 min (escalating up to 1 h),
 *                  on the test's clock (at: ms, clock: 'client'); a denial answers its decision's `blocked`
 *   /login/reset?user=   lifts a user's block (limiter.reset)
 *   /login/blocks  the 'blocked' events of /login, in order
 */
import { createLimiter, FloodgateError, type LimiterOptions, RedisStore } from '@floodgate/core';
import { keyBy as fetchKeys, withRateLimit } from '@floodgate/fetch';
import { rateLimit } from '@floodgate/hono';
import { Redis } from '@upstash/redis/cloudflare';
import { Hono } from 'hono';
import { FloodgateDurableObject } from '../object.js';
import { type DurableObjectNamespaceLike, DurableObjectStore } from '../store.js';

export { FloodgateDurableObject };

/** An object that answers late: a Durable Object that does not answer in time. */
export class SlowDurableObject extends FloodgateDurableObject {
  constructor(
    ctx: ConstructorParameters<typeof FloodgateDurableObject>[0],
    private readonly env: Env,
  ) {
    super(ctx, env);
  }

  override async fetch(request: Request): Promise<Response> {
    await new Promise((resolve) => setTimeout(resolve, Number(this.env.SLOW_MS)));
    return super.fetch(request);
  }
}

/** An object that sweeps ended state every 200 ms instead of every 5 s. */
export class ShortLivedDurableObject extends FloodgateDurableObject {
  protected override sweepIntervalMs = 200;
}

interface Env {
  FLOODGATE: DurableObjectNamespaceLike;
  SLOW: DurableObjectNamespaceLike;
  SHORT: DurableObjectNamespaceLike;
  BRIDGE_URL: string;
  BRIDGE_TOKEN: string;
  SLOW_MS: string;
}

const ok = () => new Response('ok');
const userKey = fetchKeys.header('x-user-id', { fallback: () => 'anonymous' });
const hourly = { algorithm: 'fixed-window', windowMs: 3_600_000 } as const;

/** Handlers are built on the first request, when `env` is known, and kept: the limiters live as long as the isolate. */
let handlers: ((request: Request) => Promise<Response>) | undefined;

/** The test's clock for /login: each request says when it is made (?at=). */
let loginNow = 0;
/** The 'blocked' events of /login. */
const loginBlocks: { key: unknown; rule: string; blockMs: number; until: number; strike: number }[] = [];

function build(env: Env): (request: Request) => Promise<Response> {
  const store = new DurableObjectStore({ namespace: env.FLOODGATE });
  const everyone = withRateLimit(ok, { ...hourly, limit: 100, store, key: () => 'everyone' });
  // Scoped keys straight through the limiter (the adapters' key objects are another matter).
  const scopedLimiter = createLimiter({
    rules: [
      { ...hourly, name: 'per-user', limit: 3, scope: 'user' },
      { ...hourly, name: 'everyone', limit: 10, scope: 'global' },
    ],
    store,
    onStoreError: 'deny',
  });
  const scoped = async (request: Request) => {
    const decision = await scopedLimiter.consume({ user: request.headers.get('x-user-id') ?? 'anonymous' });
    if (decision.storeError !== undefined) throw decision.storeError;
    return new Response(decision.rule, { status: decision.allowed ? 200 : 429 });
  };
  const redis = new Redis({ url: env.BRIDGE_URL, token: env.BRIDGE_TOKEN, enableTelemetry: false, retry: false });
  const overRedis = withRateLimit(async (request: Request) => new Response(JSON.stringify(await storeMode(request))), {
    ...hourly,
    limit: 5,
    store: redisStore(redis),
    key: userKey,
    onStoreError: 'deny',
  });
  const short = withRateLimit(ok, {
    algorithm: 'fixed-window',
    limit: 1,
    windowMs: 1_000,
    store: new DurableObjectStore({ namespace: env.SHORT }),
    key: userKey,
  });
  const logins = createLimiter({
    algorithm: 'fixed-window',
    limit: 5,
    windowMs: 60_000,
    blockMs: 15 * 60_000,
    maxBlockMs: 60 * 60_000,
    store: new DurableObjectStore({ namespace: env.FLOODGATE, clock: 'client' }),
    now: () => loginNow,
    prefix: 'login:',
    onStoreError: 'deny',
  });
  logins.on('blocked', ({ key, rule, blockMs, until, strike }) => loginBlocks.push({ key, rule, blockMs, until, strike }));
  const login = withRateLimit((_request: Request) => new Response('welcome'), {
    limiter: logins,
    key: (request) => request.headers.get('x-user-id') ?? 'anonymous',
    handler: (_request, decision) => Response.json({ blocked: decision.blocked ?? null }, { status: 429 }),
  });
  const slowStore = new DurableObjectStore({ namespace: env.SLOW });
  const slow = (policy: LimiterOptions['onStoreError'], localDenyCache: boolean) =>
    withRateLimit(ok, { ...hourly, limit: 1, store: slowStore, key: userKey, timeoutMs: localDenyCache ? 10_000 : 100, onStoreError: policy, localDenyCache });
  const slowByPolicy = {
    allow: slow('allow', false),
    deny: slow('deny', false),
    insurance: slow(createLimiter({ limit: 2, windowMs: 60_000 }), false),
    cached: slow('deny', true),
  };

  const hono = new Hono<{ Bindings: Env }>();
  hono.use('/hono/*', rateLimit({ ...hourly, limit: 100, store, key: (c) => c.req.header('x-user-id') ?? 'anonymous' }));
  hono.get('/hono/*', (c) => c.text('ok'));

  return async (request) => {
    const url = new URL(request.url);
    const path = url.pathname;
    if (path.startsWith('/fetch/')) return everyone(request);
    if (path.startsWith('/hono/')) return hono.fetch(request, env);
    if (path === '/scoped') return scoped(request);
    if (path === '/redis') return overRedis(request);
    if (path === '/short') return short(request);
    if (path === '/login') {
      loginNow = Number(url.searchParams.get('at'));
      return login(request);
    }
    if (path === '/login/reset') {
      await logins.reset(url.searchParams.get('user') ?? '');
      return ok();
    }
    if (path === '/login/blocks') return Response.json(loginBlocks);
    if (path === '/slow') return slowByPolicy[(url.searchParams.get('policy') ?? 'allow') as keyof typeof slowByPolicy](request);
    if (path === '/object') {
      // GET: what the object holds; POST: the body as a call of the object, as it is.
      const namespace = url.searchParams.get('namespace') === 'SHORT' ? env.SHORT : env.FLOODGATE;
      const stub = namespace.get(namespace.idFromName(url.searchParams.get('name') ?? '') as never);
      if (request.method === 'GET') return (stub as unknown as { fetch(url: string): Promise<Response> }).fetch('https://floodgate.internal/inspect');
      return stub.fetch('https://floodgate.internal/call', { method: 'POST', body: await request.text(), headers: {} });
    }
    return new Response('not found', { status: 404 });
  };
}

/** RedisStore over the bridge, and how it runs the library (reported by /redis). */
let lastRedisStore: RedisStore | undefined;
function redisStore(client: Redis): RedisStore {
  lastRedisStore = new RedisStore({ client });
  return lastRedisStore;
}
async function storeMode(request: Request): Promise<{ runsAs: string | undefined; user: string | null }> {
  return { runsAs: lastRedisStore?.runsAs, user: request.headers.get('x-user-id') };
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    try {
      handlers ??= build(env);
      return await handlers(request);
    } catch (error) {
      const code = error instanceof FloodgateError ? error.code : 'unexpected';
      return new Response(`${code}: ${error instanceof Error ? error.message : String(error)}`, { status: 500 });
    }
  },
};
