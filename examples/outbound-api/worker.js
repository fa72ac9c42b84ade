// @ts-check
// One worker process: `CALLS` calls to the fake API, all made at once, each
// through limiter.wrap(..., { wait: true }). The workers share one limit in
// Redis, so that together they stay under the API's 10 calls a second: a call
// waits for its turn instead of failing.
import { once } from 'node:events';
import { createLimiter, RedisStore } from '@floodgate/core';
import { Redis } from 'ioredis';

const { REDIS_PORT, API_URL, WORKER = '?', CALLS = '20' } = process.env;
const redis = new Redis({ port: Number(REDIS_PORT), host: '127.0.0.1', maxRetriesPerRequest: 1 });

const limiter = createLimiter({
  // The API allows 10 calls in any second, counted when they arrive. A shaping rule (leaky bucket, mode
  // 'shape') gives each call its own slot, evenly spaced, across every worker: wait() reserves the slot and
  // resolves when it comes, without asking again. A call reaches the API a little after its slot, and that
  // delay varies (the network, a busy event loop): one slot every 108 ms (10 per 1.08 s) keeps 80 ms of it,
  // so that no second at the API ever sees an 11th call. burst: how many slots may be reserved ahead (10.8 s).
  rules: [{ name: 'fake-api', algorithm: 'leaky-bucket', mode: 'shape', limit: 10, windowMs: 1_080, burst: 100 }],
  store: new RedisStore({ client: redis }),
  prefix: 'outbound:',
  // A shared quota that must hold: while Redis is unreachable, calls wait (and retry) rather than go unchecked.
  onStoreError: 'deny',
  // Calls that wait their turn anyway can give Redis longer than a web request would (the first call also loads the library).
  timeoutMs: 2_000,
});

/** The call to the third-party API, rate-limited: it resolves with the API's answer once it was its turn. */
const getItem = limiter.wrap(
  async (/** @type {number} */ id) => {
    const res = await fetch(`${API_URL}/items/${id}`, { headers: { 'x-worker': WORKER } });
    await res.arrayBuffer();
    return res.status;
  },
  { key: 'fake-api', wait: true },
);

// Ready: connected to Redis, and fetch loaded with a connection open (GET /health is neither limited nor
// counted), so that the first limited call is no slower to arrive than the rest. The workers start together
// when index.js says "go" on stdin, none of them still busy starting up while the others call.
await redis.ping();
await fetch(`${API_URL}/health`).then((res) => res.arrayBuffer());
console.log('ready');
await once(process.stdin, 'data');
process.stdin.destroy();

const statuses = await Promise.all(Array.from({ length: Number(CALLS) }, (_, i) => getItem(i)));
const ok = statuses.filter((status) => status === 200).length;
console.log(`worker ${WORKER}: ${ok} of ${statuses.length} calls answered 200`);
redis.disconnect();
