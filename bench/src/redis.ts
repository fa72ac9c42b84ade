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

/** The rows of issue 18's targets (and of the callgrind counts). */
export const redisAlgorithmContenders: readonly RedisContenderId[] = [
  'floor',
  'rate-limit-redis',
  'rate-limiter-flexible',
  'floodgate-fixed-window',
  'floodgate-gcra',
  'floodgate-sliding-window', // the default algorithm, which the HTTP rows run
];

export const redisThroughputContenders: readonly RedisContenderId[] = [
  ...redisAlgorithmContenders,
  'floodgate-fixed-window-plans', // issue 15: against floodgate-fixed-window
  'floodgate-3-scopes', // issue 14: against floodgate-3-stacked
  'floodgate-3-stacked',
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
  /** Redis CPU per decision, µs (the FCALL/EVALSHA/EVAL time Redis reports in INFO commandstats), per round. */
  redisMicrosPerCall: Record<RedisMode, Partial<Record<RedisContenderId, number[]>>>;
  /** Commands the client sent per decision (sequential): round trips, as no library here pipelines. */
  sentPerCall: Partial<Record<RedisContenderId, number>>;
  /** Commands Redis ran per decision (INFO commandstats, sequential): those sent and those its scripts and functions call. */
  commandsPerCall: Partial<Record<RedisContenderId, number>>;
  /** Writes to the connection's socket per call with calls in flight (each a system call): 1 unless the library batches. */
  writesPerCall: Partial<Record<RedisContenderId, number>>;
  /** Calls not admitted or failed (should be 0). */
  failures: Partial<Record<RedisContenderId, Failures>>;
  inFlight: number;
  sequentialOps: number;
  concurrentOps: number;
  memory: MemoryRow[];
  redisVersion: string;
}

/**
 * Since the last RESETSTAT: the µs Redis spent in scripts and functions
 * (FCALL for Floodgate, EVALSHA for the others; EVAL after a NOSCRIPT), and
 * the commands it ran, but the INFO and CONFIG of the harness.
 */
async function commandStats(redis: { info(section: string): Promise<string> }): Promise<{ scriptMicros: number; commands: number }> {
  const stats = await redis.info('commandstats');
  let scriptMicros = 0;
  let commands = 0;
  for (const match of stats.matchAll(/^cmdstat_([a-z_|]+):calls=(\d+),usec=(\d+)/gm)) {
    const [, name = '', calls, usec] = match;
    if (/^(?:fcall|fcall_ro|evalsha|eval|evalsha_ro|eval_ro)$/.test(name)) scriptMicros += Number(usec);
    if (!/^(?:info|config)/.test(name)) commands += Number(calls);
  }
  return { scriptMicros, commands };
}

export async function benchRedis(config: BenchConfig): Promise<RedisResults> {
  const { rounds, sequentialOps, concurrentOps, inFlight, memoryKeys } = config.redis;
  const server = await startBenchRedis();
  try {
    const redis = server.client();
    // Every command the shared connection sends (ioredis sends each through sendCommand, pipelines too).
    let sent = 0;
    const send = redis.sendCommand.bind(redis);
    redis.sendCommand = (...args: Parameters<typeof redis.sendCommand>) => {
      sent++;
      return send(...args);
    };
    const redisVersion = /redis_version:(\S+)/.exec(await redis.info('server'))?.[1] ?? 'unknown';
    // Every write to its socket (connected now): ioredis writes each command on its own, a pipeline in one.
    let writes = 0;
    const stream = redis.stream;
    const write = stream.write;
    stream.write = function (this: typeof stream, ...args: Parameters<typeof write>) {
      writes++;
      return write.apply(this, args);
    } as typeof write;
    const results: RedisResults = {
      contenders: redisThroughputContenders.map((id) => redisContenderInfo[id]),
      throughput: { sequential: perContender(() => []), concurrent: perContender(() => []) },
      redisMicrosPerCall: { sequential: perContender(() => []), concurrent: perContender(() => []) },
      sentPerCall: {},
      commandsPerCall: {},
      writesPerCall: {},
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
          const sentBefore = sent;
          const writesBefore = writes;
          const started = process.hrtime.bigint();
          const outcome = await runCalls(contenders.get(id) as NonNullable<ReturnType<typeof contenders.get>>, keys, ops, mode === 'sequential' ? 1 : inFlight);
          const opsPerSecond = ops / (Number(process.hrtime.bigint() - started) / 1e9);
          results.throughput[mode][id]?.push(opsPerSecond);
          const sentDuring = sent - sentBefore;
          if (mode === 'concurrent') results.writesPerCall[id] = (writes - writesBefore) / ops;
          const stats = await commandStats(redis);
          results.redisMicrosPerCall[mode][id]?.push(stats.scriptMicros / ops);
          if (mode === 'sequential') {
            results.sentPerCall[id] = sentDuring / ops;
            results.commandsPerCall[id] = stats.commands / ops;
          }
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
