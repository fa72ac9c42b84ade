// @ts-check
// One app instance: Express + Floodgate on a RedisStore. Start several of these
// against the same Redis and they share one limit per API key, and one set of
// rules: rules published to Redis (RedisRuleSource) reach every instance at once.
//
//   REDIS_PORT=6390 PORT=3001 INSTANCE=a node app.js
//
// run.js starts a private redis-server and two of these; see README there.
import { createLimiter, RedisRuleSource, RedisStore } from '@floodgate/core';
import { keyBy, rateLimit } from '@floodgate/express';
import express from 'express';
import { Redis } from 'ioredis';

const instance = process.env.INSTANCE ?? 'app';

// Floodgate's recommended settings: the offline queue stays on (the default), so calls made
// while the first connection is being set up wait for it (at most timeoutMs); while the client
// is reconnecting, the RedisStore does not send at all, so nothing waits in that queue then.
const redis = new Redis({
  host: process.env.REDIS_HOST ?? '127.0.0.1',
  port: Number(process.env.REDIS_PORT),
  maxRetriesPerRequest: 1,
});
redis.on('error', (error) => console.error(`${instance}: redis: ${error.message}`));

// 30 calls an hour per API key, across every instance. sliding-log is exact:
// the Lua script decides and records in one atomic step, so racing instances
// can never admit more than the limit between them.
const limiter = createLimiter({
  algorithm: 'sliding-log',
  limit: 30,
  windowMs: 3_600_000,
  store: new RedisStore({ client: redis }),
  // A shared quota that must hold: if Redis is unreachable, answer 503 rather than serve unlimited.
  onStoreError: 'deny',
  timeoutMs: 2_000,
});

// The rules in force live in Redis under one key: applied now if some were published, then
// followed (pub/sub, and a re-read every 30 s). Invalid rules are logged and ignored.
const rules = new RedisRuleSource({ client: redis, key: 'fg:rules:api' });
await rules.attach(limiter);

const app = express();
app.get('/api', rateLimit({ limiter, key: keyBy.header('x-api-key') }), (req, res) => {
  res.json({ instance, remaining: req.rateLimit?.remaining });
});
// What this instance enforces now (not limited).
app.get('/rules', (_req, res) => {
  res.json(limiter.rules.map(({ name, algorithm, limit, windowMs }) => ({ name, algorithm, limit, windowMs })));
});

const server = app.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const address = server.address();
  console.log(`${instance} listening on http://127.0.0.1:${typeof address === 'object' && address ? address.port : ''}`);
});

function shutdown() {
  rules.close();
  server.close();
  server.closeAllConnections();
  redis.quit().finally(() => process.exit(0));
}
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
