// @ts-check
// Floodgate on Hono, served by @hono/node-server. Run from the repository root: pnpm example hono-basic
// On Bun, Deno or Workers, pass the runtime's getConnInfo: rateLimit({ ..., getConnInfo }).

import { keyBy, rateLimit } from '@floodgate/hono';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';

const app = new Hono();

// Everything: 100 requests a minute per client IP.
app.use(rateLimit({ limit: 100, windowMs: 60_000 }));

// One route: 5 requests per 10 s, GCRA.
app.get('/api/hello', rateLimit({ algorithm: 'gcra', limit: 5, windowMs: 10_000 }), (c) => c.json({ hello: 'world', remaining: c.get('rateLimit').remaining }));

// Per API key, falling back to the client IP.
app.get('/search', rateLimit({ limit: 30, windowMs: 60_000, key: keyBy.header('x-api-key') }), (c) => c.json({ results: [] }));

serve({ fetch: app.fetch, port: Number(process.env.PORT ?? 3000) }, (info) => {
  console.log(`listening on http://localhost:${info.port}`);
});
