/*
 * One of the processes of the concurrency test: its own ioredis connection,
 * `inflight` calls at a time, `calls` calls on one key. Prints {"admitted": n}.
 * Run with: node --import tsx consume-worker.ts <port> <algorithm> <prefix> <calls> <inflight>
 */
import { Redis } from 'ioredis';
import { createLimiter } from '../limiter.js';
import type { AlgorithmName } from '../rules.js';
import { RedisStore } from '../stores/redis-store.js';

const [port, algorithm, prefix, calls, inflight] = process.argv.slice(2);
const redis = new Redis({ port: Number(port), host: '127.0.0.1' });
// A window far longer than the test: every call falls in one window, so exactly `limit` may pass. Windows
// are aligned to the epoch: a sliding window of 2.5 * 10^11 ms (the longest its size bound allows at this
// limit, in round numbers) next ends in 2033.
const limiter = createLimiter({
  algorithm: algorithm as AlgorithmName,
  limit: 1000,
  windowMs: algorithm === 'sliding-window' ? 250_000_000_000 : 1_000_000_000_000,
  store: new RedisStore({ client: redis }),
  prefix,
  timeoutMs: 30_000,
  onStoreError: 'deny',
});

let next = 0;
let admitted = 0;
const total = Number(calls);
async function lane(): Promise<void> {
  while (next < total) {
    next++;
    const decision = await limiter.consume('shared-key');
    if (decision.storeError) throw decision.storeError;
    if (decision.allowed) admitted++;
  }
}
await Promise.all(Array.from({ length: Number(inflight) }, lane));
redis.disconnect();
console.log(JSON.stringify({ admitted }));
