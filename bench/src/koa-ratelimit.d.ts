/** The part of koa-ratelimit (which ships no types) that the bench uses. */
declare module 'koa-ratelimit' {
  import type { Middleware } from 'koa';

  interface Options {
    driver: 'memory' | 'redis';
    /** A Map (memory driver) or an ioredis client (redis driver). */
    db: unknown;
    max: number;
    duration: number;
  }

  export default function ratelimit(options: Options): Middleware;
}
