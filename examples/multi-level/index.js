// @ts-check
// Limits at several levels on one route. Run: pnpm --filter @floodgate/example-multi-level start
//
// Each level is its own limiter with its own key; a request passes only if
// every level admits it. The levels are independent: a request the user
// level denies was already counted by the IP level before it. Order the
// levels from the cheapest to check (and the likeliest to deny) to the most
// global, as below, so that a denied client cannot use up the global budget.

import { createLimiter, keyBy, rateLimit } from '@floodgate/express';
import express from 'express';

const app = express();

// 1. Per client IP: bursts of 3, then 1 per second (GCRA).
const perIp = rateLimit({ algorithm: 'gcra', limit: 1, windowMs: 1_000, burst: 3 });

// 2. Per user (from the auth layer's header; anonymous users fall back to their IP):
//    20 a minute and 500 a day, both must pass.
const perUser = rateLimit({
  key: keyBy.header('x-user-id'),
  rules: [
    { name: 'per-minute', algorithm: 'sliding-window', limit: 20, windowMs: 60_000, segments: 6 },
    { name: 'per-day', algorithm: 'fixed-window', limit: 500, windowMs: 86_400_000 },
  ],
});

// 3. Globally, for the whole service behind this route: 1000 a minute, and at most 50 searches in flight.
const global = createLimiter({
  rules: [
    { name: 'global-rate', algorithm: 'token-bucket', limit: 1_000, windowMs: 60_000 },
    { name: 'in-flight', algorithm: 'concurrency', limit: 50, windowMs: 30_000 },
  ],
});
const everyone = rateLimit({ limiter: global, key: () => 'search', headers: false });

app.get('/api/search', perIp, perUser, everyone, (req, res) => {
  res.json({ results: [], decision: { rule: req.rateLimit?.rule, remaining: req.rateLimit?.remaining } });
});

const server = app.listen(Number(process.env.PORT ?? 3000), () => {
  const address = server.address();
  console.log(`listening on http://localhost:${typeof address === 'object' && address ? address.port : ''}`);
});
