// What the root README's PostgreSQL fragment uses without declaring it (it compiles in examples/postgres-no-redis).
import type * as floodgate from '@floodgate/express';
import type { Express as ExpressApp } from 'express';

declare global {
  const app: ExpressApp;
  const rateLimit: typeof floodgate.rateLimit;
}
