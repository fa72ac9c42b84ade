/*
 * In-process Redis stores on one ioredis connection to a private
 * redis-server: decisions per second with each call awaited in turn, and
 * with 64 calls in flight, as ratios to the floor (one EVALSHA of a minimal
 * INCR + PEXPIRE script on the same connection). Rounds interleave the
 * contenders in a rotated order.
 */

import type { BenchConfig } from './config.js';
import { keyPool, randomSequence } from './keys.js';
import { log } from './log.js';
import { LIMIT, WINDOW_MS } from './memory-contenders.js';
import { createRedisContender, type RedisContenderId, type RedisContenderInfo, redisContenderInfo, runCalls } from './redis-contenders.js';
import { type MemoryRow, redisBytesPerKey } from './redis-memory.js';
import { startBenchRedis } from './redis-server.js';
import { formatRate, rotate } from './stats.js';

export type RedisMode = 'sequential' | 'concurrent';

export const redisThroughputContenders: readonly RedisContenderId[] = [
  'floor',
  'rate-limit-redis',
  'rate-limiter-flexible',
  'floodgate-fixed-window',
  'floodgate-gcra',
  'floodgate-sliding-window', // the default algorithm, which the HTTP rows run
];

export interface Failures {
  notAdmitted: number;
  errors: number;
  firstError?: string;
}

const perContender = <T>(make: () => T): Partial<Record<RedisContenderId, T>> => Object.fromEntries(redisThroughputContenders.map((id) => [id, make()]));

export interface RedisResults {
  contenders: readonly RedisContenderInfo[];
  /** Decisions per second per round. */
  throughput: Record<RedisMode, Partial<Record<RedisContenderId, number[]>>>;
  /** Redis CPU per decision, µs (the EVALSHA/EVAL time Redis reports in INFO commandstats), per round. */
  redisMicrosPerCall: Record<RedisMode, Partial<Record<RedisContenderId, number[]>>>;
  /** Calls not admitted or failed (should be 0). */
  failures: Partial<Record<RedisContenderId, Failures>>;
  inFlight: number;
  sequentialOps: number;
  concurrentOps: number;
  memory: MemoryRow[];
  redisVersion: string;
}

/** Time Redis spent in scripts since the last RESETSTAT, µs (every contender calls Redis with EVALSHA; EVAL after a NOSCRIPT). */
async function scriptMicros(redis: { info(section: string): Promise<string> }): Promise<number> {
  const stats = await redis.info('commandstats');
  let micros = 0;
  for (const match of stats.matchAll(/^cmdstat_(?:evalsha|eval):calls=\d+,usec=(\d+)/gm)) micros += Number(match[1]);
  return micros;
}

export async function benchRedis(config: BenchConfig): Promise<RedisResults> {
  const { rounds, sequentialOps, concurrentOps, inFlight, memoryKeys } = config.redis;
  const server = await startBenchRedis();
  try {
    const redis = server.client();
    const redisVersion = /redis_version:(\S+)/.exec(await redis.info('server'))?.[1] ?? 'unknown';
    const results: RedisResults = {
      contenders: redisThroughputContenders.map((id) => redisContenderInfo[id]),
      throughput: { sequential: perContender(() => []), concurrent: perContender(() => []) },
      redisMicrosPerCall: { sequential: perContender(() => []), concurrent: perContender(() => []) },
      failures: perContender(() => ({ notAdmitted: 0, errors: 0 })),
      inFlight,
      sequentialOps,
      concurrentOps,
      memory: [],
      redisVersion,
    };
    const keys = randomSequence(keyPool(100_000), Math.max(sequentialOps, concurrentOps));
    const contenders = new Map(
      await Promise.all(
        redisThroughputContenders.map(async (id) => [id, await createRedisContender(id, redis, { limit: LIMIT, windowMs: WINDOW_MS })] as const),
      ),
    );
    // Warm-up: scripts loaded, code paths compiled, the connection busy.
    for (const contender of contenders.values()) {
      await runCalls(contender, keys, 1_000, 1);
      await runCalls(contender, keys, 4_000, inFlight);
      await redis.flushall();
    }
    for (let round = 0; round < rounds; round++) {
      for (const mode of ['sequential', 'concurrent'] as const) {
        const ops = mode === 'sequential' ? sequentialOps : concurrentOps;
        for (const id of rotate(redisThroughputContenders, round)) {
          // Every contender starts from an empty keyspace (and Floodgate's algorithms share key names).
          await redis.flushall();
          await redis.config('RESETSTAT');
          const started = process.hrtime.bigint();
          const outcome = await runCalls(contenders.get(id) as NonNullable<ReturnType<typeof contenders.get>>, keys, ops, mode === 'sequential' ? 1 : inFlight);
          const opsPerSecond = ops / (Number(process.hrtime.bigint() - started) / 1e9);
          results.throughput[mode][id]?.push(opsPerSecond);
          results.redisMicrosPerCall[mode][id]?.push((await scriptMicros(redis)) / ops);
          const failures = results.failures[id] as Failures;
          failures.notAdmitted += ops - outcome.admitted - outcome.errors;
          failures.errors += outcome.errors;
          if (outcome.firstError !== undefined) failures.firstError ??= outcome.firstError;
          log(`redis round ${round + 1}/${rounds} ${mode.padEnd(10)} ${id.padEnd(24)} ${formatRate(opsPerSecond)}/s`);
        }
      }
    }
    results.memory = await redisBytesPerKey(redis, memoryKeys);
    return results;
  } finally {
    await server.stop();
  }
}
