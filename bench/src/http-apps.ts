/*
 * The HTTP servers compared in http.ts: each framework bare, with Floodgate
 * (memory and Redis store), and with the rate limiter its users would pick
 * instead. Every limiter keys by client IP, the default everywhere, and keeps
 * its default headers (Floodgate's singleKey warning is off: one load generator
 * is one client); limits are far above what a run sends, so every response is
 * a 200 "ok".
 */
import { createServer, type Server } from 'node:http';
import { RedisStore } from '@floodgate/core';
import { rateLimit as floodgateExpress } from '@floodgate/express';
import { rateLimit as floodgateHono } from '@floodgate/hono';
import { rateLimit as floodgateKoa } from '@floodgate/koa';
import { createAdaptorServer } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import express from 'express';
import { rateLimit as expressRateLimit } from 'express-rate-limit';
import { Hono } from 'hono';
import { RedisStore as HonoRedisStore, rateLimiter as honoRateLimiter } from 'hono-rate-limiter';
import { Redis } from 'ioredis';
import Koa from 'koa';
import koaRatelimit from 'koa-ratelimit';
import { RedisStore as RateLimitRedisStore, type RedisReply } from 'rate-limit-redis';

export type Framework = 'express' | 'koa' | 'hono';
export const frameworks: readonly Framework[] = ['express', 'koa', 'hono'];

export type Variant = 'bare' | 'floodgate-memory' | 'floodgate-redis' | 'peer-memory' | 'peer-redis';
export const variants: readonly Variant[] = ['bare', 'floodgate-memory', 'floodgate-redis', 'peer-memory', 'peer-redis'];

/** What each row is called in the report. */
export const variantLabels: Record<Framework, Record<Variant, string>> = {
  express: {
    bare: 'Express 5, bare',
    'floodgate-memory': '@floodgate/express, memory',
    'floodgate-redis': '@floodgate/express, Redis',
    'peer-memory': 'express-rate-limit, memory',
    'peer-redis': 'express-rate-limit + rate-limit-redis',
  },
  koa: {
    bare: 'Koa 3, bare',
    'floodgate-memory': '@floodgate/koa, memory',
    'floodgate-redis': '@floodgate/koa, Redis',
    'peer-memory': 'koa-ratelimit, memory driver',
    'peer-redis': 'koa-ratelimit, redis driver',
  },
  hono: {
    bare: 'Hono 4 (@hono/node-server), bare',
    'floodgate-memory': '@floodgate/hono, memory',
    'floodgate-redis': '@floodgate/hono, Redis',
    'peer-memory': 'hono-rate-limiter, memory',
    'peer-redis': 'hono-rate-limiter + its RedisStore',
  },
};

/** Out of reach of any run: nothing is limited. */
const LIMIT = 1_000_000_000;
const WINDOW_MS = 60_000;
/** One load generator is one client by design: the singleKey check would say so once per server. The other checks stay on. */
const VALIDATE = { singleKey: false } as const;

/** An ioredis client as Floodgate's README sets it up, ready before the server listens. */
async function connect(port: number): Promise<Redis> {
  const redis = new Redis({ port, host: '127.0.0.1', enableOfflineQueue: false, maxRetriesPerRequest: 1 });
  await new Promise<void>((resolve, reject) => {
    redis.once('ready', resolve);
    redis.once('error', reject);
  });
  return redis;
}

async function expressServer(variant: Variant, redisPort: number): Promise<Server> {
  const app = express();
  switch (variant) {
    case 'floodgate-memory':
      app.use(floodgateExpress({ limit: LIMIT, windowMs: WINDOW_MS, validate: VALIDATE }));
      break;
    case 'floodgate-redis':
      app.use(floodgateExpress({ limit: LIMIT, windowMs: WINDOW_MS, validate: VALIDATE, store: new RedisStore({ client: await connect(redisPort) }) }));
      break;
    case 'peer-memory':
      app.use(expressRateLimit({ limit: LIMIT, windowMs: WINDOW_MS }));
      break;
    case 'peer-redis': {
      const redis = await connect(redisPort);
      const store = new RateLimitRedisStore({ sendCommand: (command: string, ...args: string[]) => redis.call(command, ...args) as Promise<RedisReply> });
      app.use(expressRateLimit({ limit: LIMIT, windowMs: WINDOW_MS, store }));
      break;
    }
  }
  app.get('/', (_req, res) => {
    res.send('ok');
  });
  return createServer(app);
}

async function koaServer(variant: Variant, redisPort: number): Promise<Server> {
  const app = new Koa();
  switch (variant) {
    case 'floodgate-memory':
      app.use(floodgateKoa({ limit: LIMIT, windowMs: WINDOW_MS, validate: VALIDATE }));
      break;
    case 'floodgate-redis':
      app.use(floodgateKoa({ limit: LIMIT, windowMs: WINDOW_MS, validate: VALIDATE, store: new RedisStore({ client: await connect(redisPort) }) }));
      break;
    case 'peer-memory':
      app.use(koaRatelimit({ driver: 'memory', db: new Map(), max: LIMIT, duration: WINDOW_MS }));
      break;
    case 'peer-redis':
      app.use(koaRatelimit({ driver: 'redis', db: await connect(redisPort), max: LIMIT, duration: WINDOW_MS }));
      break;
  }
  app.use((ctx) => {
    ctx.body = 'ok';
  });
  return createServer(app.callback());
}

async function honoServer(variant: Variant, redisPort: number): Promise<Server> {
  const app = new Hono();
  // hono-rate-limiter has no default key: the client address, as its docs show for Node.
  const keyGenerator = (c: Parameters<typeof getConnInfo>[0]) => getConnInfo(c).remote.address ?? '';
  switch (variant) {
    case 'floodgate-memory':
      app.use(floodgateHono({ limit: LIMIT, windowMs: WINDOW_MS, validate: VALIDATE }));
      break;
    case 'floodgate-redis':
      app.use(floodgateHono({ limit: LIMIT, windowMs: WINDOW_MS, validate: VALIDATE, store: new RedisStore({ client: await connect(redisPort) }) }));
      break;
    case 'peer-memory':
      app.use(honoRateLimiter({ limit: LIMIT, windowMs: WINDOW_MS, keyGenerator }));
      break;
    case 'peer-redis': {
      const redis = await connect(redisPort);
      // Its RedisStore speaks @upstash/redis's client interface: four calls mapped onto ioredis.
      const client = {
        scriptLoad: (script: string) => redis.script('LOAD', script) as Promise<string>,
        evalsha: <TArgs extends unknown[], TData = unknown>(sha: string, keys: string[], args: TArgs) =>
          redis.evalsha(sha, keys.length, ...keys, ...(args as string[])) as Promise<TData>,
        decr: (key: string) => redis.decr(key),
        del: (key: string) => redis.del(key),
      };
      app.use(honoRateLimiter({ limit: LIMIT, windowMs: WINDOW_MS, keyGenerator, store: new HonoRedisStore({ client }) }));
      break;
    }
  }
  app.get('/', (c) => c.text('ok'));
  return createAdaptorServer({ fetch: app.fetch }) as Server;
}

/** A server for `framework` with `variant`, listening on a free loopback port. */
export async function startServer(framework: Framework, variant: Variant, redisPort: number): Promise<{ server: Server; port: number }> {
  const server =
    framework === 'express'
      ? await expressServer(variant, redisPort)
      : framework === 'koa'
        ? await koaServer(variant, redisPort)
        : await honoServer(variant, redisPort);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return { server, port: typeof address === 'object' && address ? address.port : 0 };
}
