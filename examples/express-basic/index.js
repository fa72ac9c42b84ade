// @ts-check
// Floodgate on Express. Run from the repository root: pnpm example express-basic

import { createLimiter, keyBy, rateLimit } from '@floodgate/express';
import { instrument } from '@floodgate/prometheus';
import express from 'express';
import { register } from 'prom-client';

const app = express();

// Prometheus metrics of the limiters below (decisions, store latency, keys near their limit).
app.get('/metrics', async (_req, res) => {
  res.type(register.contentType).send(await register.metrics());
});
app.use(express.json());
// Behind a proxy on this host? Then req.ip (and Floodgate's default key) comes from X-Forwarded-For.
app.set('trust proxy', 'loopback');

// Everything: 100 requests a minute per client IP, IETF draft-8 headers too.
const site = createLimiter({ limit: 100, windowMs: 60_000 });
instrument(site, { name: 'site' });
app.use(rateLimit({ limiter: site, headers: 'both' }));

// One route: 5 requests per 10 s, sliding window (the default algorithm).
const hello = createLimiter({ limit: 5, windowMs: 10_000 });
instrument(hello, { name: 'hello' });
app.get('/api/hello', rateLimit({ limiter: hello }), (req, res) => {
  res.json({ hello: 'world', remaining: req.rateLimit?.remaining });
});

// Logins, on top of the 100 a minute: 10 failed attempts a minute per client IP and 3 per account
// (the name in the body). Keyed by the address and the account being tried, never by anything the
// client makes up before it has logged in: neither a new name nor a new address buys more guesses
// at one password. Successful logins do not count.
app.post(
  '/login',
  rateLimit({
    rules: [
      { name: 'login-ip', scope: 'ip', algorithm: 'sliding-log', limit: 10, windowMs: 60_000 },
      { name: 'login-account', scope: 'account', algorithm: 'sliding-log', limit: 3, windowMs: 60_000 },
    ],
    key: { ip: keyBy.ip(), account: (req) => String(req.body?.account ?? '').toLowerCase() || '-' },
    skipSuccessfulRequests: true,
    message: { error: 'too many failed logins, try again later' },
  }),
  (req, res) => {
    if (req.body?.password === 'correct horse battery staple') res.json({ ok: true });
    else res.status(401).json({ ok: false });
  },
);

const server = app.listen(Number(process.env.PORT ?? 3000), () => {
  const address = server.address();
  console.log(`listening on http://localhost:${typeof address === 'object' && address ? address.port : ''}`);
});
