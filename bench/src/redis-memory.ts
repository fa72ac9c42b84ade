/*
 * Redis bytes per key: `used_memory` before and after N keys written through
 * each library (one rule, its default key naming, an IPv4-like client key),
 * divided by N. Measured at 16 384 keys, where Redis's main hash table is
 * full, and at 10 000, where it is partly empty (its slots are shared by
 * fewer keys, so each key looks ~18 bytes dearer).
 */
import type { Redis } from 'ioredis';
import { ipKey } from './keys.js';
import { log } from './log.js';
import { createRedisContender, type RedisContenderId, rateAlgorithms, runCalls } from './redis-contenders.js';

export interface MemoryRow {
  contender: RedisContenderId;
  /** One example of the library's Redis key for client 10.0.0.1. */
  exampleKey: string;
  keys: number;
  bytesPerKey: number;
}

export const redisMemoryContenders: readonly RedisContenderId[] = [
  'floor',
  'rate-limit-redis',
  'rate-limiter-flexible',
  ...rateAlgorithms.map((algorithm) => `floodgate-${algorithm}` as const),
];

async function usedMemory(redis: Redis): Promise<number> {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)?.[1]);
}

/** Writes through every library at each key count; flushes the (private) server in between. */
export async function redisBytesPerKey(redis: Redis, counts: readonly number[]): Promise<MemoryRow[]> {
  const rows: MemoryRow[] = [];
  for (const contender of redisMemoryContenders) {
    for (const keys of counts) {
      await redis.flushall();
      // A limit of 100 per hour: the shape of an ordinary rule; one call per key stays far below it.
      const limiter = await createRedisContender(contender, redis, { limit: 100, windowMs: 3_600_000 });
      await limiter.call('warm-up'); // loads the script before the first reading
      await redis.flushall();
      const before = await usedMemory(redis);
      const clients = Array.from({ length: keys }, (_, i) => ipKey(i));
      const outcome = await runCalls(limiter, clients, keys, 256);
      if (outcome.errors > 0) throw new Error(`${contender}: ${outcome.firstError}`);
      const after = await usedMemory(redis);
      const exampleKey = (await redis.keys('*10.0.0.1*')).find((name) => /10\.0\.0\.1(?!\d)/.test(name)) ?? '?';
      rows.push({ contender, exampleKey, keys, bytesPerKey: Math.round(((after - before) / keys) * 10) / 10 });
      log(`redis memory ${contender.padEnd(24)} ${String(keys).padStart(6)} keys ${(after - before) / keys} B/key (${exampleKey})`);
    }
  }
  await redis.flushall();
  return rows;
}
