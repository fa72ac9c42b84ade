/*
 * Who is limited most (analytics: true, limiter.top()): the space-saving
 * summary's guarantees as properties, then top() over two limiters sharing a
 * memory store and a RedisStore (a private redis-server), with the limiters'
 * clocks injected.
 */
import { useRedisServer } from '@floodgate/test-support';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SpaceSaving } from './analytics.js';
import { createLimiter, type LimiterEvents } from './limiter.js';
import type { LimiterOptions } from './options.js';
import { MemoryStore } from './stores/memory-store.js';
import { RedisStore } from './stores/redis-store.js';
import type { Store } from './stores/types.js';

const redisServer = useRedisServer();

describe('SpaceSaving', () => {
  it('never counts under the truth, nor over it by more than error; holds every key above total/size; never more than size counters', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 8 }), fc.array(fc.integer({ min: 0, max: 20 }), { maxLength: 400 }), (size, stream) => {
        const summary = new SpaceSaving(size);
        const truth = new Map<string, number>();
        for (const n of stream) {
          const key = `k${n}`;
          summary.add(key);
          truth.set(key, (truth.get(key) ?? 0) + 1);
        }
        expect(summary.counters.size).toBeLessThanOrEqual(size);
        for (const [key, { count, error }] of summary.counters) {
          const real = truth.get(key) ?? 0;
          expect(count).toBeGreaterThanOrEqual(real);
          expect(count - error).toBeLessThanOrEqual(real);
        }
        for (const [key, real] of truth) if (real > stream.length / size) expect(summary.counters.has(key)).toBe(true);
      }),
    );
  });

  it('keeps its size under a stream of new keys (key rotation)', () => {
    const summary = new SpaceSaving(50);
    for (let i = 0; i < 100_000; i++) summary.add(`rotating:${i}`);
    for (let i = 0; i < 1_000; i++) summary.add('hot');
    expect(summary.counters.size).toBe(50);
    expect(summary.counters.get('hot')?.count).toBeGreaterThanOrEqual(1_000);
  });
});

let prefixes = 0;

const stores: [string, () => Store][] = [
  ['MemoryStore', () => new MemoryStore()],
  ['RedisStore', () => new RedisStore({ client: redisServer.client, clock: 'client' })],
];

describe.each(stores)('top() on the %s', (_, makeStore) => {
  const setup = (options: LimiterOptions) => {
    let now = Date.UTC(2100, 0, 1);
    const clock = { now: () => now, advance: (ms: number) => (now += ms) };
    const store = makeStore();
    const prefix = `top${prefixes++}:`;
    const make = () => createLimiter({ store, prefix, now: clock.now, timeoutMs: 30_000, analytics: { periodMs: 60_000, size: 10 }, ...options });
    return { clock, make };
  };

  it('adds up the denied calls of every process by the key of the rule that denied them, most first; admitted calls count for nothing', async () => {
    const { make } = setup({
      rules: [
        { name: 'per-ip', scope: 'ip', algorithm: 'fixed-window', limit: 2, windowMs: 60_000 },
        { name: 'per-user', scope: 'user', algorithm: 'fixed-window', limit: 1, windowMs: 60_000 },
      ],
    });
    const a = make();
    const b = make();
    const calls = async (limiter: ReturnType<typeof make>, keys: { ip: string; user: string }, n: number) => {
      for (let i = 0; i < n; i++) await limiter.consume(keys);
    };
    await calls(a, { ip: '203.0.113.9', user: 'mallory' }, 5); // 1 admitted, then 4 denied by per-user (mallory)
    await calls(b, { ip: '203.0.113.9', user: 'mallory' }, 3); // 3 denied by per-user
    await calls(b, { ip: '198.51.100.1', user: 'u1' }, 1); // admitted
    await calls(b, { ip: '198.51.100.1', user: 'u2' }, 1); // admitted
    await calls(a, { ip: '198.51.100.1', user: 'u3' }, 2); // denied by per-ip (198.51.100.1, its 3rd and 4th)
    // Each process writes its counts every few seconds, and at once when asked for top(): b's, here.
    expect((await a.top()).items.find((item) => item.key === 'mallory')?.denied).toBe(4);
    await b.top();
    const top = await a.top();
    expect(top.items).toEqual([
      { key: 'mallory', scope: 'user', denied: 7, error: 0 },
      { key: '198.51.100.1', scope: 'ip', denied: 2, error: 0 },
    ]);
    expect((await b.top({ n: 1 })).items).toEqual([top.items[0]]);
  });

  it('covers the period under way and the one before: older denials drop out', async () => {
    const { make, clock } = setup({ algorithm: 'fixed-window', limit: 1, windowMs: 1_000 });
    const limiter = make();
    await limiter.consume('old');
    await limiter.consume('old');
    expect((await limiter.top()).items).toEqual([{ key: 'old', scope: 'key', denied: 1, error: 0 }]);
    clock.advance(60_000);
    await limiter.consume('new');
    await limiter.consume('new');
    expect((await limiter.top()).items.map((item) => item.key)).toEqual(['new', 'old']);
    clock.advance(60_000);
    const top = await limiter.top();
    expect(top.items.map((item) => item.key)).toEqual(['new']);
    expect(top.sinceMs % 60_000).toBe(0);
  });

  it('counts a denial the local deny cache answers, as the store would have', async () => {
    const { make } = setup({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000, localDenyCache: true });
    const limiter = make();
    for (let i = 0; i < 4; i++) await limiter.consume('k');
    expect((await limiter.top()).items).toEqual([{ key: 'k', scope: 'key', denied: 3, error: 0 }]);
  });
});

describe('analytics options', () => {
  it('are off by default: top() says how to turn them on', async () => {
    await expect(createLimiter({ limit: 1, windowMs: 1000 }).top()).rejects.toMatchObject({
      code: 'ERR_FG_OPTION',
      message: expect.stringContaining('analytics: true'),
    });
  });

  it('refuse bad values, bad top() options, and a store that keeps no records', async () => {
    for (const analytics of [{ periodMs: 999 }, { size: 0 }, { size: 10_001 }, 'yes', null, { periodMs: 1.5 }]) {
      expect(() => createLimiter({ limit: 1, windowMs: 1000, analytics } as never)).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
    }
    expect(() => createLimiter({ limit: 1, windowMs: 1000, analytics: { every: 1 } } as never)).toThrow(
      expect.objectContaining({ code: 'ERR_FG_UNKNOWN_OPTION' }),
    );
    const limiter = createLimiter({ limit: 1, windowMs: 1000, analytics: true });
    await expect(limiter.top({ n: 0 })).rejects.toMatchObject({ code: 'ERR_FG_OPTION' });
    await expect(limiter.top({ count: 5 } as never)).rejects.toMatchObject({ code: 'ERR_FG_UNKNOWN_OPTION' });
    const store = new MemoryStore();
    const noRecords: Store = {
      consume: store.consume.bind(store),
      peek: store.peek.bind(store),
      refund: store.refund.bind(store),
      reset: store.reset.bind(store),
    };
    expect(() => createLimiter({ limit: 1, windowMs: 1000, store: noRecords, analytics: true })).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
  });

  it('report a write that fails, and write the counts again next time', async () => {
    const store = new MemoryStore();
    const limiter = createLimiter({ store, limit: 1, windowMs: 60_000, analytics: true });
    const errors: LimiterEvents['error'][] = [];
    limiter.on('error', (event) => errors.push(event));
    const records = store.records as NonNullable<Store['records']>;
    const set = records.set.bind(records);
    // A store that fails to write: not something a memory store does, so provoked by hand, once.
    records.set = () => {
      records.set = set;
      return Promise.reject(new Error('the store is gone'));
    };
    await limiter.consume('k');
    await limiter.consume('k');
    await expect(limiter.top()).rejects.toMatchObject({ code: 'ERR_FG_STORE_UNAVAILABLE' });
    expect(errors.map((e) => e.operation)).toEqual(['analytics']);
    expect((await limiter.top()).items).toEqual([{ key: 'k', scope: 'key', denied: 1, error: 0 }]);
    await limiter.close();
  });
});
