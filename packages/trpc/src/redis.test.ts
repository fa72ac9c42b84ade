import { RedisStore } from '@floodgate/core';
import { type RedisServer, type Running, serveHttp, startRedis, useRedisServer } from '@floodgate/test-support';
import { createTRPCClient, httpBatchLink, httpLink, TRPCClientError } from '@trpc/client';
import { initTRPC } from '@trpc/server';
import { type CreateHTTPContextOptions, createHTTPHandler } from '@trpc/server/adapters/standalone';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { keyBy, rateLimit, rateLimitData } from './index.js';

/** The limiters' clock stands still (RedisStore clock: 'client'): every wait below is exact, however long a round trip takes. */
const NOW = Date.UTC(2100, 0, 1, 0, 0, 10);
const now = () => NOW;

const t = initTRPC.context<Pick<CreateHTTPContextOptions, 'req' | 'res'>>().create({
  errorFormatter: ({ shape, error }) => ({ ...shape, data: { ...shape.data, ...rateLimitData(error) } }),
});

const running: Running[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((server) => server.close()));
});

async function serve(router: Parameters<typeof createHTTPHandler>[0]['router']): Promise<string> {
  const server = await serveHttp(createHTTPHandler({ router, createContext: ({ req, res }) => ({ req, res }) }));
  running.push(server);
  return server.url;
}

interface Answer {
  readonly status: number;
  readonly headers: Headers;
}

function client<R extends Parameters<typeof createHTTPHandler>[0]['router']>(url: string, options: { batch?: boolean; user?: string } = {}) {
  const answers: Answer[] = [];
  const link = (options.batch ? httpBatchLink : httpLink)({
    url,
    headers: options.user === undefined ? {} : { 'x-user-id': options.user },
    fetch: async (input, init) => {
      const response = await fetch(input, init as RequestInit);
      answers.push({ status: response.status, headers: response.headers });
      return response;
    },
  });
  return { trpc: createTRPCClient<R>({ links: [link] }), answers, last: () => answers[answers.length - 1] as Answer };
}

type ClientError = Error & { data: Record<string, unknown> };
const rejection = (call: Promise<unknown>): Promise<ClientError> =>
  call.then(
    () => {
      throw new Error('the call passed');
    },
    (error: unknown) => {
      expect(error).toBeInstanceOf(TRPCClientError);
      return error as ClientError;
    },
  );

describe('with a RedisStore', () => {
  const redis = useRedisServer();

  it('shares one limit between two servers on one Redis', async () => {
    const options = {
      rules: [
        { name: 'per-minute', algorithm: 'gcra' as const, limit: 3, windowMs: 60_000 },
        { name: 'per-hour', algorithm: 'fixed-window' as const, limit: 100, windowMs: 3_600_000 },
      ],
      key: keyBy.header('x-user-id'),
      now,
      timeoutMs: 30_000,
    };
    // Each server has its own limiter and store, as two processes would; one prefix makes them one limit.
    const serverRouter = (i: number) =>
      t.router({
        send: t.procedure
          .use(rateLimit({ ...options, store: new RedisStore({ client: redis.client, clock: 'client' }), prefix: 'sms:' }))
          .mutation(() => `sent by server ${i}`),
      });
    const urls = await Promise.all([0, 1].map((i) => serve(serverRouter(i))));
    const ada = urls.map((url) => client<ReturnType<typeof serverRouter>>(url, { user: 'ada' }));
    expect(await ada[0]?.trpc.send.mutate()).toBe('sent by server 0');
    expect(await ada[1]?.trpc.send.mutate()).toBe('sent by server 1');
    expect(await ada[0]?.trpc.send.mutate()).toBe('sent by server 0');
    expect(ada[0]?.last().headers.get('x-ratelimit-remaining')).toBe('0');
    const denied = await rejection(ada[1]?.trpc.send.mutate() as Promise<unknown>);
    expect(denied.data).toMatchObject({ code: 'TOO_MANY_REQUESTS', retryAfterMs: 20_000, rule: 'per-minute' });
    expect(ada[1]?.last().headers.get('retry-after')).toBe('20');
    expect(await redis.client.exists('sms:{x-user-id:ada}:per-minute:v2', 'sms:{x-user-id:ada}:per-hour:v2')).toBe(2);
  });

  it('refuses two procedures counting under one name on one store (ERR_FG_STORE_REUSE): give each its prefix', () => {
    const store = new RedisStore({ client: redis.client });
    rateLimit({ limit: 100, windowMs: 60_000, store });
    expect(() => rateLimit({ limit: 5, windowMs: 60_000, store })).toThrow(expect.objectContaining({ code: 'ERR_FG_STORE_REUSE' }));
    expect(() => rateLimit({ limit: 5, windowMs: 60_000, store, prefix: 'upload:' })).not.toThrow();
  });
});

describe('when Redis is down (onStoreError)', () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    await server.stop();
  });

  it("lets calls through with 'allow' and answers SERVICE_UNAVAILABLE with 'deny', with Retry-After: 1", async () => {
    // What the core README recommends: the offline queue on, one retry per command.
    const store = new RedisStore({ client: server.client({ maxRetriesPerRequest: 1 }) });
    const open = rateLimit({ limit: 5, windowMs: 60_000, now, store, prefix: 'open:', onStoreError: 'allow' });
    const closed = rateLimit({ limit: 5, windowMs: 60_000, now, store, prefix: 'closed:', onStoreError: 'deny' });
    const failures: unknown[] = [];
    for (const limiter of [open.limiter, closed.limiter]) limiter.on('error', ({ error }) => failures.push(error));
    const router = t.router({
      open: t.procedure.use(open).query(() => 'open'),
      closed: t.procedure.use(closed).query(() => 'closed'),
    });
    const { trpc, last } = client<typeof router>(await serve(router));
    expect([await trpc.open.query(), await trpc.closed.query()]).toEqual(['open', 'closed']);
    expect(last().headers.get('x-ratelimit-remaining')).toBe('4');
    expect(failures).toEqual([]);

    await server.stop();

    expect(await trpc.open.query()).toBe('open');
    expect(last().status).toBe(200);
    expect(last().headers.get('x-ratelimit-limit')).toBeNull(); // the numbers are unknown
    const refused = await rejection(trpc.closed.query());
    expect(refused.message).toBe('Service unavailable: the rate limiter cannot reach its store.');
    expect(refused.data).toMatchObject({ code: 'SERVICE_UNAVAILABLE', httpStatus: 503, retryAfterMs: 1_000 });
    expect(last().status).toBe(503);
    expect(last().headers.get('retry-after')).toBe('1');
    expect(last().headers.get('x-ratelimit-remaining')).toBeNull();
    expect(failures).toHaveLength(2);

    // In one batch: the open call is answered, the closed one refused; the response says when to come back.
    const batch = client<typeof router>(await serve(router), { batch: true });
    const settled = await Promise.allSettled([batch.trpc.open.query(), batch.trpc.closed.query()]);
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected']);
    expect(batch.last().status).toBe(207);
    expect(batch.last().headers.get('retry-after')).toBe('1');
  });
});
