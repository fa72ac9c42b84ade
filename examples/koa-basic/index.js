// @ts-check
// Floodgate on Koa. Run from the repository root: pnpm example koa-basic

import { createLimiter, keyBy, rateLimit } from '@floodgate/koa';
import Router from '@koa/router';
import Koa from 'koa';

const app = new Koa();
// Behind a proxy? Then ctx.ip (and Floodgate's default key) comes from X-Forwarded-For.
app.proxy = process.env.BEHIND_PROXY === '1';

// Everything: 100 requests a minute per client IP.
app.use(rateLimit({ limit: 100, windowMs: 60_000 }));

const router = new Router();

// One route: 5 requests per 10 s.
router.get('/api/hello', rateLimit({ limit: 5, windowMs: 10_000 }), (ctx) => {
  ctx.body = { hello: 'world', remaining: ctx.state.rateLimit?.remaining };
});

// Two routes sharing one budget per user: 20 a minute, token bucket with bursts of 5.
const reports = createLimiter({ algorithm: 'token-bucket', limit: 20, windowMs: 60_000, burst: 5 });
const perUser = rateLimit({ limiter: reports, key: keyBy.header('x-user-id') });
router.get('/reports', perUser, (ctx) => {
  ctx.body = { reports: [] };
});
router.post('/reports', perUser, (ctx) => {
  ctx.status = 201;
});

app.use(router.routes());

const server = app.listen(Number(process.env.PORT ?? 3000), () => {
  const address = server.address();
  console.log(`listening on http://localhost:${typeof address === 'object' && address ? address.port : ''}`);
});
