import { describe, expect, it } from 'vitest';
import { STATE_VERSION } from '../codec.js';
import { createLimiter } from '../limiter.js';
import { type KeyValueBackend, KeyValueStore, type StateChange } from './key-value-store.js';

/** A backend over a Map, synchronous inside (so atomic), with a clock of its own and hooks to misbehave. */
function mapBackend(clock: () => number = Date.now) {
  const data = new Map<string, string>();
  const seen: { keys: readonly string[]; readOnly: boolean }[] = [];
  let decideTwice = false;
  const backend: KeyValueBackend & { data: Map<string, string>; seen: typeof seen; decideTwice(on: boolean): void } = {
    data,
    seen,
    decideTwice(on) {
      decideTwice = on;
    },
    async transact<T>(keys: readonly string[], decide: (values: readonly (string | null)[], now: number) => StateChange<T>, options: { readOnly: boolean }) {
      seen.push({ keys, readOnly: options.readOnly });
      const read = () => keys.map((key) => data.get(key) ?? null);
      // An optimistic backend that lost a race decides again on what it reads then.
      if (decideTwice) decide(read(), clock());
      const { writes, result } = decide(read(), clock());
      if (options.readOnly) expect(writes).toEqual([]);
      for (const { key, value, ttlMs } of writes) {
        if (value === null) data.delete(key);
        else {
          expect(ttlMs).toBeGreaterThanOrEqual(1);
          data.set(key, value);
        }
      }
      return result;
    },
  };
  return backend;
}

describe('KeyValueStore', () => {
  it(`keeps each rule's state under ${'`'}<prefix><limiter prefix>{<key>}:<rule>:v<STATE_VERSION>${'`'}, as text of the one encoding`, async () => {
    const backend = mapBackend();
    const store = new KeyValueStore(backend, { prefix: 'app/', clock: 'client' });
    const limiter = createLimiter({
      rules: [
        { name: 'per-ip', scope: 'ip', algorithm: 'fixed-window', limit: 5, windowMs: 60_000 },
        { name: 'all', scope: 'global', algorithm: 'gcra', limit: 100, windowMs: 60_000 },
      ],
      store,
      now: () => 1_800_000_030_000,
    });
    await limiter.consume({ ip: '203.0.113.9' });
    expect([...backend.data.keys()]).toEqual([`app/fg:{%ip:203.0.113.9}:per-ip:v${STATE_VERSION}`, `app/fg:{%global}:all:v${STATE_VERSION}`]);
    expect(backend.data.get(`app/fg:{%ip:203.0.113.9}:per-ip:v${STATE_VERSION}`)).toBe('fw:1800000060000:1800000060000,1');
    expect(backend.data.get(`app/fg:{%global}:all:v${STATE_VERSION}`)).toBe('gc:1800000030600:600,1800000030000,600,1');
  });

  it("decides on the backend's clock by default: limiters with wildly wrong clocks share one state", async () => {
    const backend = mapBackend(() => 1_800_000_000_000);
    const store = new KeyValueStore(backend);
    const skewed = [0, 1_000_000_000_000, 4_000_000_000_000].map((at) =>
      createLimiter({ algorithm: 'fixed-window', limit: 3, windowMs: 60_000, store, prefix: 'shared:', now: () => at }),
    );
    const decisions = [];
    for (const limiter of [...skewed, ...skewed]) decisions.push((await limiter.consume('k')).allowed);
    expect(decisions).toEqual([true, true, true, false, false, false]);
  });

  it('decides the same when the backend decides a transaction twice (an optimistic backend that retried)', async () => {
    const backend = mapBackend();
    backend.decideTwice(true);
    const limiter = createLimiter({
      algorithm: 'sliding-log',
      limit: 2,
      windowMs: 60_000,
      store: new KeyValueStore(backend, { clock: 'client' }),
      now: () => 0,
    });
    expect([(await limiter.consume('k')).remaining, (await limiter.consume('k')).remaining, (await limiter.consume('k')).allowed]).toEqual([1, 0, false]);
  });

  it('asks for a read-only transaction for a peek, and reads nothing for a release without concurrency rules', async () => {
    const backend = mapBackend();
    const limiter = createLimiter({ limit: 2, windowMs: 60_000, store: new KeyValueStore(backend) });
    await limiter.peek('k');
    await limiter.release('k', '1.lease');
    expect(backend.seen.map((t) => t.readOnly)).toEqual([true]);
  });

  it('reads text it cannot decode as no state, overwrites it, and no other key suffers', async () => {
    const backend = mapBackend();
    const store = new KeyValueStore(backend, { clock: 'client' });
    const limiter = createLimiter({ algorithm: 'token-bucket', limit: 2, windowMs: 60_000, store, now: () => 5_000 });
    await limiter.consume('healthy');
    const [victim] = store.keysOf('victim', { prefix: 'fg:', rules: limiter.rules });
    for (const poison of ['tb:0:99999999999999999999,0,1,1', 'fw:1:1,1', 'tb:x', '', 'tb:0:1,1,0,0', 'tb:0:1,2,3,4|0:0:0:0']) {
      backend.data.set(victim as string, poison);
      expect((await limiter.consume('victim')).remaining, poison).toBe(1);
      await limiter.reset('victim');
    }
    expect((await limiter.peek('healthy')).remaining).toBe(1);
  });

  it('answers a backend that fails with a store error that onStoreError decides, and a backend that never answers within timeoutMs', async () => {
    const failing: KeyValueBackend = { transact: () => Promise.reject(new Error('connection refused')) };
    const deny = createLimiter({ limit: 2, windowMs: 60_000, store: new KeyValueStore(failing), onStoreError: 'deny' });
    deny.on('error', () => {});
    expect(await deny.consume('k')).toMatchObject({ allowed: false, storeError: { message: 'connection refused' } });
    const hung: KeyValueBackend = { transact: () => new Promise(() => {}) };
    const allow = createLimiter({ limit: 2, windowMs: 60_000, store: new KeyValueStore(hung), timeoutMs: 50 });
    allow.on('error', () => {});
    expect((await allow.consume('k')).storeError).toMatchObject({ code: 'ERR_FG_STORE_TIMEOUT' });
  });

  it('refuses a backend without transact(), and a clock other than server or client', () => {
    expect(() => new KeyValueStore({} as KeyValueBackend)).toThrow(/transact\(\) method/);
    expect(() => new KeyValueStore(mapBackend(), { clock: 'redis' as 'server' })).toThrow(/clock must be 'server' or 'client'/);
  });
});
