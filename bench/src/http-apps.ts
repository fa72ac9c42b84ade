/*
 * The HTTP servers compared in http.ts: each framework bare, with Floodgate
 * (memory and Redis store), and with the rate limiter its users would pick
 * instead. Every limiter keys by client IP, the default everywhere, and keeps
 * its default headers (Floodgate's singleKey warning is off: one load generator
 * is one client); limits are far above what a run sends, so every response is
 * a 200 "ok".
 */
import 'reflect-metadata';
import { createServer, type Server } from 'node:http';
import fastifyRateLimit from '@fastify/rate-limit';
import { RedisStore } from '@floodgate/core';
import { rateLimit as floodgateExpress } from '@floodgate/express';
import { rateLimit as floodgateFastify } from '@floodgate/fastify';
import { rateLimit as floodgateHono } from '@floodgate/hono';
import { rateLimit as floodgateKoa } from '@floodgate/koa';
import { FloodgateModule } from '@floodgate/nestjs';
import { createAdaptorServer } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import { Controller, Get, Module, type ModuleMetadata } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { ThrottlerGuard, ThrottlerModule } from '@nestjs/throttler';
import express from 'express';
import { rateLimit as expressRateLimit } from 'express-rate-limit';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { RedisStore as HonoRedisStore, rateLimiter as honoRateLimiter } from 'hono-rate-limiter';
import { Redis } from 'ioredis';
import Koa from 'koa';
import koaRatelimit from 'koa-ratelimit';
import { RedisStore as RateLimitRedisStore, type RedisReply } from 'rate-limit-redis';

export type Framework = 'express' | 'koa' | 'hono' | 'fastify' | 'nestjs';
export const frameworks: readonly Framework[] = ['express', 'koa', 'hono', 'fastify', 'nestjs'];

export type Variant = 'bare' | 'floodgate-memory' | 'floodgate-redis' | 'peer-memory' | 'peer-redis';
const allVariants: readonly Variant[] = ['bare', 'floodgate-memory', 'floodgate-redis', 'peer-memory', 'peer-redis'];

/** The rows of each framework: NestJS's peer (@nestjs/throttler) keeps its counts in memory only, as issue 16 compares it. */
export const variantsOf: Record<Framework, readonly Variant[]> = {
  express: allVariants,
  koa: allVariants,
  hono: allVariants,
  fastify: allVariants,
  nestjs: ['bare', 'floodgate-memory', 'peer-memory'],
};

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
  fastify: {
    bare: 'Fastify 5, bare',
    'floodgate-memory': '@floodgate/fastify, memory',
    'floodgate-redis': '@floodgate/fastify, Redis',
    'peer-memory': '@fastify/rate-limit, memory',
    'peer-redis': '@fastify/rate-limit, Redis',
  },
  nestjs: {
    bare: 'NestJS 12 (platform-express), bare',
    'floodgate-memory': '@floodgate/nestjs, memory',
    'floodgate-redis': '@floodgate/nestjs, Redis',
    'peer-memory': '@nestjs/throttler, memory',
    'peer-redis': '@nestjs/throttler, Redis',
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

async function fastifyServer(variant: Variant, redisPort: number): Promise<Server> {
  const app = Fastify();
  switch (variant) {
    case 'floodgate-memory':
      await app.register(floodgateFastify, { limit: LIMIT, windowMs: WINDOW_MS, validate: VALIDATE });
      break;
    case 'floodgate-redis':
      await app.register(floodgateFastify, {
        limit: LIMIT,
        windowMs: WINDOW_MS,
        validate: VALIDATE,
        store: new RedisStore({ client: await connect(redisPort) }),
      });
      break;
    case 'peer-memory':
      await app.register(fastifyRateLimit, { max: LIMIT, timeWindow: WINDOW_MS });
      break;
    case 'peer-redis':
      await app.register(fastifyRateLimit, { max: LIMIT, timeWindow: WINDOW_MS, redis: await connect(redisPort) });
      break;
  }
  app.get('/', async () => 'ok');
  await app.ready();
  return app.server;
}

/**
 * A Nest app as `nest new` makes one, on platform-express, built without a
 * compiler's decorator support: the decorators applied as functions (what
 * TypeScript emits for them).
 */
async function nestServer(variant: Variant, redisPort: number): Promise<Server> {
  class AppController {
    root(): string {
      return 'ok';
    }
  }
  Reflect.decorate([Get()], AppController.prototype, 'root', Object.getOwnPropertyDescriptor(AppController.prototype, 'root'));
  Reflect.decorate([Controller()], AppController);
  const imports: unknown[] = [];
  const providers: unknown[] = [];
  switch (variant) {
    case 'floodgate-memory':
      imports.push(FloodgateModule.forRoot({ limit: LIMIT, windowMs: WINDOW_MS, validate: VALIDATE }));
      break;
    case 'floodgate-redis':
      imports.push(
        FloodgateModule.forRoot({ limit: LIMIT, windowMs: WINDOW_MS, validate: VALIDATE, store: new RedisStore({ client: await connect(redisPort) }) }),
      );
      break;
    case 'peer-memory':
      imports.push(ThrottlerModule.forRoot([{ ttl: WINDOW_MS, limit: LIMIT }]));
      providers.push({ provide: APP_GUARD, useClass: ThrottlerGuard });
      break;
    case 'peer-redis':
      throw new Error('@nestjs/throttler has no Redis storage of its own');
  }
  class AppModule {}
  Reflect.decorate([Module({ imports, controllers: [AppController], providers } as ModuleMetadata)], AppModule);
  const app = await NestFactory.create(AppModule, { logger: ['error'] });
  await app.init();
  return app.getHttpServer() as Server;
}

/** A server for `framework` with `variant`, listening on a free loopback port. */
export async function startServer(framework: Framework, variant: Variant, redisPort: number): Promise<{ server: Server; port: number }> {
  const make = { express: expressServer, koa: koaServer, hono: honoServer, fastify: fastifyServer, nestjs: nestServer }[framework];
  const server = await make(variant, redisPort);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return { server, port: typeof address === 'object' && address ? address.port : 0 };
}
