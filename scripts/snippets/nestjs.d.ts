// What the fragments of packages/nestjs/README.md use without declaring it: the
// app's own modules and tokens. A snippet that uses none of these names is a
// whole program.
import type { InjectionToken } from '@nestjs/common';

declare global {
  /** The app's module that provides its ioredis client. */
  class RedisModule {}
  /** The injection token of that client. */
  const REDIS_CLIENT: InjectionToken;
}
