/*
 * Takes `count` concurrency leases (of `windowMs`, default 1500) on one key
 * through a RedisStore, prints "held", and then hangs without releasing them,
 * waiting to be killed.
 * Run with: node --import tsx lease-worker.ts <port> <prefix> <count> [<windowMs>]
 */
import { Redis } from 'ioredis';
import { createLimiter } from '../limiter.js';
import { RedisStore } from '../stores/redis-store.js';

const [port, prefix, count, windowMs = '1500'] = process.argv.slice(2);
const redis = new Redis({ port: Number(port), host: '127.0.0.1' });
const limiter = createLimiter({
  algorithm: 'concurrency',
  limit: 5,
  windowMs: Number(windowMs),
  store: new RedisStore({ client: redis }),
  prefix,
  timeoutMs: 30_000, // a slow moment must not turn a lease into a store error
});
for (let i = 0; i < Number(count); i++) {
  const decision = await limiter.consume('worker-key');
  if (!decision.allowed || decision.leaseId === undefined) throw new Error('lease refused');
}
console.log('held');
setInterval(() => {}, 60_000);
