import { createLimiter, type Limiter, type LimiterOptions } from '@floodgate/core';
import { rateLimit } from '@floodgate/express';
import { serveHttp } from '@floodgate/test-support';
import express from 'express';
import { type DashboardHandler, type DashboardOptions, dashboard } from '../index.js';

export interface TestApp {
  url: string;
  limiter: Limiter;
  handler: DashboardHandler;
  /** GET /api?client=<key> on the app's own rate-limited route: its status. */
  call(client: string): Promise<number>;
  close(): Promise<void>;
}

export const token = 'Bearer s3cret';

/**
 * An Express app with a limiter (MemoryStore unless the options say otherwise),
 * a rate-limited route keyed by ?client=, and the dashboard at /floodgate
 * (Bearer s3cret, unless `dashboardOptions` says otherwise).
 */
export async function startApp(
  limiterOptions: LimiterOptions = {},
  dashboardOptions: Partial<DashboardOptions> = {},
  before?: (app: express.Express) => void,
): Promise<TestApp> {
  const limiter = createLimiter({ rules: [{ name: 'per-minute', limit: 3, windowMs: 60_000 }], ...limiterOptions } as LimiterOptions);
  const app = express();
  before?.(app);
  const handler = dashboard({ limiter, auth: (req) => req.headers.authorization === token, ...dashboardOptions });
  app.use('/floodgate', handler);
  app.get('/api', rateLimit({ limiter, key: (req) => String(req.query.client ?? 'anon'), validate: false }), (_req, res) => {
    res.send('ok');
  });
  const running = await serveHttp(app);
  return {
    url: running.url,
    limiter,
    handler,
    call: async (client) => (await fetch(`${running.url}/api?client=${encodeURIComponent(client)}`)).status,
    close: async () => {
      handler.close();
      await running.close();
      await limiter.close();
    },
  };
}
