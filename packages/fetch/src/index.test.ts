import type { IncomingMessage } from 'node:http';
import { createLimiter, type Decision } from '@floodgate/core';
import { type AdapterUnderTest, adapterContract, captureWarnings, held, type Options, serveHttp } from '@floodgate/test-support';
import { getRequestListener } from '@hono/node-server';
import { describe, expect, expectTypeOf, it, vi } from 'vitest';
import { type FetchRateLimitOptions, getRateLimit, keyBy, withRateLimit } from './index.js';

/** What @hono/node-server hands a fetch handler after the Request: the Node request and response. */
type NodeEnv = { incoming: IncomingMessage };
type Handler = (request: Request, env: NodeEnv) => Response | Promise<Response>;

const socketAddress = (_request: Request, env: NodeEnv) => env.incoming.socket.remoteAddress;
/** Trusting one proxy: the X-Forwarded-For entry it appended, else the socket. */
const proxiedAddress = (request: Request, env: NodeEnv) => request.headers.get('x-forwarded-for')?.split(',').at(-1)?.trim() || socketAddress(request, env);

/** The contract's route: the status in ?status=, the decision as JSON; ?throw, ?hang, ?hold, ?wait as the suite describes. */
async function route(request: Request): Promise<Response> {
  const query = new URL(request.url).searchParams;
  if (query.get('throw')) throw new Error('the route failed');
  if (query.get('hang')) return new Promise<Response>(() => {});
  const hold = query.get('hold');
  if (hold) await held(hold);
  if (query.get('wait')) await new Promise((resolve) => setTimeout(resolve, Number(query.get('wait'))));
  const used = query.get('used');
  return Response.json(getRateLimit(request) ?? { skipped: true }, { status: Number(query.get('status') ?? 200), headers: used ? { 'x-used': used } : {} });
}

const fetchAdapter: AdapterUnderTest = {
  name: 'fetch handlers (@hono/node-server)',
  rateLimit: (options: Options) => withRateLimit<[Request, NodeEnv]>(route, { clientIp: socketAddress, ...options }),
  keyBy,
  createLimiter,
  header: ([request], name) => (request as Request).headers.get(name) ?? undefined,
  teapot: (_request: Request, _env: NodeEnv, decision: Decision) =>
    Response.json({ rule: decision.rule, retryAfter: String(Math.ceil(decision.retryAfterMs / 1000)) }, { status: 418 }),
  // The handler sees a Request, not the connection: a client that leaves is not visible to it.
  seesAbandonedRequests: false,
  // settle gets the Response after the handler's arguments.
  reported: (args) => (args.at(-1) as Response | undefined)?.headers.get('x-used') ?? undefined,
  start(routes, settings = {}) {
    const clientIp = settings.trustProxy ? proxiedAddress : socketAddress;
    const table = routes.map((r) => ({
      method: r.method ?? 'GET',
      path: r.path,
      // The first options are the outermost wrapper, as the first middleware runs first.
      handler: [r.options].flat().reduceRight<Handler>((inner, options) => withRateLimit(inner, { clientIp, ...options }), route),
    }));
    return serveHttp(
      getRequestListener((request, env) => {
        const found = table.find((r) => r.method === request.method && r.path === new URL(request.url).pathname);
        return found === undefined ? new Response('Not found', { status: 404 }) : found.handler(request, env as NodeEnv);
      }),
    );
  },
};

adapterContract(fetchAdapter);

const at = (address: string, headers: Record<string, string> = {}) => new Request('http://app.test/', { headers: { 'x-test-ip': address, ...headers } });
const fromTestHeader = (request: Request) => request.headers.get('x-test-ip');
const ok = () => new Response('ok');
const statuses = async (handler: (request: Request) => Promise<Response>, requests: Request[]) => {
  const out: number[] = [];
  for (const request of requests) out.push((await handler(request)).status);
  return out;
};

/** A body the test writes to and ends by hand. */
function controlledBody() {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
    },
  });
  return {
    stream,
    write: (text: string) => controller.enqueue(new TextEncoder().encode(text)),
    end: () => controller.close(),
    fail: (e: Error) => controller.error(e),
  };
}

describe('fetch specifics', () => {
  it('keeps the handler signature, hands callbacks and the denial handler the same arguments, and exposes the decision', async () => {
    interface Env {
      tenant: string;
    }
    const seen: unknown[] = [];
    const limited = withRateLimit(
      (request: Request, env: Env, ctx: { waitUntil(p: Promise<unknown>): void }) => {
        seen.push(ctx);
        return Response.json({ tenant: env.tenant, remaining: getRateLimit(request)?.remaining });
      },
      {
        algorithm: 'fixed-window',
        limit: 1,
        windowMs: 60_000,
        now: () => Date.UTC(2026, 0, 1),
        key: (_request, env) => `tenant:${env.tenant}`,
        handler: (_request, env, _ctx, decision) => Response.json({ tenant: env.tenant, rule: decision.rule }, { status: 418 }),
      },
    );
    expectTypeOf(limited).parameters.toEqualTypeOf<[request: Request, env: Env, ctx: { waitUntil(p: Promise<unknown>): void }]>();
    expect(limited.length).toBe(1); // Deno.serve hands no Request to a handler of length 0
    const ctx = { waitUntil: () => {} };
    const first = await limited(new Request('http://app.test/'), { tenant: 'acme' }, ctx);
    expect(await first.json()).toEqual({ tenant: 'acme', remaining: 0 });
    expect(first.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(seen).toEqual([ctx]);
    const denied = await limited(new Request('http://app.test/'), { tenant: 'acme' }, ctx);
    expect([denied.status, await denied.json(), denied.headers.get('retry-after')]).toEqual([418, { tenant: 'acme', rule: 'default' }, '60']);
    expect((await limited(new Request('http://app.test/'), { tenant: 'globex' }, ctx)).status).toBe(200);
  });

  it('adds the headers to a response whose headers are immutable, keeping status, statusText, headers and the streamed body', async () => {
    const upstream = await serveHttp((_req, res) => {
      res.writeHead(206, 'Partial Content Here', { 'x-upstream': 'yes', 'set-cookie': ['a=1', 'b=2'] });
      res.write('part one, ');
      setTimeout(() => res.end('part two'), 20);
    });
    try {
      const proxy = withRateLimit(() => fetch(upstream.url), { limit: 5, windowMs: 60_000, key: () => 'k' });
      const response = await proxy(new Request('http://app.test/'));
      expect([response.status, response.statusText, response.headers.get('x-upstream')]).toEqual([206, 'Partial Content Here', 'yes']);
      expect(response.headers.getSetCookie()).toEqual(['a=1', 'b=2']);
      expect(response.headers.get('x-ratelimit-remaining')).toBe('4');
      expect(await response.text()).toBe('part one, part two');
      const redirect = await withRateLimit(() => Response.redirect('http://app.test/elsewhere', 307), { limit: 5, windowMs: 60_000, key: () => 'k' })(
        new Request('http://app.test/'),
      );
      expect([redirect.status, redirect.headers.get('location'), redirect.headers.get('x-ratelimit-limit')]).toEqual([307, 'http://app.test/elsewhere', '5']);
    } finally {
      await upstream.close();
    }
  });

  it('holds a concurrency lease until a streamed body has been read to the end, or cancelled', async () => {
    const limiter = createLimiter({ algorithm: 'concurrency', limit: 1, windowMs: 60_000 });
    let body = controlledBody();
    const limited = withRateLimit(() => new Response(body.stream, { headers: { 'content-type': 'text/plain' } }), { limiter, key: () => 'k' });
    const streaming = await limited(new Request('http://app.test/'));
    // The handler has returned, but its body is still being produced: the lease holds.
    expect((await limiter.peek('k')).remaining).toBe(0);
    expect((await limited(new Request('http://app.test/'))).status).toBe(429);
    const read = streaming.text();
    body.write('a');
    body.write('b');
    body.end();
    expect(await read).toBe('ab');
    expect((await limiter.peek('k')).remaining).toBe(1);

    body = controlledBody();
    const cancelled = await limited(new Request('http://app.test/'));
    body.write('a');
    expect((await limiter.peek('k')).remaining).toBe(0);
    await cancelled.body?.cancel('client went away');
    expect((await limiter.peek('k')).remaining).toBe(1);
  });

  it('counts a body that fails mid-stream as a failed request, and settles a response without a body at once', async () => {
    const limiter = createLimiter({ algorithm: 'fixed-window', limit: 2, windowMs: 60_000 });
    let body = controlledBody();
    const limited = withRateLimit(() => new Response(body.stream), { limiter, key: () => 'k', skipFailedRequests: true });
    const response = await limited(new Request('http://app.test/'));
    expect((await limiter.peek('k')).remaining).toBe(1);
    const read = response.text();
    body.fail(new Error('upstream reset'));
    await expect(read).rejects.toThrow('upstream reset');
    expect((await limiter.peek('k')).remaining).toBe(2); // refunded: the request failed

    body = controlledBody();
    body.end();
    await (await limited(new Request('http://app.test/'))).text();
    const empty = withRateLimit(() => new Response(null, { status: 204 }), { limiter, key: () => 'k', skipFailedRequests: true });
    expect((await empty(new Request('http://app.test/'))).status).toBe(204);
    expect((await limiter.peek('k')).remaining).toBe(0); // two successes, kept
  });

  it('ends the lease and refunds when the handler throws, then throws its error to the runtime', async () => {
    const leases = createLimiter({ algorithm: 'concurrency', limit: 1, windowMs: 60_000 });
    const failures = createLimiter({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000 });
    const error = new Error('database down');
    const failing = withRateLimit(
      withRateLimit(
        async () => {
          throw error;
        },
        { limiter: leases, key: () => 'k' },
      ),
      { limiter: failures, key: () => 'k', skipFailedRequests: true },
    );
    for (let i = 0; i < 3; i++) await expect(failing(new Request('http://app.test/'))).rejects.toBe(error);
    expect([(await leases.peek('k')).remaining, (await failures.peek('k')).remaining]).toEqual([1, 1]);
  });

  it("settles once the body has been read: settle gets the handler's arguments, then its Response (undefined when the handler threw)", async () => {
    interface Env {
      tenant: string;
    }
    const limiter = createLimiter({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000, now: () => Date.UTC(2026, 0, 1) });
    const body = controlledBody();
    const seen: unknown[][] = [];
    const chat = withRateLimit((_request: Request, _env: Env) => new Response(body.stream, { headers: { 'x-tokens': '30' } }), {
      limiter,
      key: (_request, env) => env.tenant,
      cost: 10,
      settle: (request, env, response) => {
        expectTypeOf(response).toEqualTypeOf<Response | undefined>();
        seen.push([request, env, response]);
        return response === undefined ? undefined : Number(response.headers.get('x-tokens'));
      },
    });
    const request = new Request('http://app.test/');
    const env = { tenant: 'acme' };
    const streaming = await chat(request, env);
    expect(streaming.headers.get('x-ratelimit-remaining')).toBe('90'); // the estimate
    const read = streaming.text();
    body.write('the answer');
    expect(seen).toEqual([]); // the body is not over: not settled yet
    body.end();
    await read;
    await vi.waitFor(async () => expect((await limiter.peek('acme')).remaining).toBe(70));
    expect(seen).toEqual([[request, env, expect.any(Response)]]);
    expect((seen[0]?.[2] as Response | undefined)?.headers.get('x-tokens')).toBe('30');

    const failing = withRateLimit(
      (_request: Request): Response => {
        throw new Error('model down');
      },
      { limiter, key: () => 'acme', cost: 10, settle: (...args) => void seen.push(args) },
    );
    await expect(failing(request)).rejects.toThrow('model down');
    expect(seen.at(-1)).toEqual([request, undefined]);
    expect((await limiter.peek('acme')).remaining).toBe(60); // nothing reported: the estimate stands
  });

  it('throws a bad key to the runtime: a FloodgateError (500) that touches no other key', async () => {
    const limited = withRateLimit(ok, { limit: 1, windowMs: 60_000, key: () => '' });
    await expect(limited(new Request('http://app.test/'))).rejects.toMatchObject({ code: 'ERR_FG_KEY', status: 500 });
  });

  it('keys by the address a platform sets: cf-connecting-ip, x-vercel-forwarded-for or x-real-ip on Vercel, fly-client-ip', async () => {
    const cloudflare = withRateLimit(ok, { limit: 1, windowMs: 60_000, key: keyBy.cloudflare() });
    const cf = (ip: string) => new Request('http://app.test/', { headers: { 'cf-connecting-ip': ip } });
    expect(await statuses(cloudflare, [cf('::ffff:203.0.113.7'), cf('203.0.113.7'), cf('2001:db8:1234:5601::1'), cf('2001:db8:1234:56ff::9')])).toEqual([
      200, 429, 200, 429,
    ]);
    await expect(cloudflare(new Request('http://app.test/'))).rejects.toMatchObject({
      code: 'ERR_FG_KEY',
      message: expect.stringContaining('keyBy.cloudflare()'),
    });
    await expect(cloudflare(cf('not-an-ip'))).rejects.toMatchObject({ code: 'ERR_FG_KEY' });

    const vercel = withRateLimit(ok, { limit: 1, windowMs: 60_000, key: keyBy.vercel() });
    const v = (headers: Record<string, string>) => new Request('http://app.test/', { headers });
    expect(
      await statuses(vercel, [v({ 'x-vercel-forwarded-for': '198.51.100.1' }), v({ 'x-real-ip': '198.51.100.1' }), v({ 'x-real-ip': '198.51.100.2' })]),
    ).toEqual([200, 429, 200]);
    // X-Forwarded-For alone is no Vercel request: Vercel sets the other two on every request it forwards.
    await expect(vercel(v({ 'x-forwarded-for': '198.51.100.3' }))).rejects.toMatchObject({ code: 'ERR_FG_KEY', message: expect.stringContaining('Vercel') });

    const fly = withRateLimit(ok, { limit: 1, windowMs: 60_000, key: keyBy.fly({ ipv6Subnet: 64 }) });
    const f = (ip: string) => new Request('http://app.test/', { headers: { 'fly-client-ip': ip } });
    expect(await statuses(fly, [f('2001:db8:0:1::1'), f('2001:db8:0:2::1'), f('2001:db8:0:1::2')])).toEqual([200, 200, 429]);
  });

  it('keys by the clientIp option by default, by X-Forwarded-For hops, or by a header with the client address as fallback', async () => {
    const base = { limit: 1, windowMs: 60_000, clientIp: fromTestHeader };
    const byIp = withRateLimit(ok, base);
    expect(await statuses(byIp, [at('192.0.2.1'), at('::ffff:192.0.2.1'), at('192.0.2.2')])).toEqual([200, 429, 200]);
    const byHops = withRateLimit(ok, { ...base, key: keyBy.forwardedFor({ hops: 2 }) });
    const xff = (value: string) => at('10.0.0.1', { 'x-forwarded-for': value });
    expect(await statuses(byHops, [xff('spoof, 198.51.100.1, 10.0.0.9'), xff('other, 198.51.100.1, 10.0.0.9'), at('10.0.0.1')])).toEqual([200, 429, 200]);
    const byUser = withRateLimit(ok, { ...base, key: keyBy.header('x-user-id') });
    expect(
      await statuses(byUser, [at('192.0.2.1', { 'x-user-id': 'alice' }), at('192.0.2.1', { 'x-user-id': 'alice' }), at('192.0.2.1'), at('192.0.2.1')]),
    ).toEqual([200, 429, 200, 429]);
  });

  it('without clientIp, keys by X-Forwarded-For alone, and says to pass clientIp when the header falls short', async () => {
    const byHops = withRateLimit(ok, { limit: 1, windowMs: 60_000, key: keyBy.forwardedFor({ hops: 2 }) });
    const xff = (value: string) => new Request('http://app.test/', { headers: { 'x-forwarded-for': value } });
    expect(await statuses(byHops, [xff('198.51.100.1, 10.0.0.9'), xff('spoof, 198.51.100.1, 10.0.0.9')])).toEqual([200, 429]);
    await expect(byHops(xff('10.0.0.9'))).rejects.toMatchObject({ code: 'ERR_FG_KEY', message: expect.stringContaining('clientIp') });
  });

  it('warns once about a proxy entry that is no address; says nothing of trust, which the clientIp function decides', async () => {
    const warnings = captureWarnings();
    try {
      const byHops = withRateLimit(ok, { limit: 2, windowMs: 60_000, clientIp: fromTestHeader, key: keyBy.forwardedFor() });
      const xff = (value: string) => at('10.0.0.1', { 'x-forwarded-for': value });
      expect(await statuses(byHops, [xff('unknown'), xff('_hidden'), xff('198.51.100.1:4711'), xff('[2001:db8::1]:443'), xff('garbage')])).toEqual([
        200, 200, 200, 200, 429,
      ]);
      const taken = await warnings.taken();
      expect(taken.map((w) => w.code)).toEqual(['WRN_FG_FORWARDED_ADDRESS']);
      expect(taken[0]?.message).toContain('keyBy.forwardedFor() found no IP address in X-Forwarded-For ("unknown")');
      const byIp = withRateLimit(ok, { limit: 100, windowMs: 60_000, clientIp: fromTestHeader });
      expect(await statuses(byIp, [xff('198.51.100.1'), xff('198.51.100.2')])).toEqual([200, 200]);
      expect(await warnings.codes()).toEqual([]);
    } finally {
      warnings.stop();
    }
  });

  it('matches allow and deny lists against the clientIp address', async () => {
    const limited = withRateLimit(ok, { limit: 1, windowMs: 60_000, clientIp: fromTestHeader, allowList: ['10.0.0.0/8'], denyList: ['203.0.113.0/24'] });
    expect(await statuses(limited, [at('10.1.2.3'), at('10.1.2.3'), at('203.0.113.5'), at('192.0.2.1'), at('192.0.2.1')])).toEqual([200, 200, 403, 200, 429]);
  });

  it('refuses to build without a way to tell clients apart, and says what to pass', () => {
    const build = (options: Partial<FetchRateLimitOptions>) => () => withRateLimit(ok, { limit: 1, windowMs: 1000, ...options });
    expect(build({})).toThrow(
      expect.objectContaining({ code: 'ERR_FG_OPTION', message: expect.stringMatching(/keyBy\.cloudflare\(\).*keyBy\.vercel\(\).*clientIp/) }),
    );
    expect(build({ allowList: ['10.0.0.0/8'], key: keyBy.cloudflare() })).toThrow(
      expect.objectContaining({ code: 'ERR_FG_OPTION', message: expect.stringContaining('clientIp') }),
    );
    expect(build({ clientIp: 'cf-connecting-ip' as never })).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
    expect(() => withRateLimit('handler' as never, { limit: 1, windowMs: 1000, key: () => 'k' })).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
    // A key, a preset or clientIp is enough.
    expect(typeof build({ key: keyBy.vercel() })).toBe('function');
    expect(typeof build({ clientIp: () => '192.0.2.1' })).toBe('function');
  });
});
