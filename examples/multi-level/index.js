// @ts-check
// Limits at several levels on one route. Run from the repository root: pnpm example multi-level
//
// Each level is its own limiter with its own key; a request passes only if
// every level admits it. The levels are independent: a request the user
// level denies was already counted by the IP level before it. Order the
// levels from the cheapest to check (and the likeliest to deny) to the most
// global, as below, so that a denied client cannot use up the global budget.

import { setTimeout as sleep } from 'node:timers/promises';
import { createLimiter, keyBy, rateLimit } from '@floodgate/express';
import express from 'express';

const app = express();
// A proxy on this host sets X-Forwarded-For: req.ip (the default key, and what
// the allow and deny lists match) is then the client's address.
app.set('trust proxy', 'loopback');

// Our own services: never limited per IP or per user, but they share the global budget below.
const internal = ['10.0.0.0/8', 'fd00::/8'];
// A network that abuses the API: 403 before any limiter is asked.
const blocked = ['203.0.113.0/24'];

/**
 * A denial says which level and rule refused the request (req.rateLimit is set when message runs).
 * @param {string} level
 * @returns {(req: import('express').Request) => object}
 */
const tooMany = (level) => (req) => ({ error: 'too many requests', level, rule: req.rateLimit?.rule, retryAfterMs: req.rateLimit?.retryAfterMs });

// 1. Per client IP: bursts of 3, then 1 per second (GCRA).
const perIp = rateLimit({
  name: 'per-ip',
  algorithm: 'gcra',
  limit: 1,
  windowMs: 1_000,
  burst: 3,
  denyList: blocked,
  allowList: internal,
  message: tooMany('ip'),
});

// 2. Per user (from the auth layer's header; anonymous users fall back to their IP):
//    20 a minute and 500 a day, both must pass.
const perUser = rateLimit({
  key: keyBy.header('x-user-id'),
  rules: [
    { name: 'per-minute', algorithm: 'sliding-window', limit: 20, windowMs: 60_000, segments: 6 },
    { name: 'per-day', algorithm: 'fixed-window', limit: 500, windowMs: 86_400_000 },
  ],
  allowList: internal,
  message: tooMany('user'),
});

// 3. Globally, for the whole service behind this route: 1000 a minute, and at most 50 searches in flight.
const global = createLimiter({
  rules: [
    { name: 'global-rate', algorithm: 'token-bucket', limit: 1_000, windowMs: 60_000 },
    { name: 'in-flight', algorithm: 'concurrency', limit: 50, windowMs: 30_000 },
  ],
});
const everyone = rateLimit({ limiter: global, key: () => 'search', headers: false, message: tooMany('global') });

// The search backend. SEARCH_LATENCY_MS makes it slow, so that requests overlap and the in-flight limit shows.
const latencyMs = Number(process.env.SEARCH_LATENCY_MS ?? 0);

app.get('/api/search', perIp, perUser, everyone, async (req, res) => {
  if (latencyMs > 0) await sleep(latencyMs);
  res.json({ results: [], decision: { rule: req.rateLimit?.rule, remaining: req.rateLimit?.remaining } });
});

const server = app.listen(Number(process.env.PORT ?? 3000), () => {
  const address = server.address();
  console.log(`listening on http://localhost:${typeof address === 'object' && address ? address.port : ''}`);
});
