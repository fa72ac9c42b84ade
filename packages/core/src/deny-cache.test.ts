import { useRedisServer } from '@floodgate/test-support';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createLimiter } from './limiter.js';
import type { RuleOptions } from './rules.js';
import { MemoryStore } from './stores/memory-store.js';
import { RedisStore } from './stores/redis-store.js';
import type { Store } from './stores/types.js';
import { algorithmNames } from './test-support/arbitraries.js';

const redis = useRedisServer();

/** Counts the store calls a limiter makes. */
function counting(store: Store) {
  const calls = { consume: 0 };
  const wrapped: Store = {
    consume: (...args) => {
      calls.consume++;
      return store.consume(...args);
    },
    peek: (...args) => store.peek(...args),
    refund: (...args) => store.refund(...args),
    reset: (...args) => store.reset(...args),
  };
  return { store: wrapped, calls };
}

const rules = fc.array(fc.constantFrom(...algorithmNames), { minLength: 1, maxLength: 3 }).chain((names) =>
  fc.tuple(
    ...names.map((algorithm, i) =>
      fc
        .record({
          limit: fc.integer({ min: 1, max: 8 }),
          windowMs: fc.integer({ min: 60_000, max: 600_000 }),
          // Blocks too (not on concurrency): a cached denial must end with its block, not before, not after.
          block: fc.option(fc.record({ blockMs: fc.integer({ min: 1_000, max: 300_000 }), escalation: fc.integer({ min: 0, max: 4 }) }), { freq: 2 }),
        })
        .map(({ limit, windowMs, block }): RuleOptions => {
          const blocking =
            block === null || algorithm === 'concurrency'
              ? {}
              : { blockMs: block.blockMs, ...(block.escalation > 0 ? { maxBlockMs: block.blockMs * 2 ** block.escalation } : {}) };
          return { name: `r${i}`, algorithm, limit, windowMs, ...blocking };
        }),
    ),
  ),
);

const calls = fc.array(
  fc.record({
    gap: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 5_000 }), fc.integer({ min: 5_000, max: 200_000 })),
    cost: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 4 })),
    key: fc.constantFrom('a', 'b'),
    refund: fc.nat(9).map((n) => n === 0), // one call in ten, drawn by fast-check so that a failure replays
  }),
  { minLength: 1, maxLength: 60 },
);

let prefixes = 0;

describe.each([
  ['MemoryStore', () => new MemoryStore()],
  ['RedisStore', () => new RedisStore({ client: redis.client, clock: 'client' })],
] as const)('localDenyCache on a %s', (_, makeStore) => {
  it('never denies a call the store would admit, and answers the same wait for the same cost', async () => {
    let saved = 0;
    await fc.assert(
      fc.asyncProperty(rules, calls, async (ruleList, trace) => {
        let now = Date.UTC(2100, 0, 1); // ahead of Redis's clock, as clock: 'client' needs
        const prefix = `cache${prefixes++}:`;
        // timeoutMs far above any round trip: a slow moment must not turn one side's decision into a store error.
        const common = { rules: ruleList, now: () => now, timeoutMs: 30_000 };
        const plain = createLimiter({ ...common, store: makeStore(), prefix: `${prefix}plain:` });
        const counted = counting(makeStore());
        const cached = createLimiter({ ...common, store: counted.store, prefix: `${prefix}cached:`, localDenyCache: true });
        for (const { gap, cost, key, refund } of trace) {
          now += gap;
          if (refund) {
            await Promise.all([plain.refund(key, { cost }), cached.refund(key, { cost })]);
            continue;
          }
          const expected = await plain.consume(key, { cost });
          const got = await cached.consume(key, { cost });
          expect([expected.storeError, got.storeError]).toEqual([undefined, undefined]); // decided by the store, both
          expect(got.allowed).toBe(expected.allowed);
          if (!got.allowed) expect(got.retryAfterMs).toBe(expected.retryAfterMs);
          // A call the cache answers starts no block: nor would the store have started one.
          expect(got.rules.some((r) => r.blocked?.started)).toBe(expected.rules.some((r) => r.blocked?.started));
        }
        saved += trace.filter((c) => !c.refund).length - counted.calls.consume;
      }),
      { numRuns: 300 },
    );
    expect(saved).toBeGreaterThan(0); // the cache did answer calls by itself
  }, 120_000); // a loaded machine runs the 300 traces several times slower: vitest's default 5 s is not far
});

describe('localDenyCache', () => {
  it('answers a flood of one denied key without the store, until the denial ends', async () => {
    let now = 0;
    const { store, calls: made } = counting(new MemoryStore());
    const limiter = createLimiter({ algorithm: 'fixed-window', limit: 2, windowMs: 10_000, store, now: () => now, localDenyCache: true });
    await limiter.consume('k');
    await limiter.consume('k');
    const first = await limiter.consume('k');
    expect(first).toMatchObject({ allowed: false, retryAfterMs: 10_000 });
    now = 4_000;
    for (let i = 0; i < 100; i++) expect(await limiter.consume('k')).toMatchObject({ allowed: false, retryAfterMs: 6_000 });
    expect(made.consume).toBe(3);
    expect((await limiter.consume('k', { cost: 1 })).rules[0]).toMatchObject({ retryAfterMs: 6_000, resetMs: 6_000 });
    now = 10_000;
    expect((await limiter.consume('k')).allowed).toBe(true);
    expect(made.consume).toBe(4);
  });

  it('asks the store for a cheaper call, and after its own refund, reset or rule update', async () => {
    const now = 0;
    const { store, calls: made } = counting(new MemoryStore());
    const limiter = createLimiter({ algorithm: 'token-bucket', limit: 4, windowMs: 60_000, store, now: () => now, localDenyCache: { maxKeys: 10 } });
    const asked = async (cost: number) => {
      const before = made.consume;
      const { allowed } = await limiter.consume('k', { cost });
      return `${allowed ? 'allowed' : 'denied'}${made.consume > before ? '' : ' (cached)'}`;
    };
    expect(await asked(3)).toBe('allowed'); // 1 token left
    expect(await asked(2)).toBe('denied');
    expect(await asked(2)).toBe('denied (cached)');
    expect(await asked(1)).toBe('allowed'); // another cost: the store decides
    expect(await asked(2)).toBe('denied'); // an admitted call changed the state: asked again
    await limiter.refund('k', { cost: 2 });
    expect(await asked(2)).toBe('allowed');
    expect(await asked(1)).toBe('denied');
    await limiter.reset('k');
    expect(await asked(1)).toBe('allowed');
    expect(await asked(3)).toBe('allowed');
    expect(await asked(1)).toBe('denied');
    expect(await asked(1)).toBe('denied (cached)');
    limiter.updateRules({ algorithm: 'token-bucket', limit: 4, windowMs: 30_000 });
    expect(await asked(1)).toBe('denied');
  });

  it('rejects a bad setting', () => {
    for (const localDenyCache of [0, 'yes', { maxKeys: 0 }, { maxKeys: 1.5 }]) {
      expect(() => createLimiter({ limit: 1, windowMs: 1, localDenyCache: localDenyCache as never })).toThrow(
        expect.objectContaining({ code: 'ERR_FG_OPTION' }),
      );
    }
  });
});
