/*
 * A Redis hot path to profile (started by profile.ts): one Redis contender,
 * `ops` calls with `inFlight` at a time, the measured part under the profiler.
 */
import { Redis } from 'ioredis';
import { reply, workerInput } from './child.js';
import { keyPool, randomSequence } from './keys.js';
import { LIMIT, WINDOW_MS } from './memory-contenders.js';
import { startProfiling } from './profiler.js';
import { createRedisContender, type RedisContenderId, runCalls } from './redis-contenders.js';

export interface RedisProfileTask {
  contender: RedisContenderId;
  redisPort: number;
  ops: number;
  inFlight: number;
  profilePath: string;
}

const task = workerInput<RedisProfileTask>();
const redis = new Redis({ port: task.redisPort, host: '127.0.0.1' });
const contender = await createRedisContender(task.contender, redis, { limit: LIMIT, windowMs: WINDOW_MS });
const keys = randomSequence(keyPool(100_000), task.ops);
await runCalls(contender, keys, Math.min(task.ops, 4_000), task.inFlight); // warm-up
const stopProfiling = await startProfiling(task.profilePath);
const outcome = await runCalls(contender, keys, task.ops, task.inFlight);
await stopProfiling();
redis.disconnect();
await reply(outcome);
process.exit(0);
