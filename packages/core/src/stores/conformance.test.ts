/*
 * RedisStore against the store contract (testing/store-contract.ts) that
 * every store runs from its own tests: the library as Functions and as
 * scripts, and over the @upstash/redis client (HTTP, through the REST bridge
 * of test-support), on the limiter's clock. Then the production path,
 * Functions on Redis's own clock, each call timed by Redis, against the same
 * reference; and the memory store and RedisStore side by side on the same
 * random traces.
 */
import { useRedisServer, useRestBridge } from '@floodgate/test-support';
import { Redis as Upstash } from '@upstash/redis';
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { Keys } from '../keys.js';
import { createLimiter } from '../limiter.js';
import { checkTrace, keysFor, operations, rulesAndPlans } from '../testing/store-contract.js';
import { storeContract } from '../testing.js';
import type { IoRedisLike } from './redis/connection.js';
import { RedisStore } from './redis-store.js';

const redisServer = useRedisServer();
/** Upstash's REST protocol in front of the same Redis: the real @upstash/redis client over HTTP. */
const restBridge = useRestBridge(() => redisServer.server.port);

/** Where the side-by-side traces start: any epoch works on the limiter's clock. */
const FUTURE = Date.UTC(2100, 0, 1);
/** For the property tests: a loaded machine runs them several times slower, and vitest's default of 5 s is not far. */
const propertyTimeout = 180_000;
/** Far above any round trip: a timeout would make a decision differ from the reference (onStoreError decides it). */
const timeoutMs = 30_000;
let run = 0;

storeContract('RedisStore (functions, clock: client)', () => new RedisStore({ client: redisServer.client, clock: 'client' }), { numRuns: 1000 });
storeContract('RedisStore (scripts, clock: client)', () => new RedisStore({ client: redisServer.client, clock: 'client', mode: 'scripts' }), {
  numRuns: 1000,
});
storeContract(
  'RedisStore over @upstash/redis (REST bridge, clock: client)',
  () => new RedisStore({ client: new Upstash({ url: restBridge.url, token: restBridge.token, enableTelemetry: false }), clock: 'client' }),
  { numRuns: 300 },
);

/**
 * A client whose every FCALL that decides runs in a MULTI between two TIMEs:
 * when both read the same ms, that is the ms the library decided at, on
 * Redis's clock.
 */
function timedClient(redis: Redis): { client: IoRedisLike; decidedAt: () => number | undefined } {
  let decidedAt: number | undefined;
  const ms = (time: unknown) => {
    const [seconds, micros] = time as [string, string];
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  };
  const timed =
    (readOnly: boolean) =>
    async (name: string, numKeys: number, ...rest: string[]) => {
      // The store's records (blocks by hand, listed) decide nothing: the time of the call before stands.
      if (['rset', 'rget', 'rdel', 'rlist'].includes(rest[numKeys] as string)) return redis.fcall(name, numKeys, ...rest);
      const multi = redis.multi().time();
      if (readOnly) multi.fcall_ro(name, numKeys, ...rest);
      else multi.fcall(name, numKeys, ...rest);
      const results = (await multi.time().exec()) ?? [];
      const [before, reply, after] = results.map(([error, value]) => {
        if (error) throw error;
        return value;
      });
      decidedAt = ms(before) === ms(after) ? ms(before) : undefined;
      return reply;
    };
  const client = {
    fcall: timed(false),
    fcall_ro: timed(true),
    evalsha: redis.evalsha.bind(redis),
    evalsha_ro: redis.evalsha_ro.bind(redis),
    eval: redis.eval.bind(redis),
    eval_ro: redis.eval_ro.bind(redis),
    function: redis.function.bind(redis),
  } as unknown as IoRedisLike;
  return { client, decidedAt: () => decidedAt };
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe("RedisStore on Redis's own clock (the production path)", () => {
  it(
    'decides like the reference at the ms Redis timed each call at, state read from the keys’ TTLs included',
    async () => {
      // Redis's clock cannot be moved: windows of a few ms, and real waits between calls, carry the traces
      // over window edges, refills and expiries. A call Redis did not time within one ms ends its trace.
      const realGap = fc.oneof({ weight: 3, arbitrary: fc.constant(0) }, { weight: 4, arbitrary: fc.integer({ min: 1, max: 400 }) });
      let complete = 0;
      let runs = 0;
      await fc.assert(
        fc.asyncProperty(rulesAndPlans([4, 40]), operations(realGap), async (rules, steps) => {
          const { client, decidedAt } = timedClient(redisServer.client);
          const clock = { now: () => Date.now(), advance: (ms: number) => (ms > 0 ? sleep(ms) : undefined), decidedAt };
          runs++;
          if (await checkTrace(new RedisStore({ client }), rules, steps, clock)) complete++;
        }),
        { numRuns: 200 },
      );
      expect(complete).toBeGreaterThan(runs / 2);
    },
    propertyTimeout,
  );
});

describe('MemoryStore and RedisStore side by side', () => {
  it(
    'make the same decisions on the same random traces',
    async () => {
      await fc.assert(
        fc.asyncProperty(rulesAndPlans([30_000, 600_000]), operations(), async ([rules = [], ...plans], steps) => {
          let now = FUTURE + 10 * 86_400_000;
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
          const leases: { keys: Keys; memory: string; redis: string }[] = [];
          for (const step of steps) {
            now += Math.round((step.gap * shortest) / 1000);
            const keys = keysFor(rules, step.keys);
            const { op, cost } = step;
            const given = step.plan === 0 ? {} : { rules: plans[step.plan - 1] };
            if (op === 'consume') {
              const { leaseId: inRedis, ...fromRedis } = await redisLimiter.consume(keys, { cost, ...given });
              const { leaseId: inMemory, ...fromMemory } = await memory.consume(keys, { cost, ...given });
              expect(fromRedis).toEqual(fromMemory);
              if (inRedis !== undefined && inMemory !== undefined) leases.push({ keys, memory: inMemory, redis: inRedis });
            } else if (op === 'release') {
              const lease = leases.splice(cost % Math.max(1, leases.length), 1)[0];
              if (lease !== undefined) await Promise.all([memory.release(lease.keys, lease.memory), redisLimiter.release(lease.keys, lease.redis)]);
            } else if (op === 'peek') expect(await redisLimiter.peek(keys, given)).toEqual(await memory.peek(keys, given));
            else if (op === 'refund') await Promise.all([memory.refund(keys, { cost, ...given }), redisLimiter.refund(keys, { cost, ...given })]);
            else await Promise.all([memory.reset(keys, given), redisLimiter.reset(keys, given)]);
          }
        }),
        { numRuns: 200 },
      );
    },
    propertyTimeout,
  );
});
