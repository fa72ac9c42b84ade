import type { IncomingMessage } from 'node:http';
import { createLimiter, type Decision, RateLimitedError } from '@floodgate/core';
import { type Running, serveHttp } from '@floodgate/test-support';
import { createTRPCClient, httpBatchLink, httpLink, TRPCClientError } from '@trpc/client';
import { initTRPC, TRPCError } from '@trpc/server';
import { type CreateExpressContextOptions, createExpressMiddleware } from '@trpc/server/adapters/express';
import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import { type CreateHTTPContextOptions, createHTTPHandler } from '@trpc/server/adapters/standalone';
import express from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import { getRateLimit, keyBy, rateLimit, rateLimitData } from './index.js';

/** 2026-01-01 00:00:10 UTC: 10 s into a minute, so fixed windows of a minute end 50 s later. */
const T0 = Date.UTC(2026, 0, 1, 0, 0, 10);

/** A clock the test moves by hand: the limiters of a test decide on it. */
function clock() {
  let now = T0;
  return {
    now: () => now,
    advance(ms: number) {
      now += ms;
    },
  };
}

/** The Node standalone adapter's context, with the user a header names (authentication stands in). */
const nodeContext = ({ req, res }: CreateHTTPContextOptions) => ({
  req,
  res,
  user: typeof req.headers['x-user'] === 'string' ? req.headers['x-user'] : undefined,
});
type NodeContext = ReturnType<typeof nodeContext>;

/** The errorFormatter recipe of the README: clients read retryAfterMs and the rule from error.data. */
const t = initTRPC.context<NodeContext>().create({
  errorFormatter: ({ shape, error }) => ({ ...shape, data: { ...shape.data, ...rateLimitData(error) } }),
});

const running: Running[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((server) => server.close()));
});

async function serveNode<R extends Parameters<typeof createHTTPHandler>[0]['router']>(router: R, onError?: (error: TRPCError) => void): Promise<string> {
  const server = await serveHttp(createHTTPHandler({ router, createContext: nodeContext, onError: onError && (({ error }) => onError(error)) }));
  running.push(server);
  return server.url;
}

interface Answer {
  readonly status: number;
  readonly headers: Headers;
}

/** A client over real HTTP that keeps the status and headers of every response it gets. */
function client<R extends Parameters<typeof createHTTPHandler>[0]['router']>(url: string, options: { batch?: boolean; headers?: Record<string, string> } = {}) {
  const answers: Answer[] = [];
  const link = (options.batch ? httpBatchLink : httpLink)({
    url,
    headers: options.headers ?? {},
    fetch: async (input, init) => {
      const response = await fetch(input, init as RequestInit);
      answers.push({ status: response.status, headers: response.headers });
      return response;
    },
  });
  return { trpc: createTRPCClient<R>({ links: [link] }), answers, last: () => answers[answers.length - 1] as Answer };
}

/** The TRPCClientError a call rejected with. */
type ClientError = Error & { data: Record<string, unknown> };

async function rejection(call: Promise<unknown>): Promise<ClientError> {
  const error = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(TRPCClientError);
  return error as ClientError;
}

describe('rateLimit() on the standalone (Node) adapter, over httpLink', () => {
  it('denies the 4th call from one address with TOO_MANY_REQUESTS and says when to retry', async () => {
    const time = clock();
    const limited = t.procedure.use(rateLimit({ algorithm: 'fixed-window', limit: 3, windowMs: 60_000, now: time.now }));
    const router = t.router({ hello: limited.query(() => 'hi') });
    const { trpc, last } = client<typeof router>(await serveNode(router));

    for (const remaining of ['2', '1', '0']) {
      expect(await trpc.hello.query()).toBe('hi');
      expect(last().headers.get('x-ratelimit-remaining')).toBe(remaining);
    }
    expect(last().headers.get('x-ratelimit-limit')).toBe('3');
    expect(last().headers.get('x-ratelimit-reset')).toBe(String((T0 + 50_000) / 1000));
    expect(last().headers.get('retry-after')).toBeNull();

    const error = await rejection(trpc.hello.query());
    expect(error.message).toBe('Too many requests, please try again later.');
    expect(error.data).toMatchObject({ code: 'TOO_MANY_REQUESTS', httpStatus: 429, retryAfterMs: 50_000, rule: 'default', path: 'hello' });
    expect(last().status).toBe(429);
    expect(last().headers.get('retry-after')).toBe('50');
    expect(last().headers.get('x-ratelimit-remaining')).toBe('0');

    time.advance(49_999);
    await rejection(trpc.hello.query());
    time.advance(1);
    expect(await trpc.hello.query()).toBe('hi');
  });

  it('counts each procedure under the rules given at its own .use()', async () => {
    const time = clock();
    const router = t.router({
      search: t.procedure.use(rateLimit({ limit: 2, windowMs: 60_000, now: time.now })).query(() => 'results'),
      upload: t.procedure.use(rateLimit({ limit: 1, windowMs: 60_000, now: time.now, message: 'One upload a minute.' })).mutation(() => 'stored'),
    });
    const { trpc } = client<typeof router>(await serveNode(router));

    expect(await trpc.upload.mutate()).toBe('stored');
    const error = await rejection(trpc.upload.mutate());
    expect(error.message).toBe('One upload a minute.');
    expect(error.data.rule).toBe('default');
    expect([await trpc.search.query(), await trpc.search.query()]).toEqual(['results', 'results']);
    expect((await rejection(trpc.search.query())).data.code).toBe('TOO_MANY_REQUESTS');
  });

  it('spends the limits of a base procedure and of its own .use(): a call must pass both', async () => {
    const time = clock();
    const publicProcedure = t.procedure.use(rateLimit({ algorithm: 'fixed-window', limit: 5, windowMs: 60_000, now: time.now }));
    const router = t.router({
      hello: publicProcedure.query(() => 'hi'),
      upload: publicProcedure.use(rateLimit({ algorithm: 'fixed-window', limit: 2, windowMs: 60_000, now: time.now })).mutation(() => 'stored'),
    });
    const { trpc, last } = client<typeof router>(await serveNode(router));
    expect(await trpc.upload.mutate()).toBe('stored');
    expect(await trpc.upload.mutate()).toBe('stored');
    // The route's limit is the tighter: its numbers are the headers'.
    expect([last().headers.get('x-ratelimit-limit'), last().headers.get('x-ratelimit-remaining')]).toEqual(['2', '0']);
    await rejection(trpc.upload.mutate());
    // Three uploads and this call: the base limit of 5 has 1 left.
    expect(await trpc.hello.query()).toBe('hi');
    expect([last().headers.get('x-ratelimit-limit'), last().headers.get('x-ratelimit-remaining')]).toEqual(['5', '1']);
  });

  it('takes the cost from the validated input', async () => {
    const time = clock();
    const upload = t.procedure
      .input((raw: unknown) => raw as { files: number })
      .use(rateLimit({ algorithm: 'fixed-window', limit: 10, windowMs: 60_000, now: time.now, cost: ({ input }) => input.files }))
      .mutation(({ input }) => input.files);
    const router = t.router({ upload });
    const { trpc, last } = client<typeof router>(await serveNode(router));

    expect(await trpc.upload.mutate({ files: 4 })).toBe(4);
    expect(await trpc.upload.mutate({ files: 4 })).toBe(4);
    expect(last().headers.get('x-ratelimit-remaining')).toBe('2');
    await rejection(trpc.upload.mutate({ files: 3 })); // 3 > 2 left: nothing taken
    expect(await trpc.upload.mutate({ files: 2 })).toBe(2);
    const never = await rejection(trpc.upload.mutate({ files: 11 }));
    expect(never.data.retryAfterMs).toBeNull(); // more than the rule can ever hold
    expect(last().headers.get('retry-after')).toBeNull();
  });

  it('keys by a user from the context, and by several scopes at once', async () => {
    const time = clock();
    const perUser = rateLimit<NodeContext>({
      now: time.now,
      rules: [
        { name: 'per-user', scope: 'user', algorithm: 'fixed-window', limit: 1, windowMs: 60_000 },
        { name: 'per-ip', scope: 'ip', algorithm: 'fixed-window', limit: 3, windowMs: 60_000 },
      ],
      key: { user: ({ ctx }) => ctx.user ?? 'anonymous', ip: keyBy.ip() },
    });
    const router = t.router({ me: t.procedure.use(perUser).query(({ ctx }) => ctx.user) });
    const url = await serveNode(router);
    const ann = client<typeof router>(url, { headers: { 'x-user': 'ann' } }).trpc;
    const bob = client<typeof router>(url, { headers: { 'x-user': 'bob' } }).trpc;
    const cat = client<typeof router>(url, { headers: { 'x-user': 'cat' } }).trpc;
    const dan = client<typeof router>(url, { headers: { 'x-user': 'dan' } }).trpc;

    expect(await ann.me.query()).toBe('ann');
    expect((await rejection(ann.me.query())).data.rule).toBe('per-user');
    expect(await bob.me.query()).toBe('bob');
    expect(await cat.me.query()).toBe('cat');
    // Three users from one address: the address's rule denies the fourth user.
    expect((await rejection(dan.me.query())).data.rule).toBe('per-ip');
    expect((await perUser.limiter.peek({ user: 'dan', ip: '127.0.0.1' })).rules.find((r) => r.name === 'per-user')?.remaining).toBe(1);
  });

  it("gives the procedure the decision through getRateLimit(ctx), and keeps the context's own fields", async () => {
    const limited = t.procedure.use(rateLimit({ limit: 5, windowMs: 60_000, now: clock().now }));
    const router = t.router({
      quota: limited.query(({ ctx }) => ({ remaining: getRateLimit(ctx)?.remaining, user: ctx.user })),
      open: t.procedure.query(({ ctx }) => getRateLimit(ctx) ?? null),
    });
    const { trpc } = client<typeof router>(await serveNode(router), { headers: { 'x-user': 'ann' } });
    expect(await trpc.quota.query()).toEqual({ remaining: 4, user: 'ann' });
    expect(await trpc.quota.query()).toEqual({ remaining: 3, user: 'ann' });
    expect(await trpc.open.query()).toBeNull();
  });

  it('lets skipped calls through without counting them', async () => {
    const limiter = createLimiter({ limit: 1, windowMs: 60_000, now: clock().now });
    const limited = t.procedure.use(rateLimit({ limiter, skip: ({ ctx }) => ctx.user === 'admin' }));
    const router = t.router({ hello: limited.query(() => 'hi') });
    const url = await serveNode(router);
    const admin = client<typeof router>(url, { headers: { 'x-user': 'admin' } });
    for (let i = 0; i < 3; i++) expect(await admin.trpc.hello.query()).toBe('hi');
    expect(admin.last().headers.get('x-ratelimit-limit')).toBeNull();
    const user = client<typeof router>(url).trpc;
    expect(await user.hello.query()).toBe('hi');
    await rejection(user.hello.query());
  });

  it('with headers: false sets no rate-limit headers, but Retry-After on a denial', async () => {
    const limited = t.procedure.use(rateLimit({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000, now: clock().now, headers: false }));
    const router = t.router({ hello: limited.query(() => 'hi') });
    const { trpc, last } = client<typeof router>(await serveNode(router));
    expect(await trpc.hello.query()).toBe('hi');
    expect([...last().headers.keys()].filter((name) => name.includes('ratelimit') || name === 'retry-after')).toEqual([]);
    await rejection(trpc.hello.query());
    expect([...last().headers.keys()].filter((name) => name.includes('ratelimit') || name === 'retry-after')).toEqual(['retry-after']);
    expect(last().headers.get('retry-after')).toBe('50');
  });

  it('in shadow mode decides, sets headers and emits events, but denies nothing', async () => {
    const shadowed = rateLimit({ limit: 1, windowMs: 60_000, now: clock().now, shadow: true });
    const limited: Decision[] = [];
    shadowed.limiter.on('limited', ({ decision }) => limited.push(decision));
    const router = t.router({ hello: t.procedure.use(shadowed).query(() => 'hi') });
    const { trpc, last } = client<typeof router>(await serveNode(router));
    expect([await trpc.hello.query(), await trpc.hello.query()]).toEqual(['hi', 'hi']);
    expect(limited).toHaveLength(1);
    expect(last().status).toBe(200);
    expect(last().headers.get('x-ratelimit-remaining')).toBe('0');
    expect(last().headers.get('retry-after')).toBeNull();
  });

  it('fails a call whose key or cost is bad with INTERNAL_SERVER_ERROR carrying the ERR_FG_* error, and serves the next', async () => {
    const errors: TRPCError[] = [];
    const base = { limit: 10, windowMs: 60_000, now: clock().now };
    const router = t.router({
      emptyKey: t.procedure.use(rateLimit({ ...base, key: () => '' })).query(() => 'never'),
      throwingKey: t.procedure
        .use(
          rateLimit({
            ...base,
            key: () => {
              throw new Error('no session store');
            },
          }),
        )
        .query(() => 'never'),
      badCost: t.procedure
        .input((raw: unknown) => raw as { n: number })
        .use(rateLimit({ ...base, cost: ({ input }) => input.n }))
        .query(() => 'ok'),
      unauthorized: t.procedure
        .use(
          rateLimit({
            ...base,
            key: ({ ctx }) => {
              if (ctx.user === undefined) throw new TRPCError({ code: 'UNAUTHORIZED', message: 'Sign in first.' });
              return ctx.user;
            },
          }),
        )
        .query(() => 'ok'),
    });
    const { trpc } = client<typeof router>(await serveNode(router, (error) => errors.push(error)));

    const empty = await rejection(trpc.emptyKey.query());
    expect(empty.data).toMatchObject({ code: 'INTERNAL_SERVER_ERROR', httpStatus: 500 });
    expect(empty.message).toMatch(/key function returned "".*\[ERR_FG_KEY\]/);
    expect(await rejection(trpc.throwingKey.query()).then((e) => e.message)).toMatch(/key function threw: no session store \[ERR_FG_KEY\]/);
    expect(await rejection(trpc.badCost.query({ n: 1.5 })).then((e) => e.message)).toMatch(/cost must be a positive integer, got 1\.5\. \[ERR_FG_COST\]/);
    expect(await rejection(trpc.badCost.query({ n: 0 })).then((e) => e.data.code)).toBe('INTERNAL_SERVER_ERROR');
    const unauthorized = await rejection(trpc.unauthorized.query());
    expect(unauthorized.data).toMatchObject({ code: 'UNAUTHORIZED', httpStatus: 401 });
    expect(unauthorized.message).toBe('Sign in first.');

    expect(errors.map((e) => (e.cause as { code?: string } | undefined)?.code)).toEqual(['ERR_FG_KEY', 'ERR_FG_KEY', 'ERR_FG_COST', 'ERR_FG_COST', undefined]);
    expect(errors[1]?.cause).toMatchObject({ cause: new Error('no session store') });
    expect(await trpc.badCost.query({ n: 2 })).toBe('ok'); // the server goes on
  });

  it('without a key, fails a call whose context carries no request with ERR_FG_OPTION naming the fix', async () => {
    const bare = initTRPC.context<{ user?: string }>().create();
    const router = bare.router({ hello: bare.procedure.use(rateLimit({ limit: 5, windowMs: 60_000 })).query(() => 'hi') });
    const server = await serveHttp(createHTTPHandler({ router, createContext: () => ({ user: 'ann' }) }));
    running.push(server);
    const error = await rejection(client<typeof router>(server.url).trpc.hello.query());
    expect(error.data.code).toBe('INTERNAL_SERVER_ERROR');
    expect(error.message).toMatch(/has no key option, and this call's context has no req.*Pass key: .*\[ERR_FG_OPTION\]/);
    // The same on a server-side call, which has no request either.
    const caller = bare.createCallerFactory(router)({ user: 'ann' });
    await expect(caller.hello()).rejects.toMatchObject({ code: 'INTERNAL_SERVER_ERROR', cause: { code: 'ERR_FG_OPTION' } });
  });

  it('throws a RateLimitedError cause that server-side callers can read', async () => {
    const bare = initTRPC.context<{ user: string }>().create();
    const router = bare.router({
      hello: bare.procedure
        .use(rateLimit({ algorithm: 'fixed-window', limit: 1, windowMs: 1_000, now: clock().now, key: ({ ctx }) => ctx.user }))
        .query(() => 'hi'),
    });
    const caller = bare.createCallerFactory(router)({ user: 'ann' });
    expect(await caller.hello()).toBe('hi');
    const error = await caller.hello().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TRPCError);
    expect((error as TRPCError).code).toBe('TOO_MANY_REQUESTS');
    expect((error as TRPCError).cause).toBeInstanceOf(RateLimitedError);
    expect(((error as TRPCError).cause as RateLimitedError).retryAfterMs).toBe(1_000);
    expect(rateLimitData(error)).toEqual({ retryAfterMs: 1_000, rule: 'default' });
    expect(rateLimitData(new TRPCError({ code: 'TOO_MANY_REQUESTS' }))).toBeUndefined();
  });
});

describe('batches (httpBatchLink): one response for several calls', () => {
  it('shows the most restrictive decision of the calls it answers, and Retry-After when one was denied', async () => {
    const time = clock();
    const router = t.router({
      roomy: t.procedure.use(rateLimit({ algorithm: 'fixed-window', limit: 10, windowMs: 60_000, now: time.now })).query(() => 'roomy'),
      tight: t.procedure.use(rateLimit({ algorithm: 'fixed-window', limit: 2, windowMs: 10_000, now: time.now })).query(() => 'tight'),
    });
    const { trpc, answers, last } = client<typeof router>(await serveNode(router), { batch: true });

    const allowed = await Promise.all([trpc.roomy.query(), trpc.tight.query(), trpc.roomy.query()]);
    expect(allowed).toEqual(['roomy', 'tight', 'roomy']);
    expect(answers).toHaveLength(1); // one request, one response
    expect(last().status).toBe(200);
    // roomy: 8 left after its two calls; tight: 1 left. The fewest remaining is what the headers show.
    expect(last().headers.get('x-ratelimit-limit')).toBe('2');
    expect(last().headers.get('x-ratelimit-remaining')).toBe('1');
    expect(last().headers.get('x-ratelimit-reset')).toBe(String(Date.UTC(2026, 0, 1, 0, 0, 20) / 1000));

    const mixed = await Promise.allSettled([trpc.roomy.query(), trpc.tight.query(), trpc.tight.query()]);
    expect(mixed.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected']);
    const denied = (mixed[2] as PromiseRejectedResult).reason as ClientError;
    expect(denied.data).toMatchObject({ code: 'TOO_MANY_REQUESTS', retryAfterMs: 10_000, path: 'tight' });
    expect(answers).toHaveLength(2);
    expect(last().status).toBe(207); // tRPC's status for a batch of answers and errors
    expect(last().headers.get('x-ratelimit-limit')).toBe('2');
    expect(last().headers.get('x-ratelimit-remaining')).toBe('0');
    expect(last().headers.get('retry-after')).toBe('10');
  });

  it('keeps the denial of a quota in the headers when a later call of the batch fits', async () => {
    const time = clock();
    const upload = t.procedure
      .input((raw: unknown) => raw as { files: number })
      .use(rateLimit({ algorithm: 'fixed-window', limit: 10, windowMs: 60_000, now: time.now, cost: ({ input }) => input.files }))
      .mutation(({ input }) => input.files);
    const router = t.router({ upload });
    const { trpc, last } = client<typeof router>(await serveNode(router), { batch: true });
    expect(await trpc.upload.mutate({ files: 8 })).toBe(8);
    // 2 left: the 3 files are refused, the 1 file after them fits.
    const settled = await Promise.allSettled([trpc.upload.mutate({ files: 3 }), trpc.upload.mutate({ files: 1 })]);
    expect(settled.map((r) => r.status)).toEqual(['rejected', 'fulfilled']);
    expect(last().status).toBe(207);
    // The denial outranks the count after it: its numbers (2 were free when 3 were refused) and its wait.
    expect(last().headers.get('x-ratelimit-remaining')).toBe('2');
    expect(last().headers.get('retry-after')).toBe('50');
  });

  it('reports one quota once, however many calls of the batch spent it', async () => {
    const time = clock();
    const base = { algorithm: 'fixed-window', limit: 10, windowMs: 60_000, now: time.now, headers: 'draft-8' } as const;
    const router = t.router({
      a: t.procedure.use(rateLimit(base)).query(() => 'a'),
      b: t.procedure.use(rateLimit({ ...base, limit: 5 })).query(() => 'b'),
    });
    const { trpc, last } = client<typeof router>(await serveNode(router), { batch: true });
    await Promise.all([trpc.a.query(), trpc.a.query(), trpc.a.query()]);
    expect(last().headers.get('ratelimit-policy')).toBe('"default";q=10;w=60');
    expect(last().headers.get('ratelimit')).toBe('"default";r=7;t=50');
    await Promise.all([trpc.a.query(), trpc.b.query(), trpc.b.query()]);
    // Two limiters with a rule of the same name: the second is named after its procedure.
    expect(last().headers.get('ratelimit-policy')).toBe('"default";q=10;w=60, "b:default";q=5;w=60');
    expect(last().headers.get('ratelimit')).toBe('"default";r=6;t=50, "b:default";r=3;t=50');
  });
});

describe('the fetch adapter', () => {
  /** A tRPC fetch handler served over real HTTP: a Node request becomes a fetch Request, and the Response is written back. */
  async function serveFetch(handle: (request: Request) => Promise<Response>): Promise<string> {
    const server = await serveHttp(async (req: IncomingMessage, res) => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const headers = new Headers();
      for (const [name, value] of Object.entries(req.headers)) if (typeof value === 'string') headers.set(name, value);
      const body = req.method === 'GET' || req.method === 'HEAD' ? undefined : Buffer.concat(chunks);
      const response = await handle(new Request(`http://${req.headers.host}${req.url}`, { method: req.method, headers, body }));
      res.writeHead(response.status, Object.fromEntries(response.headers));
      res.end(Buffer.from(await response.arrayBuffer()));
    });
    running.push(server);
    return `${server.url}/trpc`;
  }

  const fetchT = initTRPC.context<{ req: Request; resHeaders: Headers }>().create({
    errorFormatter: ({ shape, error }) => ({ ...shape, data: { ...shape.data, ...rateLimitData(error) } }),
  });

  it('sets the headers on resHeaders and keys by a header preset (a fetch Request has no address)', async () => {
    const time = clock();
    const router = fetchT.router({
      hello: fetchT.procedure
        .use(rateLimit({ algorithm: 'fixed-window', limit: 2, windowMs: 60_000, now: time.now, key: keyBy.header('x-api-key'), headers: 'both' }))
        .query(() => 'hi'),
    });
    const url = await serveFetch((req) =>
      fetchRequestHandler({ endpoint: '/trpc', req, router, createContext: ({ req, resHeaders }) => ({ req, resHeaders }) }),
    );
    const { trpc, last } = client<typeof router>(url, { headers: { 'x-api-key': 'k1' } });
    expect(await trpc.hello.query()).toBe('hi');
    expect(last().headers.get('x-ratelimit-remaining')).toBe('1');
    expect(last().headers.get('ratelimit')).toBe('"default";r=1;t=50');
    await trpc.hello.query();
    const error = await rejection(trpc.hello.query());
    expect(error.data).toMatchObject({ code: 'TOO_MANY_REQUESTS', httpStatus: 429, retryAfterMs: 50_000 });
    expect(last().headers.get('retry-after')).toBe('50');
    expect(await client<typeof router>(url, { headers: { 'x-api-key': 'k2' } }).trpc.hello.query()).toBe('hi');
  });

  it('without a key, says that a fetch Request carries no client address (ERR_FG_OPTION)', async () => {
    const router = fetchT.router({ hello: fetchT.procedure.use(rateLimit({ limit: 2, windowMs: 60_000 })).query(() => 'hi') });
    const url = await serveFetch((req) =>
      fetchRequestHandler({ endpoint: '/trpc', req, router, createContext: ({ req, resHeaders }) => ({ req, resHeaders }) }),
    );
    const error = await rejection(client<typeof router>(url).trpc.hello.query());
    expect(error.data.code).toBe('INTERNAL_SERVER_ERROR');
    expect(error.message).toMatch(/ctx\.req carries no client address \(a fetch Request has no socket\).*\[ERR_FG_OPTION\]/);
  });
});

describe('the Express adapter', () => {
  it("keys by req.ip, which follows Express's trust proxy setting, and sets the headers on res", async () => {
    const et = initTRPC.context<CreateExpressContextOptions>().create();
    const limited = rateLimit({ algorithm: 'fixed-window', limit: 2, windowMs: 60_000, now: clock().now });
    const router = et.router({ hello: et.procedure.use(limited).query(() => 'hi') });
    const app = express();
    app.set('trust proxy', 1); // one proxy of ours in front: req.ip is the address it saw
    app.use('/trpc', createExpressMiddleware({ router, createContext: (opts) => opts }));
    const server = await serveHttp(app);
    running.push(server);
    const proxied = client<typeof router>(`${server.url}/trpc`, { headers: { 'x-forwarded-for': '203.0.113.7' } });
    expect(await proxied.trpc.hello.query()).toBe('hi');
    expect(proxied.last().headers.get('x-ratelimit-remaining')).toBe('1');
    expect((await limited.limiter.peek('203.0.113.7')).remaining).toBe(1);
    expect((await limited.limiter.peek('127.0.0.1')).remaining).toBe(2);
  });
});

describe('options, checked when rateLimit() is called', () => {
  it.each([
    ['a limit of 0', 'ERR_FG_LIMIT', { limit: 0, windowMs: 1_000 }],
    ['a cost of 0', 'ERR_FG_COST', { limit: 1, windowMs: 1_000, cost: 0 }],
    ['a key that is no function', 'ERR_FG_OPTION', { limit: 1, windowMs: 1_000, key: 'user' }],
    ['a key by scope that is no function', 'ERR_FG_OPTION', { limit: 1, windowMs: 1_000, key: { user: 'x' } }],
    ['a skip that is no function', 'ERR_FG_OPTION', { limit: 1, windowMs: 1_000, skip: true }],
    ['a message that is a number', 'ERR_FG_OPTION', { limit: 1, windowMs: 1_000, message: 42 }],
    ['an unknown headers mode', 'ERR_FG_OPTION', { limit: 1, windowMs: 1_000, headers: 'draft-99' }],
    ['a shadow that is no boolean', 'ERR_FG_OPTION', { limit: 1, windowMs: 1_000, shadow: 'yes' }],
    ["an HTTP adapter's statusCode", 'ERR_FG_UNKNOWN_OPTION', { limit: 1, windowMs: 1_000, statusCode: 503 }],
    ["express-rate-limit's max", 'ERR_FG_UNKNOWN_OPTION', { max: 1, windowMs: 1_000 }],
    ['a limiter with limiter options', 'ERR_FG_OPTION', { limiter: createLimiter({ limit: 1, windowMs: 1_000 }), limit: 5 }],
    ['a limiter that is none', 'ERR_FG_OPTION', { limiter: {} }],
  ])('refuses %s with %s', (_, code, options) => {
    expect(() => rateLimit(options as never)).toThrow(expect.objectContaining({ code }));
  });

  it('names what to do instead of an HTTP-only option', () => {
    expect(() => rateLimit({ limit: 1, windowMs: 1_000, statusCode: 503, handler: () => {} } as never)).toThrow(
      "@floodgate/trpc's rateLimit() has no option 'statusCode' (a denial is TRPCError TOO_MANY_REQUESTS, HTTP 429), no option 'handler'",
    );
  });
});
