// @ts-check
// Shaping instead of refusing: a Koa app in front of a backend that takes at
// most 5 requests a second. A leaky bucket in shape mode admits a burst into a
// queue of 10 and holds each request for `delayMs`, so requests reach the
// backend at a constant 200 ms apart; what does not fit in the queue gets a 429.
//
//   pnpm example leaky-shaping   (from the repository root; or: node index.js, packages built)
//
// The limiter's clock is injected and stands still during the burst, as if all
// 12 requests arrived in the same millisecond: the decisions (and so the
// printed delays) are the same on every run. The waits themselves are real.
import { once } from 'node:events';
import { performance } from 'node:perf_hooks';
import { createLimiter, rateLimit } from '@floodgate/koa';
import Koa from 'koa';

const BURST_SIZE = 12;
const now = Date.UTC(2025, 0, 1);

const backendGate = createLimiter({
  algorithm: 'leaky-bucket',
  mode: 'shape', // delay to a constant rate instead of refusing
  limit: 5, // requests drained per windowMs: 5 a second, one every 200 ms
  windowMs: 1_000,
  burst: 10, // the queue: how much may wait at once
  now: () => now, // drop this line in a real app: the default clock is Date.now
});

let arrivals = 0;
let firstArrival = 0;
const app = new Koa();
app.use(async (ctx, next) => {
  ctx.state.arrival = ++arrivals;
  ctx.state.arrivedAt = performance.now();
  if (arrivals === 1) firstArrival = ctx.state.arrivedAt;
  ctx.set('x-arrival', String(ctx.state.arrival));
  await next();
});
// One key for everyone: the limit protects the backend, not a client.
app.use(rateLimit({ limiter: backendGate, key: () => 'backend' }));
app.use((ctx) => {
  const servedAt = performance.now();
  ctx.body = {
    arrival: ctx.state.arrival,
    delayMs: ctx.state.rateLimit?.delayMs,
    waitedMs: Math.round(servedAt - ctx.state.arrivedAt),
    servedAtMs: Math.round(servedAt - firstArrival),
  };
});

const server = app.listen(0, '127.0.0.1');
await once(server, 'listening');
const address = server.address();
const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;

console.log(`A burst of ${BURST_SIZE} requests at once; the backend takes 5 a second (leaky bucket, shape mode, queue of 10).\n`);
const responses = await Promise.all(
  Array.from({ length: BURST_SIZE }, async () => {
    const res = await fetch(base);
    const body = res.status === 200 ? await res.json() : undefined;
    if (body === undefined) await res.arrayBuffer();
    return { arrival: Number(res.headers.get('x-arrival')), status: res.status, retryAfter: res.headers.get('retry-after'), body };
  }),
);
responses.sort((a, b) => a.arrival - b.arrival);

const widths = [7, 6, 7, 15, 9];
/** @param {string[]} cells */
const row = (cells) =>
  cells
    .map((cell, i) => cell.padEnd(widths[i] ?? 10))
    .join('  ')
    .trimEnd();
console.log(row(['arrival', 'status', 'delayMs', 'waited (real)', 'served at']));
for (const r of responses) {
  if (r.body) {
    console.log(row([`#${r.arrival}`, String(r.status), String(r.body.delayMs), `${r.body.waitedMs} ms`, `+${r.body.servedAtMs} ms`]));
  } else {
    console.log(row([`#${r.arrival}`, String(r.status), '-', '-', `queue full, Retry-After ${r.retryAfter} s`]));
  }
}
console.log('\ndelayMs: the wait Floodgate decided (ctx.state.rateLimit.delayMs); waited: how long the request was held, measured.');
server.close();
