// What the fragments of packages/core/README.md use without declaring it. A
// snippet that uses none of these names is a whole program (and, in
// JavaScript, is run).
import type * as floodgate from '@floodgate/core';
import type { Redis } from 'ioredis';

declare global {
  const createLimiter: typeof floodgate.createLimiter;
  const MemoryStore: typeof floodgate.MemoryStore;
  const RedisStore: typeof floodgate.RedisStore;
  const limiter: floodgate.Limiter;
  const redis: Redis;
  const key: string;
  const rules: floodgate.RuleOptions[];
  /** The work a concurrency lease covers. */
  function work(): Promise<void>;
}
