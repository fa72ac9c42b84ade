/*
 * The store conformance suite: every store must make the decisions of the
 * reference (the pure algorithms composed all-or-nothing) on random traces of
 * consume/peek/refund/reset with costs and clock jumps, field by field. It
 * runs on the MemoryStore and on a RedisStore (clock: 'client') backed by a
 * private redis-server; and the two stores are run side by side on the same
 * trace.
 */
import { useRedisServer } from '@floodgate/test-support';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createLimiter, type Limiter } from '../limiter.js';
import { type AlgorithmName, compileRule, type RuleOptions } from '../rules.js';
import { algorithmNames } from '../test-support/arbitraries.js';
import { expectedDecision, referenceLimiter } from '../test-support/reference.js';
import { MemoryStore } from './memory-store.js';
import { RedisStore } from './redis-store.js';
import type { Store } from './types.js';

const redisServer = useRedisServer();

/**
 * Rules with windows of 30 s to 10 min: under the client clock Redis expires
 * keys on its own clock after the rule's horizon, so real time must not
 * outrun it while a trace runs. A bucket's horizon is the time it takes to
 * refill, burst · windowMs / limit: its window is stretched by ceil(limit /
 * burst) so that the horizon too is 30 s at least, whatever the burst.
 */
function conformanceRule(algorithm: AlgorithmName, name: string): fc.Arbitrary<RuleOptions> {
  return fc
    .record({
      limit: fc.integer({ min: 1, max: 12 }),
      windowMs: fc.integer({ min: 30_000, max: 600_000 }),
      burst: fc.integer({ min: 1, max: 15 }),
      segments: fc.integer({ min: 1, max: 6 }),
      shape: fc.boolean(),
    })
    .map(({ limit, windowMs, burst, segments, shape }) => {
      switch (algorithm) {
        case 'sliding-window':
          return { name, algorithm, limit, windowMs: windowMs - (windowMs % segments), segments };
        case 'token-bucket':
        case 'gcra':
          return { name, algorithm, limit, windowMs: windowMs * Math.ceil(limit / burst), burst };
        case 'concurrency':
          return { name, algorithm, limit, windowMs };
        case 'leaky-bucket':
          return { name, algorithm, limit, windowMs: windowMs * Math.ceil(limit / burst), burst, mode: shape ? ('shape' as const) : ('police' as const) };
        default:
          return { name, algorithm, limit, windowMs };
      }
    });
}

const ruleLists = fc
  .array(fc.constantFrom(...algorithmNames), { minLength: 1, maxLength: 3 })
  .chain((names) => fc.tuple(...names.map((algorithm, i) => conformanceRule(algorithm, `r${i}`))));

/**
 * A gap between calls in thousandths of the shortest window: the same ms,
 * small steps, long jumps, and the clock going back. (Integers: fc.double
 * would mostly draw values too small to move the clock.)
 */
const gap = fc.oneof(
  { weight: 3, arbitrary: fc.constant(0) },
  { weight: 6, arbitrary: fc.integer({ min: 1, max: 300 }) },
  { weight: 2, arbitrary: fc.integer({ min: 300, max: 3000 }) },
  { weight: 2, arbitrary: fc.integer({ min: -200, max: -1 }) },
);

const operations = fc.array(
  fc.record({
    op: fc.constantFrom('consume', 'consume', 'consume', 'consume', 'peek', 'refund', 'reset', 'release', 'release'),
    key: fc.constantFrom('a', 'b', 'user:{42}', 'x}:r0'),
    gap,
    cost: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 17 })),
  }),
  { minLength: 1, maxLength: 40 },
);

let run = 0;
/** For the property tests: a loaded machine runs them several times slower, and vitest's default of 5 s is not far. */
const propertyTimeout = 120_000;
/**
 * Far above any round trip: on a loaded machine a Redis call can take longer
 * than the default 200 ms, and a timeout would make a decision differ from
 * the reference (onStoreError decides it).
 */
const timeoutMs = 30_000;

/** Runs a trace on a limiter built from `store` and checks every decision against the reference. */
async function checkTrace(store: Store, rules: RuleOptions[], steps: { op: string; key: string; gap: number; cost: number }[]) {
  let now = 1_700_000_000_000 + (run % 1000) * 3_600_000;
  const limiter: Limiter = createLimiter({ rules, store, now: () => now, prefix: `conf${run++}:`, timeoutMs });
  const reference = referenceLimiter(rules.map((r, i) => compileRule(r, `rules[${i}]`)));
  const shortest = Math.min(...rules.map((r) => r.windowMs));
  const leases: { key: string; leaseId: string }[] = [];
  for (const { op, key, gap: permille, cost } of steps) {
    now += Math.round((permille * shortest) / 1000);
    if (op === 'consume') {
      const { leaseId, ...decision } = await limiter.consume(key, { cost });
      expect(decision).toEqual(expectedDecision(reference.consume(key, now, cost, leaseId)));
      if (leaseId !== undefined) leases.push({ key, leaseId });
    } else if (op === 'release') {
      const lease = leases.splice(cost % Math.max(1, leases.length), 1)[0];
      if (lease === undefined) continue;
      reference.release(lease.key, now, lease.leaseId);
      await limiter.release(lease.key, lease.leaseId);
    } else if (op === 'peek') expect(await limiter.peek(key)).toEqual(expectedDecision(reference.peek(key, now)));
    else if (op === 'refund') {
      reference.refund(key, now, cost);
      await limiter.refund(key, { cost });
    } else {
      reference.reset(key);
      await limiter.reset(key);
    }
  }
}

const stores: [string, () => Store][] = [
  ['MemoryStore', () => new MemoryStore()],
  ['RedisStore (clock: client)', () => new RedisStore({ client: redisServer.client, clock: 'client' })],
];

describe.each(stores)('%s conformance', (_, makeStore) => {
  it(
    'decides random multi-rule traces exactly like the reference, field by field',
    async () => {
      await fc.assert(
        fc.asyncProperty(ruleLists, operations, async (rules, steps) => {
          await checkTrace(makeStore(), rules, steps);
        }),
        { numRuns: 1000 },
      );
    },
    propertyTimeout,
  );

  it.each(algorithmNames)('%s: a cost above the capacity is denied with retryAfterMs = Infinity and takes nothing', async (algorithm) => {
    const limiter = createLimiter({ algorithm, limit: 4, windowMs: 60_000, store: makeStore(), prefix: `inf${run++}:`, timeoutMs });
    const denied = await limiter.consume('k', { cost: 5 });
    expect(denied).toMatchObject({ allowed: false, retryAfterMs: Number.POSITIVE_INFINITY, remaining: 4 });
    expect((await limiter.consume('k', { cost: 4 })).allowed).toBe(true);
  });

  it('runs every algorithm in one limiter, several keys interleaved', async () => {
    const rules = algorithmNames.map((algorithm, i) => ({ name: `r${i}`, algorithm, limit: 3, windowMs: 60_000 }));
    await checkTrace(
      makeStore(),
      rules,
      Array.from({ length: 30 }, (_, i) => ({ op: i % 7 === 6 ? 'refund' : 'consume', key: i % 2 ? 'a' : 'b', gap: i % 5 === 0 ? 200 : 0, cost: 1 + (i % 2) })),
    );
  });
});

describe('MemoryStore and RedisStore side by side', () => {
  it(
    'make the same decisions on the same random traces',
    async () => {
      await fc.assert(
        fc.asyncProperty(ruleLists, operations, async (rules, steps) => {
          let now = 1_800_000_000_000;
          const prefix = `side${run++}:`;
          const memory = createLimiter({ rules, now: () => now, prefix });
          const redisLimiter = createLimiter({
            rules,
            now: () => now,
            prefix,
            store: new RedisStore({ client: redisServer.client, clock: 'client' }),
            timeoutMs,
          });
          const shortest = Math.min(...rules.map((r) => r.windowMs));
          const leases: { key: string; memory: string; redis: string }[] = [];
          for (const { op, key, gap: permille, cost } of steps) {
            now += Math.round((permille * shortest) / 1000);
            if (op === 'consume') {
              const { leaseId: inRedis, ...fromRedis } = await redisLimiter.consume(key, { cost });
              const { leaseId: inMemory, ...fromMemory } = await memory.consume(key, { cost });
              expect(fromRedis).toEqual(fromMemory);
              if (inRedis !== undefined && inMemory !== undefined) leases.push({ key, memory: inMemory, redis: inRedis });
            } else if (op === 'release') {
              const lease = leases.splice(cost % Math.max(1, leases.length), 1)[0];
              if (lease !== undefined) await Promise.all([memory.release(lease.key, lease.memory), redisLimiter.release(lease.key, lease.redis)]);
            } else if (op === 'peek') expect(await redisLimiter.peek(key)).toEqual(await memory.peek(key));
            else if (op === 'refund') await Promise.all([memory.refund(key, { cost }), redisLimiter.refund(key, { cost })]);
            else await Promise.all([memory.reset(key), redisLimiter.reset(key)]);
          }
        }),
        { numRuns: 500 },
      );
    },
    propertyTimeout,
  );
});
