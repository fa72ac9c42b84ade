/*
 * Real Socket.IO 4 servers on ephemeral ports, real socket.io-client
 * connections over WebSocket. Clocks are injected (the limiters' `now`), so
 * every retryAfterMs is exact and nothing sleeps.
 */
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLimiter, type LimiterOptions, RedisStore } from '@floodgate/core';
import { startRedis, useRedisServer } from '@floodgate/test-support';
import { Server, type Socket } from 'socket.io';
import { type Socket as ClientSocket, io as connectClient, type ManagerOptions, type SocketOptions } from 'socket.io-client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { FloodgateError, getRateLimit, keyBy, type RateLimitMiddleware, rateLimit } from './index.js';

type Middleware = (socket: Socket, next: (err?: Error) => void) => void;

const closers: (() => unknown)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  vi.restoreAllMocks();
});

/** A Socket.IO server on a free port of 127.0.0.1 with these middlewares; `onConnection` gets every admitted socket. */
async function serve(middlewares: Middleware[], onConnection: (socket: Socket) => void = () => {}): Promise<string> {
  const http = createServer();
  const io = new Server(http);
  for (const middleware of middlewares) io.use(middleware);
  io.on('connection', onConnection);
  http.listen(0, '127.0.0.1');
  await once(http, 'listening');
  closers.push(() => new Promise((resolve) => io.close(resolve)));
  return `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
}

type ConnectError = Error & { data?: unknown };

/** A client connection over WebSocket: connected, or refused with the connect_error. */
async function connect(url: string, options: Partial<ManagerOptions & SocketOptions> = {}): Promise<{ client: ClientSocket; error?: ConnectError }> {
  const client = connectClient(url, { transports: ['websocket'], reconnection: false, forceNew: true, ...options });
  closers.push(() => client.disconnect());
  return new Promise((resolve) => {
    client.once('connect', () => resolve({ client }));
    client.once('connect_error', (error: ConnectError) => resolve({ client, error }));
  });
}

async function connected(url: string, options: Partial<ManagerOptions & SocketOptions> = {}): Promise<ClientSocket> {
  const { client, error } = await connect(url, options);
  if (error !== undefined) throw error;
  return client;
}

/** The next `event` the client receives. */
const next = (client: ClientSocket, event: string): Promise<unknown> => new Promise((resolve) => client.once(event, resolve));

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

describe('connections (io.use)', () => {
  it('refuses the 3rd connection from one address within the window, says when to retry, and admits it then', async () => {
    let now = 1_000_000; // a fixed-window window starts here (windows are aligned to the epoch)
    const url = await serve([rateLimit({ algorithm: 'fixed-window', limit: 2, windowMs: 10_000, now: () => now })]);
    expect((await connect(url)).error).toBeUndefined();
    now += 1_000;
    expect((await connect(url)).error).toBeUndefined();
    now += 2_000;
    const refused = await connect(url);
    expect(refused.error?.message).toBe('Too many connections, please try again later.');
    expect(refused.error?.data).toEqual({ code: 'RATE_LIMITED', retryAfterMs: 7_000, rule: 'default' });
    // An X-Forwarded-For the client makes up does not change its key: Socket.IO trusts no proxy.
    const spoofed = await connect(url, { extraHeaders: { 'x-forwarded-for': '203.0.113.9' } });
    expect(spoofed.error?.data).toEqual({ code: 'RATE_LIMITED', retryAfterMs: 7_000, rule: 'default' });
    // Another address has a count of its own.
    expect((await connect(url, { localAddress: '127.0.0.2' } as Partial<ManagerOptions>)).error).toBeUndefined();
    now += 6_999;
    expect((await connect(url)).error?.data).toEqual({ code: 'RATE_LIMITED', retryAfterMs: 1, rule: 'default' });
    now += 1;
    expect((await connect(url)).error).toBeUndefined();
  });

  it('keys by X-Forwarded-For with keyBy.forwardedFor() behind a proxy of your own', async () => {
    const url = await serve([rateLimit({ limit: 1, windowMs: 60_000, key: keyBy.forwardedFor({ hops: 1 }) })]);
    const via = (address: string) => connect(url, { extraHeaders: { 'x-forwarded-for': `198.51.100.1, ${address}` } });
    expect((await via('203.0.113.9')).error).toBeUndefined();
    expect((await via('203.0.113.9')).error?.data).toMatchObject({ code: 'RATE_LIMITED' });
    expect((await via('203.0.113.10')).error).toBeUndefined();
  });

  it("keys by the handshake's auth token, hashed, and by the address without one", async () => {
    const limit = rateLimit({ limit: 1, windowMs: 60_000, key: keyBy.auth('token') });
    const keys: unknown[] = [];
    limit.limiters.connection?.on('allowed', (event) => keys.push(event.key));
    const url = await serve([limit]);
    expect((await connect(url, { auth: { token: 'alice' } })).error).toBeUndefined();
    expect((await connect(url, { auth: { token: 'alice' } })).error?.data).toMatchObject({ code: 'RATE_LIMITED', rule: 'default' });
    expect((await connect(url, { auth: { token: 'bob' } })).error).toBeUndefined();
    expect((await connect(url)).error).toBeUndefined(); // no token: keyed by 127.0.0.1
    // A token that is no string or number is no token: the address again, which has had its one.
    expect((await connect(url, { auth: { token: { $gt: '' } } })).error?.data).toMatchObject({ code: 'RATE_LIMITED' });
    expect(keys).toEqual([`auth.token:${sha256('alice')}`, `auth.token:${sha256('bob')}`, '127.0.0.1']);
  });

  it('keys by the user an earlier middleware authenticated, and by address, in one call (scopes)', async () => {
    const authenticate: Middleware = (socket, next) => {
      const user = socket.handshake.auth.user;
      if (typeof user !== 'string') return next(new Error('unauthorized'));
      socket.data.user = user;
      next();
    };
    const limit = rateLimit({
      rules: [
        { name: 'per-ip', scope: 'ip', limit: 3, windowMs: 60_000 },
        { name: 'per-user', scope: 'user', limit: 1, windowMs: 60_000 },
      ],
      key: { ip: keyBy.ip(), user: (socket) => socket.data.user },
    });
    const url = await serve([authenticate, limit]);
    expect((await connect(url, { auth: { user: 'ada' } })).error).toBeUndefined();
    expect((await connect(url, { auth: { user: 'ada' } })).error?.data).toMatchObject({ code: 'RATE_LIMITED', rule: 'per-user' });
    expect((await connect(url, { auth: { user: 'bob' } })).error).toBeUndefined();
    expect((await connect(url, { auth: { user: 'cy' } })).error).toBeUndefined();
    // The address's 3 are spent (ada's refusal took nothing: all or nothing).
    expect((await connect(url, { auth: { user: 'dee' } })).error?.data).toMatchObject({ code: 'RATE_LIMITED', rule: 'per-ip' });
  });

  it('exposes the handshake decision with getRateLimit(socket)', async () => {
    const seen: unknown[] = [];
    const url = await serve([rateLimit({ limit: 5, windowMs: 60_000 })], (socket) => seen.push(getRateLimit(socket)?.remaining));
    await connected(url);
    await connected(url);
    await vi.waitFor(() => expect(seen).toEqual([4, 3]));
  });

  it('counts open connections with a concurrency rule: the lease ends with the connection', async () => {
    const gone: Promise<unknown>[] = [];
    const url = await serve([rateLimit({ algorithm: 'concurrency', limit: 1, windowMs: 60_000 })], (socket) => {
      gone.push(once(socket, 'disconnect'));
    });
    const first = await connected(url);
    expect((await connect(url)).error?.data).toMatchObject({ code: 'RATE_LIMITED' });
    first.disconnect();
    await gone[0];
    await vi.waitFor(async () => expect((await connect(url)).error).toBeUndefined());
  });

  it('refuses a connection whose key function fails with ERR_FG_KEY, and goes on serving', async () => {
    const url = await serve([
      rateLimit({
        limit: 10,
        windowMs: 60_000,
        key: (socket) => {
          if (socket.handshake.auth.crash) throw new Error('no key for you');
          return socket.handshake.auth.name;
        },
      }),
    ]);
    const thrown = await connect(url, { auth: { crash: true } });
    expect(thrown.error?.data).toEqual({ code: 'ERR_FG_KEY', message: 'The key function threw: no key for you [ERR_FG_KEY]' });
    expect((await connect(url, { auth: {} })).error?.data).toMatchObject({ code: 'ERR_FG_KEY' }); // undefined is no key
    expect((await connect(url, { auth: { name: 'ok' } })).error).toBeUndefined();
  });
});

describe('events (socket.use)', () => {
  /** A server whose sockets record the events their handlers receive, and acknowledge each with 'ok'. */
  async function recording(limit: RateLimitMiddleware, events: string[]) {
    const received: unknown[][] = [];
    const url = await serve([limit], (socket) => {
      for (const event of events)
        socket.on(event, (...args: unknown[]) => {
          const ack = typeof args[args.length - 1] === 'function' ? (args.pop() as (reply: string) => void) : undefined;
          received.push([event, ...args]);
          ack?.('ok');
        });
    });
    return { url, received };
  }

  it('limits each listed event by its own rules and cost, and lets events not listed pass', async () => {
    let now = 1_980_000; // a fixed-window window of 60 s starts here
    const limit = rateLimit({
      now: () => now,
      events: {
        chat: { algorithm: 'fixed-window', limit: 2, windowMs: 60_000 },
        upload: { algorithm: 'fixed-window', limit: 10, windowMs: 60_000, cost: (_socket, _event, args) => (args[0] as { size: number }).size },
      },
    });
    expect(limit.limiters.connection).toBeUndefined(); // events only: connections are not limited
    const { url, received } = await recording(limit, ['chat', 'upload', 'ping']);
    const client = await connected(url);
    expect(await client.emitWithAck('chat', 'a')).toBe('ok');
    now += 20_000;
    expect(await client.emitWithAck('chat', 'b')).toBe('ok');
    expect(await client.emitWithAck('chat', 'c')).toEqual({ error: { code: 'RATE_LIMITED', retryAfterMs: 40_000, rule: 'default', event: 'chat' } });
    expect(await client.emitWithAck('upload', { size: 4 })).toBe('ok');
    expect(await client.emitWithAck('upload', { size: 4 })).toBe('ok');
    expect(await client.emitWithAck('upload', { size: 3 })).toMatchObject({ error: { code: 'RATE_LIMITED', event: 'upload' } });
    expect(await client.emitWithAck('upload', { size: 2 })).toBe('ok'); // what is left fits
    for (let i = 0; i < 5; i++) expect(await client.emitWithAck('ping', i)).toBe('ok');
    expect(received).toEqual([
      ['chat', 'a'],
      ['chat', 'b'],
      ['upload', { size: 4 }],
      ['upload', { size: 4 }],
      ['upload', { size: 2 }],
      ...[0, 1, 2, 3, 4].map((i) => ['ping', i]),
    ]);
  });

  it("delays an event by a leaky bucket's delayMs in mode 'shape', as the HTTP adapters delay a request", async () => {
    const now = 5_000_000; // a still clock: each event queues behind the last, 100 ms apart
    const limit = rateLimit({ now: () => now, events: { chat: { algorithm: 'leaky-bucket', mode: 'shape', limit: 10, windowMs: 1000, burst: 5 } } });
    const { url, received } = await recording(limit, ['chat']);
    const client = await connected(url);
    const started = performance.now();
    const acks = await Promise.all([0, 1, 2].map((i) => client.emitWithAck('chat', i)));
    const elapsed = performance.now() - started;
    expect(acks).toEqual(['ok', 'ok', 'ok']);
    expect(received).toEqual([0, 1, 2].map((i) => ['chat', i]));
    // The third waited out two drips (0, 100 and 200 ms of delay): at least 200 ms, whatever the machine's speed.
    expect(elapsed).toBeGreaterThanOrEqual(195);
  });

  it('puts the events not listed under otherEvents, all counted together; false exempts an event', async () => {
    const limit = rateLimit({ events: { ping: false, chat: { limit: 100, windowMs: 60_000 } }, otherEvents: { limit: 2, windowMs: 60_000 } });
    const { url, received } = await recording(limit, ['a', 'b', 'c', 'ping', 'chat']);
    const client = await connected(url);
    expect(await client.emitWithAck('a')).toBe('ok');
    expect(await client.emitWithAck('b')).toBe('ok');
    // A new name buys no new budget.
    expect(await client.emitWithAck('c')).toMatchObject({ error: { code: 'RATE_LIMITED', event: 'c' } });
    for (let i = 0; i < 3; i++) expect(await client.emitWithAck('ping')).toBe('ok');
    expect(await client.emitWithAck('chat')).toBe('ok');
    expect(received.map(([event]) => event)).toEqual(['a', 'b', 'ping', 'ping', 'ping', 'chat']);
  });

  it('tells an emitter without an ack by a rate_limited event (the name is an option), and delivers nothing', async () => {
    let now = 3_000_000;
    const limit = rateLimit({ now: () => now, events: { chat: { algorithm: 'fixed-window', limit: 1, windowMs: 10_000 } } });
    const { url, received } = await recording(limit, ['chat']);
    const client = await connected(url);
    client.emit('chat', 'first');
    now += 4_000;
    const told = next(client, 'rate_limited');
    client.emit('chat', 'second');
    expect(await told).toEqual({ error: { code: 'RATE_LIMITED', retryAfterMs: 6_000, rule: 'default', event: 'chat' } });
    expect(received).toEqual([['chat', 'first']]);

    const renamed = await recording(rateLimit({ deniedEvent: 'slow_down', events: { chat: { limit: 1, windowMs: 10_000, prefix: 'renamed:' } } }), ['chat']);
    const other = await connected(renamed.url);
    other.emit('chat', 'first');
    const slowDown = next(other, 'slow_down');
    other.emit('chat', 'second');
    expect(await slowDown).toMatchObject({ error: { code: 'RATE_LIMITED', event: 'chat' } });
  });

  it('disconnects a socket denied 3 times within the period, and not one denied less often', async () => {
    let now = 4_000_000;
    const limit = rateLimit({
      now: () => now,
      events: { chat: { algorithm: 'fixed-window', limit: 1, windowMs: 1_000_000 } },
      disconnectAfter: { breaches: 3, windowMs: 60_000 },
    });
    const { url } = await recording(limit, ['chat']);
    const client = await connected(url);
    expect(await client.emitWithAck('chat')).toBe('ok');
    for (let i = 0; i < 2; i++) expect(await client.emitWithAck('chat')).toMatchObject({ error: { code: 'RATE_LIMITED' } });
    now += 60_000; // those two breaches are out of the period
    for (let i = 0; i < 2; i++) expect(await client.emitWithAck('chat')).toMatchObject({ error: { code: 'RATE_LIMITED' } });
    expect(client.connected).toBe(true);
    const disconnected = next(client, 'disconnect');
    // The third breach within 60 s: still answered, then the server disconnects.
    expect(await client.emitWithAck('chat')).toMatchObject({ error: { code: 'RATE_LIMITED' } });
    expect(await disconnected).toBe('io server disconnect');
  });

  it("holds a concurrency rule's lease on an event until its handler acknowledges it", async () => {
    const acks: ((reply: string) => void)[] = [];
    const limit = rateLimit({ events: { render: { algorithm: 'concurrency', limit: 1, windowMs: 60_000 } } });
    const url = await serve([limit], (socket) => socket.on('render', (ack: (reply: string) => void) => acks.push(ack)));
    const client = await connected(url);
    const first = client.emitWithAck('render');
    await vi.waitFor(() => expect(acks).toHaveLength(1));
    expect(await client.emitWithAck('render')).toMatchObject({ error: { code: 'RATE_LIMITED', event: 'render' } }); // one in flight
    acks[0]?.('done');
    expect(await first).toBe('done');
    // The lease was given back before the ack left (a memory store answers within microtasks): the next one passes.
    const again = client.emitWithAck('render');
    await vi.waitFor(() => expect(acks).toHaveLength(2));
    acks[1]?.('again');
    expect(await again).toBe('again');
  });

  it('answers hostile input without crashing: a huge cost, numeric and prototype event names, args that throw', async () => {
    const limit = rateLimit({
      events: {
        upload: { limit: 10, windowMs: 60_000, cost: (_socket, _event, args) => (args[0] as { size: number }).size },
        42: { limit: 1, windowMs: 60_000 },
      },
      otherEvents: { limit: 3, windowMs: 60_000 },
    });
    const { url, received } = await recording(limit, ['upload', '42', '__proto__', 'constructor', 'toString']);
    const client = await connected(url);
    // A cost far above the capacity can never pass: said with retryAfterMs null (Infinity is no JSON number).
    expect(await client.emitWithAck('upload', { size: 1e9 })).toEqual({
      error: { code: 'RATE_LIMITED', retryAfterMs: null, rule: 'default', event: 'upload' },
    });
    // A cost that is no positive integer, and a cost function that throws on what the client sent, are ERR_FG_COST.
    expect(await client.emitWithAck('upload', { size: 1e20 })).toEqual({
      error: { code: 'ERR_FG_COST', message: 'cost must be a positive integer, got 100000000000000000000. [ERR_FG_COST]' },
    });
    expect(await client.emitWithAck('upload', null)).toEqual({
      error: { code: 'ERR_FG_COST', message: expect.stringMatching(/^The cost function threw: Cannot read properties of null/) },
    });
    expect(await client.emitWithAck('upload', { size: '3' })).toMatchObject({ error: { code: 'ERR_FG_COST' } });
    // Socket.IO lets numbers through as event names: 42 is the event '42'.
    expect(await client.emitWithAck(42 as unknown as string, 'x')).toBe('ok');
    expect(await client.emitWithAck(42 as unknown as string, 'y')).toMatchObject({ error: { code: 'RATE_LIMITED', event: '42' } });
    // Names of Object.prototype's members are events like any other (otherEvents, 3 together).
    expect(await client.emitWithAck('__proto__')).toBe('ok');
    expect(await client.emitWithAck('constructor')).toBe('ok');
    expect(await client.emitWithAck('toString')).toBe('ok');
    expect(await client.emitWithAck('constructor')).toMatchObject({ error: { code: 'RATE_LIMITED', event: 'constructor' } });
    expect(await client.emitWithAck('upload', { size: 10 })).toBe('ok'); // nothing above took units
    expect(received.map(([event]) => event)).toEqual(['42', '__proto__', 'constructor', 'toString', 'upload']);
  });

  it("hands a bad key or cost to the socket's 'error' listeners, as Socket.IO does with a middleware's errors", async () => {
    const seen: unknown[] = [];
    const limit = rateLimit({ events: { chat: { limit: 5, windowMs: 60_000, key: () => '' } } });
    const url = await serve([limit], (socket) => socket.on('error', (error) => seen.push(error)));
    const client = await connected(url);
    client.emit('chat', 'no ack');
    await vi.waitFor(() => expect(seen).toHaveLength(1));
    expect(seen[0]).toBeInstanceOf(FloodgateError);
    expect(seen[0]).toMatchObject({ code: 'ERR_FG_KEY' });
    expect(client.connected).toBe(true);
  });

  it('survives a client that disconnects while its event is decided: nothing delivered, nothing thrown', async () => {
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const limit = rateLimit({
      events: {
        slow: {
          limit: 1,
          windowMs: 60_000,
          cost: async () => {
            await held;
            return 1;
          },
        },
      },
    });
    const decided: boolean[] = [];
    limit.limiters.events.slow?.on('allowed', () => decided.push(true));
    limit.limiters.events.slow?.on('limited', () => decided.push(false));
    const gone: Promise<unknown>[] = [];
    const received: unknown[] = [];
    const url = await serve([limit], (socket) => {
      gone.push(once(socket, 'disconnect'));
      socket.on('slow', (...args) => received.push(args));
    });
    const client = await connected(url);
    client.emit('slow', 'allowed, once the client is gone', () => {});
    client.emit('slow', 'denied, once the client is gone', () => {});
    client.emit('slow', 'denied, without an ack');
    client.disconnect();
    await gone[0];
    release();
    await vi.waitFor(() => expect(decided).toEqual([true, false, false]));
    await new Promise((resolve) => setImmediate(resolve)); // Socket.IO dispatches on the next tick
    expect(received).toEqual([]);
    expect((await connect(url)).error).toBeUndefined(); // and the server goes on
  });
});

describe('options', () => {
  it('refuses bad options when rateLimit() is called, naming the part', () => {
    expect(() => rateLimit({ events: { chat: { cost: 2 } } })).toThrow(
      expect.objectContaining({ code: 'ERR_FG_RULES', message: expect.stringMatching(/^events\.chat: /) }),
    );
    expect(() => rateLimit({ events: { chat: { limit: 1, windowMs: 1000, limiter: createLimiter({ limit: 1, windowMs: 1000 }) } } })).toThrow(
      expect.objectContaining({ code: 'ERR_FG_OPTION', message: expect.stringContaining("got both 'limiter' and 'limit', 'windowMs'") }),
    );
    expect(() => rateLimit({ deniedEvent: 'disconnect', events: { chat: { limit: 1, windowMs: 1000 } } })).toThrow(
      expect.objectContaining({ code: 'ERR_FG_OPTION' }),
    );
    expect(() => rateLimit({ disconnectAfter: { breaches: 0, windowMs: 1000 } })).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
    expect(() => rateLimit({ limit: 1, windowMs: 1000, cost: 0 })).toThrow(expect.objectContaining({ code: 'ERR_FG_COST' }));
    expect(() => rateLimit({ limit: 1, windowMs: 1000, headers: 'draft-8' } as never)).toThrow(expect.objectContaining({ code: 'ERR_FG_UNKNOWN_OPTION' }));
    expect(() => rateLimit({ otherEvents: { limit: 1, windowMs: 1000, key: 'ip' as never } })).toThrow(
      expect.objectContaining({ code: 'ERR_FG_OPTION', message: expect.stringMatching(/^otherEvents: key must be/) }),
    );
  });
});

describe('on Redis', () => {
  const redis = useRedisServer();

  it('shares one limit between two servers on one Redis: connections and events', async () => {
    const now = () => Date.UTC(2100, 0, 1); // clock: 'client', frozen: retryAfterMs is exact
    const options = {
      algorithm: 'fixed-window' as const,
      limit: 3,
      windowMs: 60_000,
      now,
      timeoutMs: 30_000,
      events: { chat: { algorithm: 'fixed-window' as const, limit: 2, windowMs: 60_000 } },
    };
    const urls = [
      await serve([rateLimit({ ...options, store: new RedisStore({ client: redis.client, clock: 'client' }) })], (socket) =>
        socket.on('chat', (ack) => ack('ok')),
      ),
      await serve([rateLimit({ ...options, store: new RedisStore({ client: redis.client, clock: 'client' }) })], (socket) =>
        socket.on('chat', (ack) => ack('ok')),
      ),
    ];
    const [one, two] = [await connected(urls[0] as string), await connected(urls[1] as string)];
    expect(await one.emitWithAck('chat')).toBe('ok');
    expect(await two.emitWithAck('chat')).toBe('ok');
    expect(await one.emitWithAck('chat')).toEqual({ error: { code: 'RATE_LIMITED', retryAfterMs: 60_000, rule: 'default', event: 'chat' } });
    expect((await connect(urls[1] as string)).error).toBeUndefined();
    expect((await connect(urls[0] as string)).error?.data).toEqual({ code: 'RATE_LIMITED', retryAfterMs: 60_000, rule: 'default' });
    expect(await redis.client.exists('fg:{127.0.0.1}:default:v2', 'fg:event:chat:{127.0.0.1}:default:v2')).toBe(2);
  });

  it('follows onStoreError when Redis is gone: allow admits, deny refuses (RATE_LIMITER_UNAVAILABLE), a limiter decides instead', async () => {
    const server = await startRedis();
    const client = server.client({ maxRetriesPerRequest: 1 });
    client.on('error', () => {}); // ioredis reports each failed reconnect; the limiter's 'error' event reports what matters
    await once(client, 'ready');
    const policies: NonNullable<LimiterOptions['onStoreError']>[] = ['allow', 'deny', createLimiter({ limit: 2, windowMs: 60_000, prefix: 'insurance:' })];
    const urls: string[] = [];
    for (const [i, onStoreError] of policies.entries()) {
      const limit = rateLimit({
        store: new RedisStore({ client }),
        prefix: `policy-${i}:`,
        timeoutMs: 500,
        onStoreError,
        limit: 5,
        windowMs: 60_000,
        events: { chat: { limit: 5, windowMs: 60_000 } },
      });
      limit.limiters.connection?.on('error', () => {});
      limit.limiters.events.chat?.on('error', () => {});
      urls.push(await serve([limit], (socket) => socket.on('chat', (ack) => ack('ok'))));
    }
    const [allow, deny, insured] = urls as [string, string, string];
    const admitted = await connected(deny); // while Redis is up
    await server.stop();
    // A client that is not connected is not asked: the store fails at once, and the policy decides.
    expect((await connect(allow)).error).toBeUndefined();
    const refused = await connect(deny);
    expect(refused.error?.message).toBe('Service unavailable: the rate limiter cannot reach its store.');
    expect(refused.error?.data).toEqual({ code: 'RATE_LIMITER_UNAVAILABLE', retryAfterMs: 1_000, rule: 'default' });
    expect(await admitted.emitWithAck('chat')).toEqual({ error: { code: 'RATE_LIMITER_UNAVAILABLE', retryAfterMs: 1_000, rule: 'default', event: 'chat' } });
    // The insurance limiter decides the connection and the events alike: 2 calls of this client in all.
    const first = await connected(insured);
    expect(await first.emitWithAck('chat')).toBe('ok');
    expect(await first.emitWithAck('chat')).toMatchObject({ error: { code: 'RATE_LIMITED', rule: 'default', event: 'chat' } });
    expect((await connect(insured)).error?.data).toMatchObject({ code: 'RATE_LIMITED', rule: 'default' });
  });
});
