// What Hono fragments (`<!-- snippet: hono -->` in docs/) use without declaring
// it. A snippet that uses none of these names is a whole program.
import type * as floodgate from '@floodgate/hono';
import type { Hono } from 'hono';

declare global {
  const app: Hono;
  const rateLimit: typeof floodgate.rateLimit;
  const keyBy: typeof floodgate.keyBy;
}
