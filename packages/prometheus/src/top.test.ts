/*
 * instrument(limiter, { top: { n } }): floodgate_top_denied{limiter,scope,key}
 * from limiter.top() on each scrape, read from a real registry's output: at
 * most n series per limiter whatever the number of keys denied, keys that
 * drop out of the top gone, a store that fails or hangs leaving the scrape
 * whole, a limiter without analytics refused. On the memory store and on a
 * private redis-server.
 */
import { createLimiter, type LimiterOptions, MemoryStore, RedisStore, type Store } from '@floodgate/core';
import { useRedisServer } from '@floodgate/test-support';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { instrument } from './index.js';

const redisServer = useRedisServer();

/** The floodgate_top_denied series in Prometheus text output: `limiter/scope/key` -> value. */
function topSeries(text: string): Map<string, number> {
  const series = new Map<string, number>();
  for (const line of text.split('\n')) {
    const match = /^floodgate_top_denied\{limiter="([^"]*)",scope="([^"]*)",key="([^"]*)"\} (\S+)$/.exec(line);
    if (match !== null) series.set(`${match[1]}/${match[2]}/${match[3]}`, Number(match[4]));
  }
  return series;
}

function sample(text: string, metric: string, labels: Record<string, string>): number | undefined {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${metric}{`)) continue;
    if (wanted.every((label) => line.includes(label))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

/** The limiters' clock: it stands still, so every denial falls in one analytics period. */
const frozenClock = () => Date.UTC(2100, 0, 1, 0, 0, 30);

let prefixes = 0;

/** A limiter that admits one call per key a minute and counts its denials (in summaries of 50 keys). */
function deniedLimiter(store: Store, options: Partial<LimiterOptions> = {}) {
  const rule = options.rules === undefined ? { algorithm: 'fixed-window', limit: 1, windowMs: 60_000 } : {};
  return createLimiter({
    store,
    prefix: `prom-top${prefixes++}:`,
    ...rule,
    now: frozenClock,
    analytics: { periodMs: 60_000, size: 50 },
    ...options,
  } as LimiterOptions);
}

/** Calls `key` 1 + `denials` times: `denials` of them denied. */
async function deny(limiter: ReturnType<typeof deniedLimiter>, key: string, denials: number): Promise<void> {
  for (let i = 0; i <= denials; i++) await limiter.consume(key);
}

describe('instrument(limiter, { top }) on the memory store', () => {
  it('exports exactly n series per limiter, the keys denied most, however many keys are denied', async () => {
    const registry = new Registry();
    const api = deniedLimiter(new MemoryStore());
    const login = deniedLimiter(new MemoryStore());
    instrument(api, { name: 'api', registry, top: { n: 5 } });
    instrument(login, { name: 'login', registry, top: { n: 2 } });
    // 30 keys denied: key k<i> i times.
    for (let i = 1; i <= 30; i++) await deny(api, `k${i}`, i);
    for (const [key, denials] of [
      ['203.0.113.9', 9],
      ['198.51.100.1', 4],
      ['192.0.2.1', 1],
    ] as const)
      await deny(login, key, denials);

    const text = await registry.metrics();
    expect(text).toContain('# TYPE floodgate_top_denied gauge');
    expect(topSeries(text)).toEqual(
      new Map([
        ['api/key/k30', 30],
        ['api/key/k29', 29],
        ['api/key/k28', 28],
        ['api/key/k27', 27],
        ['api/key/k26', 26],
        ['login/key/203.0.113.9', 9],
        ['login/key/198.51.100.1', 4],
      ]),
    );
  });

  it('drops a key that left the top n at the next scrape', async () => {
    const registry = new Registry();
    const api = deniedLimiter(new MemoryStore());
    instrument(api, { name: 'api', registry, top: { n: 2 } });
    await deny(api, 'a', 3);
    await deny(api, 'b', 2);
    expect(topSeries(await registry.metrics())).toEqual(
      new Map([
        ['api/key/a', 3],
        ['api/key/b', 2],
      ]),
    );
    await deny(api, 'c', 5);
    expect(topSeries(await registry.metrics())).toEqual(
      new Map([
        ['api/key/c', 5],
        ['api/key/a', 3],
      ]),
    );
  });

  it('labels a key with the scope of the rule that denied it', async () => {
    const registry = new Registry();
    const limiter = deniedLimiter(new MemoryStore(), {
      rules: [
        { name: 'per-ip', scope: 'ip', algorithm: 'fixed-window', limit: 3, windowMs: 60_000 },
        { name: 'per-user', scope: 'user', algorithm: 'fixed-window', limit: 1, windowMs: 60_000 },
      ],
    });
    instrument(limiter, { name: 'scoped', registry, top: { n: 10 } });
    for (let i = 0; i < 3; i++) await limiter.consume({ ip: '203.0.113.9', user: 'mallory' }); // 2 denied by per-user
    for (const user of ['u1', 'u2', 'u3', 'u4']) await limiter.consume({ ip: '198.51.100.1', user }); // the 4th denied by per-ip
    expect(topSeries(await registry.metrics())).toEqual(
      new Map([
        ['scoped/user/mallory', 2],
        ['scoped/ip/198.51.100.1', 1],
      ]),
    );
  });

  it('stops exporting a limiter when the function instrument() returned is called', async () => {
    const registry = new Registry();
    const api = deniedLimiter(new MemoryStore());
    const stop = instrument(api, { name: 'api', registry, top: { n: 3 } });
    await deny(api, 'a', 1);
    expect(topSeries(await registry.metrics()).size).toBe(1);
    stop();
    expect(topSeries(await registry.metrics()).size).toBe(0);
  });

  it('adds no floodgate_top_denied family to a registry where no limiter asked for it', async () => {
    const registry = new Registry();
    instrument(deniedLimiter(new MemoryStore()), { name: 'api', registry });
    expect(await registry.metrics()).not.toContain('floodgate_top_denied');
  });

  it('rejects a bad top option at registration', () => {
    const limiter = deniedLimiter(new MemoryStore());
    for (const [top, code] of [
      [{ n: 0 }, 'ERR_FG_OPTION'],
      [{ n: 101 }, 'ERR_FG_OPTION'],
      [{ n: 2.5 }, 'ERR_FG_OPTION'],
      [{ n: '10' }, 'ERR_FG_OPTION'],
      [{}, 'ERR_FG_OPTION'],
      [10, 'ERR_FG_OPTION'],
      [null, 'ERR_FG_OPTION'],
      [{ n: 10, size: 5 }, 'ERR_FG_UNKNOWN_OPTION'],
    ] as const) {
      expect(() => instrument(limiter, { name: 'x', registry: new Registry(), top: top as never })).toThrow(
        expect.objectContaining({ name: 'FloodgateError', code }),
      );
    }
    expect(() => instrument(limiter, { name: 'x', registry: new Registry(), top: { n: 100 } })).not.toThrow();
  });

  it('refuses a limiter without analytics: every scrape fails with ERR_FG_OPTION naming it', async () => {
    const registry = new Registry();
    const plain = createLimiter({ limit: 1, windowMs: 60_000 });
    instrument(plain, { name: 'plain', registry, top: { n: 5 } });
    for (let scrape = 0; scrape < 2; scrape++) {
      await expect(registry.metrics()).rejects.toMatchObject({
        name: 'FloodgateError',
        code: 'ERR_FG_OPTION',
        message: expect.stringMatching(/'plain' was created without analytics.*createLimiter\(\{ analytics: true \}\)/),
      });
    }
  });

  it('answers the scrape when the store fails or hangs: no series for that limiter, a store error counted, back at the next scrape', async () => {
    const registry = new Registry();
    const store = new MemoryStore();
    const api = deniedLimiter(store, { timeoutMs: 100 });
    const other = deniedLimiter(new MemoryStore());
    instrument(api, { name: 'api', registry, top: { n: 3 } });
    instrument(other, { name: 'other', registry, top: { n: 3 } });
    await deny(api, 'a', 2);
    await deny(other, 'b', 1);
    const records = store.records;
    const list = records.list.bind(records);

    records.list = () => Promise.reject(new Error('down'));
    let text = await registry.metrics();
    expect(topSeries(text)).toEqual(new Map([['other/key/b', 1]]));
    expect(sample(text, 'floodgate_store_errors_total', { limiter: 'api', operation: 'top', rule: '', outcome: '' })).toBe(1);
    expect(text).toContain('floodgate_decisions_total'); // the rest of the scrape is whole

    records.list = () => new Promise(() => {}); // never answers: top() gives up after timeoutMs
    const started = Date.now();
    text = await registry.metrics();
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(topSeries(text)).toEqual(new Map([['other/key/b', 1]]));
    expect(sample(text, 'floodgate_store_errors_total', { limiter: 'api', operation: 'top' })).toBe(2);

    records.list = list;
    expect(topSeries(await registry.metrics())).toEqual(
      new Map([
        ['api/key/a', 2],
        ['other/key/b', 1],
      ]),
    );
  });
});

describe('instrument(limiter, { top }) on a RedisStore', () => {
  it("exports exactly n series, every process's denials added up, and answers while Redis is frozen", async () => {
    const store = new RedisStore({ client: redisServer.client, clock: 'client' });
    const prefix = `prom-top-redis${prefixes++}:`;
    // Two processes on one store: their denials are counted apart and added up by top().
    const a = deniedLimiter(store, { prefix, timeoutMs: 300 });
    const b = deniedLimiter(store, { prefix, timeoutMs: 300 });
    const registry = new Registry();
    instrument(a, { name: 'api', registry, top: { n: 3 } });
    for (let i = 1; i <= 8; i++) await deny(a, `k${i}`, i);
    await deny(b, 'k1', 20); // k1: 1 denial on a (the key's one admission), 21 more on b
    await b.top(); // b writes its summary (as its timer would within a few seconds)

    expect(topSeries(await registry.metrics())).toEqual(
      new Map([
        ['api/key/k1', 22],
        ['api/key/k8', 8],
        ['api/key/k7', 7],
      ]),
    );

    redisServer.server.pause();
    try {
      const started = Date.now();
      const text = await registry.metrics();
      expect(Date.now() - started).toBeLessThan(3_000);
      expect(topSeries(text).size).toBe(0);
      expect(sample(text, 'floodgate_store_errors_total', { limiter: 'api', operation: 'top' })).toBe(1);
    } finally {
      redisServer.server.resume();
    }
    expect(topSeries(await registry.metrics()).size).toBe(3);
  });
});
