// @ts-check
// One app instance: Express + Floodgate on a RedisStore. Start several of these
// against the same Redis and they share one limit per API key.
//
//   REDIS_PORT=6390 PORT=3001 INSTANCE=a node app.js
//
// run.js starts a private redis-server and two of these; see README there.
import { RedisStore } from '@floodgate/core';
import { keyBy, rateLimit } from '@floodgate/express';
import express from 'express';
import { Redis } from 'ioredis';

const LIMIT = 30;
const instance = process.env.INSTANCE ?? 'app';

const redis = new Redis({
  host: process.env.REDIS_HOST ?? '127.0.0.1',
  port: Number(process.env.REDIS_PORT),
  enableOfflineQueue: false, // fail fast while disconnected instead of queueing requests
  maxRetriesPerRequest: 1,
});
// Serve only once Redis answers: with the offline queue off, earlier calls would fail.
await new Promise((resolve, reject) => {
  redis.once('ready', resolve);
  redis.once('error', reject);
});

const app = express();
app.get(
  '/api',
  rateLimit({
    // 30 calls an hour per API key, across every instance. sliding-log is exact:
    // the Lua script decides and records in one atomic step, so racing instances
    // can never admit more than the limit between them.
    algorithm: 'sliding-log',
    limit: LIMIT,
    windowMs: 3_600_000,
    key: keyBy.header('x-api-key'),
    store: new RedisStore({ client: redis }),
    // A shared quota that must hold: if Redis is unreachable, answer 503 rather than serve unlimited.
    onStoreError: 'deny',
    timeoutMs: 2_000,
  }),
  (req, res) => {
    res.json({ instance, remaining: req.rateLimit?.remaining });
  },
);

const server = app.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const address = server.address();
  console.log(`${instance} listening on http://127.0.0.1:${typeof address === 'object' && address ? address.port : ''}`);
});

function shutdown() {
  server.close();
  server.closeAllConnections();
  redis.quit().finally(() => process.exit(0));
}
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
