/*
 * Overrides (limiter.overrides): per-key and per-prefix changes to a rule,
 * kept in the store, applied by every limiter on it. Each spec runs on the
 * memory store and on a RedisStore (a private redis-server), with the
 * limiter's clock injected; other instances pick changes up by refresh()
 * (what the timer calls), and once by the timer itself.
 */
import { useRedisServer } from '@floodgate/test-support';
import { describe, expect, it } from 'vitest';
import { createLimiter, type LimiterEvents } from './limiter.js';
import type { LimiterOptions } from './options.js';
import { MemoryStore } from './stores/memory-store.js';
import { RedisStore } from './stores/redis-store.js';
import type { Store } from './stores/types.js';

const redisServer = useRedisServer();

function manualClock(start = Date.UTC(2100, 0, 1)) {
  let now = start;
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

let prefixes = 0;

const stores: [string, () => Store][] = [
  ['MemoryStore', () => new MemoryStore()],
  ['RedisStore', () => new RedisStore({ client: redisServer.client, clock: 'client' })],
];

/** Admitted calls in a row for `keys` until the first denial (at most `max`). */
async function admitted(limiter: ReturnType<typeof createLimiter>, keys: Parameters<ReturnType<typeof createLimiter>['consume']>[0], max = 100) {
  let n = 0;
  while (n < max && (await limiter.consume(keys)).allowed) n++;
  return n;
}

describe.each(stores)('overrides on the %s', (_, makeStore) => {
  const setup = (options: LimiterOptions) => {
    const clock = manualClock();
    const store = makeStore();
    const prefix = `ov${prefixes++}:`;
    const make = () => createLimiter({ store, prefix, now: clock.now, timeoutMs: 30_000, overrides: { refreshMs: 60_000 }, ...options });
    return { clock, store, prefix, make, limiter: make() };
  };

  it("raises one key's limit and keeps its count; other keys keep the rule's", async () => {
    const { limiter } = setup({ algorithm: 'fixed-window', limit: 3, windowMs: 60_000 });
    expect((await limiter.consume('acme')).remaining).toBe(2);
    await limiter.overrides.set('acme', { limit: 10 });
    const decision = await limiter.consume('acme');
    expect(decision).toMatchObject({ allowed: true, limit: 10, remaining: 8 }); // the call before counts
    expect(await admitted(limiter, 'acme')).toBe(8);
    expect(await admitted(limiter, 'other')).toBe(3);
    expect(await limiter.peek('acme')).toMatchObject({ allowed: false, limit: 10 });
    await limiter.refund('acme', { cost: 2 });
    expect((await limiter.peek('acme')).remaining).toBe(2);
    await limiter.overrides.delete('acme');
    expect(await limiter.consume('acme')).toMatchObject({ allowed: false, limit: 3 });
  });

  it('changes only the rule it names, in that rule’s scope; a prefix (key*) covers every key under it, the longest prefix and the key itself first', async () => {
    const { limiter } = setup({
      rules: [
        { name: 'per-ip', scope: 'ip', limit: 100, windowMs: 60_000 },
        { name: 'per-user', scope: 'user', limit: 2, windowMs: 60_000 },
      ],
    });
    await limiter.overrides.set('tenant:acme:*', [{ name: 'per-user', limit: 5 }]);
    await limiter.overrides.set('tenant:acme:vip:*', [{ name: 'per-user', limit: 7 }]);
    await limiter.overrides.set('tenant:acme:boss', [{ name: 'per-user', limit: 9 }]);
    // An override of per-user keyed as an address changes nothing: the key is matched in the rule's scope.
    await limiter.overrides.set('10.0.0.9', [{ name: 'per-user', limit: 50 }]);
    expect(await admitted(limiter, { ip: '10.0.0.1', user: 'tenant:acme:u1' })).toBe(5);
    expect(await admitted(limiter, { ip: '10.0.0.1', user: 'tenant:acme:vip:u2' })).toBe(7);
    expect(await admitted(limiter, { ip: '10.0.0.1', user: 'tenant:acme:boss' })).toBe(9);
    expect(await admitted(limiter, { ip: '10.0.0.9', user: 'tenant:globex:u1' })).toBe(2);
    expect((await limiter.peek({ ip: '10.0.0.1', user: 'x' })).rules.find((r) => r.name === 'per-ip')?.remaining).toBe(100 - 21);
    const { items, cursor } = await limiter.overrides.list({ count: 10 });
    expect(cursor).toBe('');
    expect(items.map((o) => o.key)).toEqual(['10.0.0.9', 'tenant:acme:*', 'tenant:acme:boss', 'tenant:acme:vip:*']);
    const first = await limiter.overrides.list({ count: 2 });
    expect(first.items).toHaveLength(2);
    const second = await limiter.overrides.list({ count: 2, cursor: first.cursor });
    expect([...first.items, ...second.items].map((o) => o.key)).toEqual(items.map((o) => o.key));
    expect(await limiter.overrides.get('tenant:acme:*')).toEqual({ key: 'tenant:acme:*', rules: [{ name: 'per-user', limit: 5 }] });
    expect(await limiter.overrides.get('tenant:acme:u1')).toBeUndefined();
  });

  it("walks prefixes by character: '*' covers every key, a key shorter than a prefix or leaving it midway is not covered by it, an ended prefix gives way to a shorter one", async () => {
    const { limiter, clock } = setup({ algorithm: 'fixed-window', limit: 1, windowMs: 3_600_000 });
    await limiter.overrides.set('*', { limit: 2 });
    await limiter.overrides.set('ab*', { limit: 3 });
    await limiter.overrides.set('abcd*', { limit: 4 }, { ttlMs: 1_000 });
    expect(await admitted(limiter, 'x')).toBe(2);
    expect(await admitted(limiter, 'a')).toBe(2); // shorter than 'ab'
    expect(await admitted(limiter, 'abx')).toBe(3);
    expect(await admitted(limiter, 'abc')).toBe(3); // leaves 'abcd' midway
    expect(await admitted(limiter, 'abcde')).toBe(4);
    clock.advance(1_000);
    expect((await limiter.peek('abcdf')).limit).toBe(3); // 'abcd*' ended: 'ab*' is next
  });

  it('ends after ttlMs on the limiter’s clock', async () => {
    const { limiter, clock } = setup({ algorithm: 'token-bucket', limit: 2, windowMs: 60_000_000 });
    await limiter.overrides.set('k', { limit: 4 }, { ttlMs: 10_000 });
    expect(await limiter.overrides.get('k')).toEqual({ key: 'k', rules: [{ name: 'default', limit: 4 }], untilMs: clock.now() + 10_000 });
    expect(await admitted(limiter, 'k')).toBe(4);
    clock.advance(10_000);
    expect(await limiter.overrides.get('k')).toBeUndefined();
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, limit: 2 });
  });

  it('reaches another limiter on the store at its next refresh, and a delete too', async () => {
    const { limiter, make } = setup({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000 });
    const other = make();
    await other.overrides.refresh();
    await limiter.overrides.set('shared', { limit: 3 });
    expect(await admitted(other, 'shared')).toBe(1); // not yet loaded there
    await other.overrides.refresh();
    expect(await admitted(other, 'shared')).toBe(2); // the count of 1 stays
    await limiter.overrides.delete('shared');
    await other.overrides.refresh();
    await other.reset('shared');
    expect(await admitted(other, 'shared')).toBe(1);
  });

  it('refuses what it cannot apply, keeping the override in force', async () => {
    const { limiter } = setup({
      rules: [
        { name: 'a', limit: 5, windowMs: 60_000 },
        { name: 'everyone', scope: 'global', limit: 1000, windowMs: 60_000 },
        { name: 'sw', algorithm: 'sliding-window', limit: 50, windowMs: 60_000 },
      ],
    });
    await limiter.overrides.set('k', [{ name: 'a', limit: 6 }]);
    const refused = async (promise: Promise<unknown>, code: string) => expect(promise).rejects.toMatchObject({ code });
    await refused(limiter.overrides.set('k', [{ name: 'nope', limit: 6 }]), 'ERR_FG_RULES');
    await refused(limiter.overrides.set('k', [{ limit: 6 }]), 'ERR_FG_RULES'); // several rules: name one
    await refused(limiter.overrides.set('k', [{ name: 'a', scope: 'ip' } as never]), 'ERR_FG_RULES');
    await refused(limiter.overrides.set('k', [{ name: 'a', algorithm: 'gcra' }]), 'ERR_FG_RULES');
    await refused(limiter.overrides.set('k', [{ name: 'everyone', limit: 5 }]), 'ERR_FG_RULES');
    await refused(limiter.overrides.set('k', [{ name: 'a', limit: -1 }]), 'ERR_FG_LIMIT');
    await refused(limiter.overrides.set('k', [{ name: 'sw', segments: 0 }]), 'ERR_FG_SEGMENTS');
    await refused(
      limiter.overrides.set('k', [
        { name: 'a', limit: 6 },
        { name: 'a', limit: 7 },
      ]),
      'ERR_FG_RULES',
    );
    await refused(limiter.overrides.set('k', []), 'ERR_FG_RULES');
    await refused(limiter.overrides.set('', [{ name: 'a', limit: 6 }]), 'ERR_FG_OPTION');
    await refused(limiter.overrides.set('x'.repeat(513), [{ name: 'a', limit: 6 }]), 'ERR_FG_OPTION');
    await refused(limiter.overrides.set('k', [{ name: 'a', limit: 6 }], { ttlMs: 0 }), 'ERR_FG_OPTION');
    await refused(limiter.overrides.set('k', [{ name: 'a', limit: 6 }], { ttl: 5 } as never), 'ERR_FG_UNKNOWN_OPTION');
    await refused(limiter.overrides.list({ count: 0 }), 'ERR_FG_OPTION');
    expect(await limiter.overrides.get('k')).toEqual({ key: 'k', rules: [{ name: 'a', limit: 6 }] });
    expect(await admitted(limiter, 'k')).toBe(6);
  });

  it('passes over a stored override it cannot apply (another build’s, or damaged), says so, and keeps the one it held', async () => {
    const { limiter, store, prefix } = setup({ name: 'a', limit: 2, windowMs: 60_000 });
    const errors: LimiterEvents['error'][] = [];
    limiter.on('error', (event) => errors.push(event));
    await limiter.overrides.set('k', { limit: 4 });
    const records = store.records as NonNullable<Store['records']>;
    const name = (await records.list(prefix, '', 100)).records.find(([n]) => n.endsWith('override:k'))?.[0] as string;
    expect(name).toBe(`${prefix}override:k`);
    await records.set(name, JSON.stringify({ key: 'k', rules: [{ name: 'a', limit: 'many' }] }), 60_000);
    await records.set(name.replace(/k$/, 'j'), '{not json', 60_000);
    await limiter.overrides.refresh();
    expect(errors.map((e) => [e.operation, e.error.message])).toEqual([['overrides', expect.stringContaining('2 stored override(s) could not be applied')]]);
    expect(await admitted(limiter, 'k')).toBe(4);
  });
});

describe('overrides options', () => {
  it('are off by default: the methods say how to turn them on', async () => {
    const limiter = createLimiter({ limit: 1, windowMs: 1000 });
    await expect(limiter.overrides.set('k', { limit: 2 })).rejects.toMatchObject({
      code: 'ERR_FG_OPTION',
      message: expect.stringContaining('overrides: true'),
    });
    await expect(limiter.overrides.list()).rejects.toMatchObject({ code: 'ERR_FG_OPTION' });
  });

  it('refuses bad values and a store that keeps no records', () => {
    for (const overrides of [{ refreshMs: 50 }, { refreshMs: 1.5 }, 'yes', null]) {
      expect(() => createLimiter({ limit: 1, windowMs: 1000, overrides } as never)).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
    }
    expect(() => createLimiter({ limit: 1, windowMs: 1000, overrides: { every: 5 } } as never)).toThrow(
      expect.objectContaining({ code: 'ERR_FG_UNKNOWN_OPTION' }),
    );
    const store = new MemoryStore();
    const noRecords: Store = {
      consume: store.consume.bind(store),
      peek: store.peek.bind(store),
      refund: store.refund.bind(store),
      reset: store.reset.bind(store),
    };
    expect(() => createLimiter({ limit: 1, windowMs: 1000, store: noRecords, overrides: true })).toThrow(
      expect.objectContaining({ code: 'ERR_FG_OPTION', message: expect.stringContaining('records') }),
    );
  });

  it('loads again every refreshMs on its own (real time, bounded)', async () => {
    const store = new MemoryStore();
    const a = createLimiter({ store, prefix: 'timer:', limit: 1, windowMs: 60_000, overrides: { refreshMs: 100 } });
    const b = createLimiter({ store, prefix: 'timer:', limit: 1, windowMs: 60_000, overrides: { refreshMs: 100 } });
    await a.overrides.set('k', { limit: 5 });
    const deadline = Date.now() + 5_000;
    while ((await b.peek('k')).limit !== 5 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await b.peek('k')).limit).toBe(5);
    await a.close();
    await b.close();
  });

  it('reports a load that fails, and keeps the overrides it held', async () => {
    const store = new MemoryStore();
    const limiter = createLimiter({ store, limit: 1, windowMs: 60_000, overrides: true });
    const errors: LimiterEvents['error'][] = [];
    limiter.on('error', (event) => errors.push(event));
    await limiter.overrides.set('k', { limit: 3 });
    const records = store.records as NonNullable<Store['records']>;
    // A store that fails to list: not something a memory store does, so provoked by hand.
    records.list = () => Promise.reject(new Error('the store is gone'));
    await expect(limiter.overrides.refresh()).rejects.toMatchObject({ code: 'ERR_FG_STORE_UNAVAILABLE' });
    expect(errors.map((e) => e.operation)).toEqual(['overrides']);
    expect(await admitted(limiter, 'k')).toBe(3);
    await limiter.close();
  });
});
