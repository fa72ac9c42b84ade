// What the fragments of packages/fastify/README.md use without declaring it: the
// app around them. A snippet that uses none of these names is a whole program
// (and, in JavaScript, is run).
import type { IoRedisLike } from '@floodgate/core';
import type { FastifyInstance, RouteHandlerMethod } from 'fastify';

declare global {
  const app: FastifyInstance;
  /** The app's ioredis client (what `RedisStore` takes from ioredis). */
  const redis: IoRedisLike;
  /** The app's own route handler. */
  const login: RouteHandlerMethod;
}
