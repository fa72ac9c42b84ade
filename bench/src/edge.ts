/*
 * Shared limits on the edge (issue 17): decisions per second through Redis
 * over HTTP, and through a Durable Object. The REST bridge of
 * @floodgate/test-support speaks the Upstash REST protocol in front of a
 * private redis-server (in a process of its own); @upstash/redis is the real
 * client, shared by Floodgate's RedisStore and @upstash/ratelimit. The Durable
 * Object row runs @floodgate/cloudflare's DurableObjectStore in workerd (the
 * store host of the conformance suite: each decision one POST from Node to a
 * Worker, which asks the key's object). Rounds rotate the order; each row runs
 * calls awaited in turn, and `inFlight` at a time.
 */
import { fileURLToPath } from 'node:url';
import { createLimiter, type Decision, RedisStore, type Store } from '@floodgate/core';
import { remoteStore, startWorkerd } from '@floodgate/test-support';
import { Ratelimit } from '@upstash/ratelimit';
import { Redis as UpstashRedis } from '@upstash/redis';
import { startWorker } from './child.js';
import type { BenchConfig } from './config.js';
import { keyPool, randomSequence } from './keys.js';
import { log } from './log.js';
import type { Contender } from './memory-contenders.js';
import { LIMIT, WINDOW_MS } from './memory-contenders.js';
import type { RedisMode } from './redis.js';
import { runCalls } from './redis-contenders.js';
import { startBenchRedis } from './redis-server.js';
import { formatRate, rotate } from './stats.js';

export type EdgeContenderId =
  | 'floodgate-upstash-fixed-window'
  | 'upstash-ratelimit-fixed-window'
  | 'floodgate-upstash-sliding-window'
  | 'upstash-ratelimit-sliding-window'
  | 'floodgate-durable-object-fixed-window';

export interface EdgeContenderInfo {
  id: EdgeContenderId;
  label: string;
  floodgate: boolean;
}

export const edgeContenders: readonly EdgeContenderInfo[] = [
  { id: 'floodgate-upstash-fixed-window', label: 'Floodgate RedisStore on @upstash/redis, fixed-window', floodgate: true },
  { id: 'upstash-ratelimit-fixed-window', label: '@upstash/ratelimit fixedWindow', floodgate: false },
  { id: 'floodgate-upstash-sliding-window', label: 'Floodgate RedisStore on @upstash/redis, sliding-window', floodgate: true },
  { id: 'upstash-ratelimit-sliding-window', label: '@upstash/ratelimit slidingWindow', floodgate: false },
  { id: 'floodgate-durable-object-fixed-window', label: 'Floodgate DurableObjectStore (workerd), fixed-window', floodgate: true },
];

export interface EdgeResults {
  contenders: readonly EdgeContenderInfo[];
  /** Decisions per second per round. */
  throughput: Record<RedisMode, Partial<Record<EdgeContenderId, number[]>>>;
  /** Calls not admitted or failed (should be 0). */
  failures: Partial<Record<EdgeContenderId, { notAdmitted: number; errors: number; firstError?: string }>>;
  /** REST requests to the bridge per decision (sequential): each library's round trips. */
  requestsPerCall: Partial<Record<EdgeContenderId, number>>;
  /** µs Redis spent per decision in scripts and functions (INFO commandstats, in flight), per round. */
  redisMicrosPerCall: Partial<Record<EdgeContenderId, number[]>>;
  sequentialOps: number;
  concurrentOps: number;
  inFlight: number;
  /** How Floodgate's RedisStore ran its library over REST ('functions': FCALL, 'scripts': EVALSHA). */
  floodgateMode: string;
}

const storeHost = fileURLToPath(new URL('../../packages/cloudflare/src/test-support/store-host.ts', import.meta.url));

/** A sliding window weighs counts by ms: the bound of the Redis contenders (see redis-contenders.ts). */
const SLIDING_LIMIT = Math.min(LIMIT, Math.floor(2 ** 50 / (4 * WINDOW_MS)));

function floodgateContender(store: Store, algorithm: 'fixed-window' | 'sliding-window'): Contender {
  const limiter = createLimiter({ algorithm, limit: algorithm === 'sliding-window' ? SLIDING_LIMIT : LIMIT, windowMs: WINDOW_MS, store });
  return {
    call: (key) => limiter.consume(key),
    admits: (decision) => (decision as Decision).allowed,
    failure: (decision) => (decision as Decision).storeError,
  };
}

function upstashContender(redis: UpstashRedis, limiter: ConstructorParameters<typeof Ratelimit>[0]['limiter'], prefix: string): Contender {
  // Its defaults: no analytics; an ephemeral cache of denied identifiers (nothing is denied here).
  const ratelimit = new Ratelimit({ redis, limiter, prefix });
  return { call: (key) => ratelimit.limit(key), admits: (response) => (response as { success: boolean }).success };
}

/** µs Redis spent in scripts and functions since the last RESETSTAT. */
async function scriptMicros(redis: { info(section: string): Promise<string> }): Promise<number> {
  let micros = 0;
  for (const [, usec] of (await redis.info('commandstats')).matchAll(/^cmdstat_(?:fcall|fcall_ro|evalsha|eval|evalsha_ro|eval_ro):calls=\d+,usec=(\d+)/gm)) {
    micros += Number(usec);
  }
  return micros;
}

export async function benchEdge(config: BenchConfig): Promise<EdgeResults> {
  const { rounds, sequentialOps, concurrentOps, inFlight } = config.edge;
  const redisServer = await startBenchRedis();
  const bridgeWorker = startWorker('./upstash-bridge-worker.ts', { input: { redisPort: redisServer.port } });
  const worker = await startWorkerd({ entry: storeHost, durableObjects: { FLOODGATE: 'FloodgateDurableObject' } });
  try {
    const bridge = await bridgeWorker.receive<{ url: string; token: string }>(30_000);
    const redis = redisServer.client();
    const upstash = new UpstashRedis({ url: bridge.url, token: bridge.token });
    /** REST requests the bridge served since the last time it was asked. */
    const servedRequests = async (): Promise<number> => {
      bridgeWorker.send('requests');
      return (await bridgeWorker.receive<{ served: number }>(10_000)).served;
    };
    const floodgateStore = new RedisStore({ client: upstash });
    const window = `${WINDOW_MS / 1000} s` as const;
    const contenders: Record<EdgeContenderId, Contender> = {
      'floodgate-upstash-fixed-window': floodgateContender(floodgateStore, 'fixed-window'),
      'upstash-ratelimit-fixed-window': upstashContender(upstash, Ratelimit.fixedWindow(LIMIT, window), 'upstash-fw'),
      'floodgate-upstash-sliding-window': floodgateContender(new RedisStore({ client: upstash, prefix: 'sw:' }), 'sliding-window'),
      'upstash-ratelimit-sliding-window': upstashContender(upstash, Ratelimit.slidingWindow(SLIDING_LIMIT, window), 'upstash-sw'),
      'floodgate-durable-object-fixed-window': floodgateContender(remoteStore(() => worker.url) as unknown as Store, 'fixed-window'),
    };
    const results: EdgeResults = {
      contenders: edgeContenders,
      throughput: { sequential: {}, concurrent: {} },
      failures: {},
      requestsPerCall: {},
      redisMicrosPerCall: {},
      sequentialOps,
      concurrentOps,
      inFlight,
      floodgateMode: floodgateStore.runsAs,
    };
    const keys = randomSequence(keyPool(100_000), Math.max(sequentialOps, concurrentOps));
    // Warm-up: scripts and functions loaded, connections open, code compiled.
    for (const contender of Object.values(contenders)) {
      await runCalls(contender, keys, 100, 1);
      await runCalls(contender, keys, 200, inFlight);
    }
    results.floodgateMode = floodgateStore.runsAs;
    const ids = edgeContenders.map((c) => c.id);
    for (let round = 0; round < rounds; round++) {
      for (const mode of ['sequential', 'concurrent'] as const) {
        const ops = mode === 'sequential' ? sequentialOps : concurrentOps;
        for (const id of rotate(ids, round)) {
          await redis.flushall();
          await servedRequests();
          await redis.config('RESETSTAT');
          const started = process.hrtime.bigint();
          const outcome = await runCalls(contenders[id], keys, ops, mode === 'sequential' ? 1 : inFlight);
          const opsPerSecond = ops / (Number(process.hrtime.bigint() - started) / 1e9);
          const rates = results.throughput[mode][id] ?? [];
          rates.push(opsPerSecond);
          results.throughput[mode][id] = rates;
          const served = await servedRequests();
          if (mode === 'concurrent' && !id.includes('durable-object')) {
            const micros = results.redisMicrosPerCall[id] ?? [];
            micros.push((await scriptMicros(redis)) / ops);
            results.redisMicrosPerCall[id] = micros;
          }
          if (mode === 'sequential' && !id.includes('durable-object')) results.requestsPerCall[id] = served / ops;
          const failures = results.failures[id] ?? { notAdmitted: 0, errors: 0 };
          results.failures[id] = failures;
          failures.notAdmitted += ops - outcome.admitted - outcome.errors;
          failures.errors += outcome.errors;
          if (outcome.firstError !== undefined) failures.firstError ??= outcome.firstError;
          log(`edge round ${round + 1}/${rounds} ${mode.padEnd(10)} ${id.padEnd(38)} ${formatRate(opsPerSecond)}/s`);
        }
      }
    }
    return results;
  } finally {
    await worker.stop();
    await bridgeWorker.stop();
    await redisServer.stop();
  }
}
