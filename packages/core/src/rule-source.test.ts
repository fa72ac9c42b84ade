import { useRedisServer } from '@floodgate/test-support';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import type { FloodgateError } from './errors.js';
import { createLimiter } from './limiter.js';
import { RedisRuleSource } from './rule-source.js';
import { RedisStore } from './stores/redis-store.js';

const redis = useRedisServer();
const opened: { close(): void }[] = [];
afterEach(() => {
  for (const o of opened.splice(0)) o.close();
});

async function eventually(condition: () => boolean | Promise<boolean>, timeoutMs = 3_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('not in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

let keys = 0;

/** An app instance: its own connection, its own limiter on the shared Redis store, its own rule source. */
async function instance(key: string, pollMs = 30_000) {
  const client = new Redis({ port: redis.server.port, host: '127.0.0.1' });
  opened.push({ close: () => client.disconnect() });
  const errors: FloodgateError[] = [];
  // The limiters' clock stands still (RedisStore clock: 'client'), so no window ends while a test counts calls;
  // timeoutMs is far above any round trip, so a slow moment cannot turn a decision into a store error.
  const limiter = createLimiter({
    algorithm: 'fixed-window',
    limit: 2,
    windowMs: 60_000,
    store: new RedisStore({ client, clock: 'client' }),
    now: () => Date.UTC(2100, 0, 1, 0, 0, 30), // ahead of Redis's clock, as clock: 'client' needs
    timeoutMs: 30_000,
    prefix: `${key}:`,
  });
  const source = new RedisRuleSource({ client, key, pollMs, onError: (e) => errors.push(e) });
  opened.push(source);
  await source.attach(limiter);
  return { client, limiter, source, errors };
}

describe('RedisRuleSource', () => {
  it('pushes published rules to every instance within moments, and new instances start with them', async () => {
    const key = `rules:${keys++}`;
    const a = await instance(key);
    const b = await instance(key);
    await a.source.publish([{ name: 'default', algorithm: 'fixed-window', limit: 5, windowMs: 60_000 }]);
    await eventually(() => a.limiter.rules[0]?.limit === 5 && b.limiter.rules[0]?.limit === 5);
    // Both limiters share the store and now the rules: 5 calls pass, across the instances.
    const results = [];
    for (let i = 0; i < 6; i++) results.push((await (i % 2 ? a : b).limiter.consume('user')).allowed);
    expect(results).toEqual([true, true, true, true, true, false]);
    const late = await instance(key);
    expect(late.limiter.rules[0]?.limit).toBe(5);
  });

  it('rejects invalid rules written to Redis, logs an ERR_FG_RULES error, and keeps the old rules', async () => {
    const key = `rules:${keys++}`;
    const a = await instance(key);
    const b = await instance(key);
    await expect(a.source.publish([{ name: 'default', limit: -1, windowMs: 60_000 }])).rejects.toMatchObject({ code: 'ERR_FG_LIMIT' });
    const bad = JSON.stringify([{ name: 'default', algorithm: 'fixed-window', limit: 0, windowMs: 1 }]);
    await a.client.set(key, bad);
    await a.client.publish(`${key}:changed`, bad);
    await a.client.publish(`${key}:changed`, 'not json');
    await eventually(() => b.errors.length >= 2);
    expect(b.errors.map((e) => e.code)).toEqual(['ERR_FG_RULES', 'ERR_FG_RULES']);
    expect(b.errors[0]?.message).toMatch(/rejected, the limiter keeps its rules: .*limit must be a positive integer/);
    expect(b.limiter.rules[0]?.limit).toBe(2);
    expect((await b.limiter.consume('k')).limit).toBe(2);
  });

  it('catches up by polling when an announcement was missed', async () => {
    const key = `rules:${keys++}`;
    const a = await instance(key, 100);
    await a.client.set(key, JSON.stringify({ algorithm: 'gcra', limit: 9, windowMs: 1_000 })); // no PUBLISH
    await eventually(() => a.limiter.rules[0]?.algorithm === 'gcra');
    expect(a.limiter.rules[0]?.limit).toBe(9);
  });

  it('rejects bad options', () => {
    expect(() => new RedisRuleSource({ client: {} as never })).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
    expect(() => new RedisRuleSource({ client: redis.client as never, pollMs: -1 })).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
    // Above 2^31 - 1 ms, setInterval fires every millisecond: a poll of "once a month" would hammer Redis.
    expect(() => new RedisRuleSource({ client: redis.client as never, pollMs: 2 ** 31 })).toThrow(
      expect.objectContaining({ code: 'ERR_FG_OPTION', message: expect.stringMatching(/to 2147483647/) }),
    );
    expect(() => new RedisRuleSource({ client: redis.client as never, pollMs: 2 ** 31 - 1 })).not.toThrow();
  });

  it('opens one subscription however many limiters attach at once, and closes it', async () => {
    const key = `rules:${keys++}`;
    const client = new Redis({ port: redis.server.port, host: '127.0.0.1' });
    opened.push({ close: () => client.disconnect() });
    const subscribers = async () => (await redis.client.pubsub('NUMSUB', `${key}:changed`))[1];
    const source = new RedisRuleSource({ client, key });
    opened.push(source);
    const limiters = [0, 1, 2].map((i) => createLimiter({ limit: 2, windowMs: 60_000, prefix: `attach${i}:` }));
    await Promise.all(limiters.map((limiter) => source.attach(limiter)));
    expect(await subscribers()).toBe(1);
    await source.publish({ limit: 7, windowMs: 60_000 });
    await eventually(() => limiters.every((limiter) => limiter.rules[0]?.limit === 7));
    source.close();
    await eventually(async () => (await subscribers()) === 0);
  });
});
