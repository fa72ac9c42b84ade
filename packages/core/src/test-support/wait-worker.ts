/*
 * One of the processes of the cross-process wait test: its own ioredis
 * connection and `waiters` calls of limiter.wait() on one key, all made at
 * once when a line arrives on stdin (so that every process starts together).
 * Prints one JSON line: for each admission, in the order they came, the index
 * of the call, the local time and the decision's resetMs (with them the test
 * finds the fixed window, on Redis's clock, that admitted the call).
 * Run with: node --import tsx wait-worker.ts <port> <prefix> <waiters>
 */
import { once } from 'node:events';
import { Redis } from 'ioredis';
import { createLimiter } from '../limiter.js';
import { RedisStore } from '../stores/redis-store.js';

const [port, prefix, waiters] = process.argv.slice(2);
const redis = new Redis({ port: Number(port), host: '127.0.0.1' });
const limiter = createLimiter({
  algorithm: 'fixed-window',
  limit: 10,
  windowMs: 1_000,
  store: new RedisStore({ client: redis }),
  prefix,
  timeoutMs: 30_000,
  onStoreError: 'deny',
});

await redis.ping();
console.log('ready');
await once(process.stdin, 'data');
const admissions: { call: number; localMs: number; resetMs: number }[] = [];
await Promise.all(
  Array.from({ length: Number(waiters) }, (_, call) =>
    limiter.wait('shared', { maxWaitMs: 60_000 }).then((decision) => {
      if (decision.storeError) throw decision.storeError;
      admissions.push({ call, localMs: Date.now(), resetMs: decision.resetMs });
    }),
  ),
);
redis.disconnect();
console.log(JSON.stringify(admissions));
process.stdin.destroy();
