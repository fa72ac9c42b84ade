/*
 * RedisStore driven by a real node-redis client (the `redis` package), against
 * a private redis-server. ioredis, which the rest of the Redis tests use, only
 * inspects and disturbs the server here (DUMP, MONITOR, SCRIPT FLUSH).
 */
import { startRedis, useRedisServer } from '@floodgate/test-support';
import { createClient, type RedisClientType } from 'redis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createLimiter } from '../limiter.js';
import type { LimiterOptions } from '../options.js';
import { LIBRARY } from './redis/library.generated.js';
import { RedisStore } from './redis-store.js';

const redisServer = useRedisServer();
let client: RedisClientType;
let prefixes = 0;
const fresh = (name: string) => `${name}${prefixes++}:`;
/** Far above any round trip: a loaded machine cannot turn a decision into a store error. */
const timeoutMs = 30_000;
/** The limiters' clock (RedisStore clock: 'client'): ahead of Redis's own, as that clock's absolute expiries need. */
const start = Date.UTC(2100, 0, 1, 0, 0, 30);

/**
 * A limiter on node-redis that decides with its own clock (RedisStore clock: 'client'),
 * and fails loudly: a store error denies, and is recorded.
 */
function limiterOnNodeRedis(options: LimiterOptions, now = () => start, mode?: 'functions' | 'scripts') {
  const errors: unknown[] = [];
  const prefix = fresh('node-redis');
  const limiter = createLimiter({
    ...options,
    store: new RedisStore({ client, clock: 'client', ...(mode === undefined ? {} : { mode }) }),
    prefix,
    now,
    timeoutMs,
    onStoreError: 'deny',
  });
  limiter.on('error', ({ error }) => errors.push(error));
  return { limiter, errors, prefix };
}

beforeAll(async () => {
  client = createClient({ url: `redis://127.0.0.1:${redisServer.server.port}` });
  client.on('error', () => {}); // connection errors surface as rejected commands
  await client.connect();
});

afterAll(async () => {
  await client?.close();
});

describe('RedisStore with a node-redis client', () => {
  it('consumes until denied, says when to retry, and refunds, peeks and resets', async () => {
    const { limiter, errors } = limiterOnNodeRedis({ algorithm: 'fixed-window', limit: 3, windowMs: 60_000 });
    const remaining: number[] = [];
    for (let i = 0; i < 3; i++) {
      const decision = await limiter.consume('user:42');
      expect(decision.allowed).toBe(true);
      remaining.push(decision.remaining);
    }
    expect(remaining).toEqual([2, 1, 0]);
    // The window started at 00:00:00 and the clock reads 00:00:30.
    expect(await limiter.consume('user:42')).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 30_000, resetMs: 30_000, rule: 'default' });
    expect((await limiter.consume('user:42', { cost: 4 })).retryAfterMs).toBe(Number.POSITIVE_INFINITY);
    await limiter.refund('user:42', { cost: 1 });
    expect((await limiter.peek('user:42')).remaining).toBe(1);
    await limiter.reset('user:42');
    expect((await limiter.peek('user:42')).remaining).toBe(3);
    expect(errors).toEqual([]);
  });

  it('decides a multi-rule limiter in one FCALL, names the binding rule, and leaves a denied call no trace', async () => {
    let now = start;
    const { limiter, errors, prefix } = limiterOnNodeRedis(
      {
        rules: [
          { name: 'per-minute', algorithm: 'fixed-window', limit: 1, windowMs: 60_000 },
          { name: 'per-hour', algorithm: 'sliding-log', limit: 3, windowMs: 3_600_000 },
          { name: 'cell', algorithm: 'gcra', limit: 10, windowMs: 3_600_000 },
        ],
      },
      () => now,
    );
    const admin = redisServer.client;
    const keys = (limiter.store as RedisStore).keysOf('+15550100', { prefix, rules: limiter.rules, now: () => now });

    await limiter.consume('+15550100'); // loads the library
    const before = await Promise.all(keys.map((key) => admin.dumpBuffer(key)));
    expect(before.every((dump) => dump !== null)).toBe(true);
    const monitor = await admin.duplicate().monitor();
    const commands: string[] = [];
    const marker = `end-${prefixes}`;
    const markerSeen = new Promise<void>((resolve) => {
      monitor.on('monitor', (_time: string, args: string[], source: string) => {
        if (source === 'lua') return;
        if (String(args[0]).toLowerCase() === 'echo' && args[1] === marker) resolve();
        else commands.push(String(args[0]).toLowerCase());
      });
    });
    const denied = await limiter.consume('+15550100');
    await admin.echo(marker);
    await markerSeen;
    monitor.disconnect();
    expect(commands).toEqual(['fcall']);
    expect(denied).toMatchObject({ allowed: false, rule: 'per-minute', retryAfterMs: 30_000 });
    const after = await Promise.all(keys.map((key) => admin.dumpBuffer(key)));
    expect(after.map((b) => b?.toString('hex'))).toEqual(before.map((b) => b?.toString('hex')));

    now += 60_000;
    expect(await limiter.consume('+15550100')).toMatchObject({ allowed: true, rule: 'per-minute', remaining: 0 });
    now += 60_000;
    expect(await limiter.consume('+15550100')).toMatchObject({ allowed: true, rule: 'per-minute', remaining: 0 });
    now += 60_000;
    expect(await limiter.consume('+15550100')).toMatchObject({ allowed: false, rule: 'per-hour' });
    expect((await limiter.consume('+15550199')).allowed).toBe(true);
    expect(errors).toEqual([]);
  });

  it("loads the library again after FUNCTION FLUSH: node-redis's error for a missing function says so", async () => {
    const { limiter, errors } = limiterOnNodeRedis({ algorithm: 'sliding-log', limit: 2, windowMs: 60_000 });
    const admin = redisServer.client;
    await admin.call('FUNCTION', 'FLUSH');
    // What RedisStore's check for a missing library is given.
    const missing = await client.fCall(LIBRARY.write, { keys: ['probe'], arguments: [] }).catch((error: unknown) => error);
    expect(missing).toBeInstanceOf(Error);
    expect((missing as Error).message).toMatch(/Function not found/);

    expect(await limiter.consume('k')).toMatchObject({ allowed: true, remaining: 1 });
    await admin.call('FUNCTION', 'FLUSH');
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, remaining: 0 });
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, remaining: 0 });
    expect(errors).toEqual([]);
  });

  it("runs as scripts too: node-redis's NOSCRIPT error starts with NOSCRIPT, and EVAL follows", async () => {
    const { limiter, errors } = limiterOnNodeRedis({ algorithm: 'sliding-log', limit: 2, windowMs: 60_000 }, () => start, 'scripts');
    const script = LIBRARY.scripts.write;
    const admin = redisServer.client;
    await admin.script('FLUSH');
    // What RedisStore's NOSCRIPT check (error instanceof Error && /^NOSCRIPT/.test(message)) is given.
    const noScript = await client.evalSha(script.sha1, { keys: ['probe'], arguments: [] }).catch((error: unknown) => error);
    expect(noScript).toBeInstanceOf(Error);
    expect((noScript as Error).message).toMatch(/^NOSCRIPT /);

    expect(await limiter.consume('k')).toMatchObject({ allowed: true, remaining: 1 });
    expect((await admin.script('EXISTS', script.sha1)) as number[]).toEqual([1]);
    await admin.script('FLUSH');
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, remaining: 0 });
    await admin.script('FLUSH');
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, remaining: 0 });
    expect(errors).toEqual([]);
  });
});

describe('RedisStore with a node-redis client, while Redis is down', () => {
  it('fails fast instead of queueing: nothing decided during the outage is counted when Redis returns', async () => {
    const server = await startRedis();
    const own = createClient({ url: `redis://127.0.0.1:${server.port}`, socket: { reconnectStrategy: () => 50 } });
    own.on('error', () => {});
    await own.connect();
    const errors: unknown[] = [];
    const limiter = createLimiter({
      algorithm: 'fixed-window',
      limit: 5,
      windowMs: 60_000,
      store: new RedisStore({ client: own, clock: 'client' }),
      now: () => start,
      timeoutMs,
      onStoreError: 'allow',
    });
    limiter.on('error', ({ error }) => errors.push(error));
    try {
      expect(await limiter.consume('k')).toMatchObject({ allowed: true, remaining: 4 });
      await server.stop('SIGKILL');
      await vi.waitFor(() => expect(own.isReady).toBe(false));
      const during = await limiter.consume('k');
      // Decided by onStoreError at once (not after timeoutMs), and the call never reaches Redis.
      expect(during.storeError).toMatchObject({ code: 'ERR_FG_STORE_UNAVAILABLE' });
      const restarted = await startRedis([], server.port);
      try {
        await vi.waitFor(() => expect(own.isReady).toBe(true), { timeout: 10_000 });
        // The restarted Redis is empty: had the outage's call been queued, it would have run now and count 1.
        expect(await limiter.consume('k')).toMatchObject({ allowed: true, remaining: 4 });
      } finally {
        await restarted.stop();
      }
    } finally {
      own.destroy();
    }
    expect(errors).toHaveLength(1);
  }, 30_000);
});
