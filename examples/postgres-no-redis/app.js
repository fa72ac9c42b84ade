// @ts-check
// One app instance: Express + Floodgate on PostgreSQL, no Redis. Start several against the same
// database and they share every limit.
//
//   DATABASE_URL=postgres://... TABLE=public.floodgate_state PORT=3001 INSTANCE=a node app.js
//
// run.js starts two of these against one database; see the README.
import { createLimiter } from '@floodgate/core';
import { keyBy, rateLimit } from '@floodgate/express';
import { PostgresStore } from '@floodgate/postgres';
import express from 'express';
import pg from 'pg';

const instance = process.env.INSTANCE ?? 'app';
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
// Created on first use (createTable), with the database's clock deciding: app servers' clocks never matter.
const store = new PostgresStore({ pool, table: process.env.TABLE ?? 'floodgate_state' });

// Three limits, one call, all or nothing: everyone together, each address, each user.
const api = createLimiter({
  rules: [
    { name: 'all', scope: 'global', algorithm: 'fixed-window', limit: 1000, windowMs: 60_000 },
    { name: 'per-ip', scope: 'ip', algorithm: 'sliding-window', limit: 100, windowMs: 60_000 },
    { name: 'per-user', scope: 'user', algorithm: 'gcra', limit: 20, windowMs: 60_000 },
  ],
  store,
  prefix: 'api:',
  // A shared quota that must hold: with the database down, answer 503 rather than serve unlimited.
  onStoreError: 'deny',
  timeoutMs: 2_000,
});

// Logins: 5 tries per address and 5 per account name every 15 minutes, a block of 15 minutes on a breach.
// Keyed by the address and by the name the client sends, never by anything it picks after logging in.
const logins = createLimiter({
  rules: [
    { name: 'login-ip', scope: 'ip', algorithm: 'sliding-log', limit: 5, windowMs: 900_000, blockMs: 900_000 },
    { name: 'login-account', scope: 'account', algorithm: 'sliding-log', limit: 5, windowMs: 900_000 },
  ],
  store,
  prefix: 'login:',
  onStoreError: 'deny',
  timeoutMs: 2_000,
});

const app = express();
app.set('trust proxy', 'loopback');
app.get('/api', rateLimit({ limiter: api, headers: 'draft-8', key: { ip: keyBy.ip(), user: keyBy.header('x-user-id') } }), (req, res) => {
  res.json({ instance, rule: req.rateLimit?.rule, remaining: req.rateLimit?.remaining });
});
app.post(
  '/login',
  express.json(),
  rateLimit({ limiter: logins, key: { ip: keyBy.ip(), account: (req) => String(req.body?.user ?? '-').toLowerCase() } }),
  (_req, res) => {
    res.status(401).json({ error: 'wrong password' });
  },
);

const server = app.listen(Number(process.env.PORT ?? 3000), '127.0.0.1', () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  console.log(`${instance}: listening on http://127.0.0.1:${port}`);
});
process.on('SIGTERM', () => {
  server.close();
  void pool.end();
});
