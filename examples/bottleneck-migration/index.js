// @ts-check
// Coming from Bottleneck: the queue of
//
//   const limiter = new Bottleneck({ maxConcurrent: 2, minTime: 220 });
//   limiter.schedule({ priority: 9 }, () => fetchItem(id)); // background; a user's jobs get priority 1
//
// as a Floodgate limiter, against a fake API on a free local port that counts
// what it sees: calls in flight at once, calls in any 1 s window, and the order
// they came in.
//
//   pnpm example bottleneck-migration   (from the repository root; or: node index.js, packages built)
//
// 12 background jobs (Bottleneck priority 9) are queued at once; 300 ms later,
// 4 jobs for a user (Bottleneck priority 1) arrive and go before every background job still waiting.
// One job may wait 300 ms at most: it is refused (ERR_FG_WAIT_TIMEOUT) and never
// reaches the API.
import { once } from 'node:events';
import { createServer } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLimiter, isFloodgateError } from '@floodgate/core';

const CALL_MS = 500; // how long the API takes to answer
const MAX_CONCURRENT = 2;
const MIN_TIME_MS = 220; // at most 5 calls start in any 1 s window (4.5 a second)

/** What the fake API saw. */
const seen = { inFlight: 0, maxInFlight: 0, arrivals: /** @type {{ at: number, item: string }[]} */ ([]) };
const api = createServer(async (req, res) => {
  const item = decodeURIComponent(req.url?.slice(1) ?? '');
  seen.arrivals.push({ at: performance.now(), item });
  seen.inFlight++;
  seen.maxInFlight = Math.max(seen.maxInFlight, seen.inFlight);
  await sleep(CALL_MS);
  seen.inFlight--;
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ item }));
});
api.listen(0, '127.0.0.1');
await once(api, 'listening');
const address = api.address();
const apiUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;

// maxConcurrent: 2 -> a concurrency rule (its windowMs: how long a lease lives if a job never ends);
// minTime: 220 -> one call every 220 ms (gcra, no burst).
const limiter = createLimiter({
  rules: [
    { name: 'in-flight', algorithm: 'concurrency', limit: MAX_CONCURRENT, windowMs: 30_000 },
    { name: 'spacing', algorithm: 'gcra', limit: 1, windowMs: MIN_TIME_MS },
  ],
});

/** @param {string} item */
const fetchItem = async (item) => {
  const response = await fetch(`${apiUrl}/${encodeURIComponent(item)}`);
  return /** @type {{ item: string }} */ (await response.json());
};
// Bottleneck's priority 0..9 (lower first, 5 by default) is Floodgate's 5..-4 (higher first, 0 by default):
// priority = 5 - bottleneckPriority.
const background = limiter.wrap(fetchItem, { key: 'api', wait: { priority: 5 - 9 } });
const forUser = limiter.wrap(fetchItem, { key: 'api', wait: { priority: 5 - 1 } });
const hurried = limiter.wrap(fetchItem, { key: 'api', wait: { priority: 5 - 9, maxWaitMs: 300 } }); // a background job that may wait 300 ms

const started = performance.now();
const jobs = Array.from({ length: 12 }, (_, i) => background(`background-${i + 1}`));
const late = hurried('hurried').then(
  () => 'admitted',
  (error) => (isFloodgateError(error) ? error.code : String(error)),
);
await sleep(300);
const userJobs = Array.from({ length: 4 }, (_, i) => forUser(`user-${i + 1}`));
const results = await Promise.all([...jobs, ...userJobs]);
const elapsedS = (performance.now() - started) / 1000;

// The most calls that arrived within any 1 s.
let mostInASecond = 0;
for (const { at } of seen.arrivals) mostInASecond = Math.max(mostInASecond, seen.arrivals.filter((a) => a.at >= at && a.at - at < 1000).length);
const order = seen.arrivals.map((a) => a.item);
// Every user job reached the API before every background job still waiting when they arrived.
const firstUser = order.findIndex((item) => item.startsWith('user-'));
const userFirst = order.slice(firstUser, firstUser + 4).every((item) => item.startsWith('user-'));

console.log(`the API answered ${results.length} jobs in ${elapsedS.toFixed(2)} s, in this order:`);
console.log(order.join(' '));
console.log(`most in flight at once: ${seen.maxInFlight} (maxConcurrent ${MAX_CONCURRENT})`);
console.log(`most calls in any 1 s window: ${mostInASecond} (minTime ${MIN_TIME_MS} ms: at most 5)`);
console.log(`the job that could wait 300 ms: ${await late}; the API saw it: ${order.includes('hurried')}`);
const held = seen.maxInFlight <= MAX_CONCURRENT && mostInASecond <= 5 && userFirst && !order.includes('hurried');
console.log(held ? 'ok: the limits held, and the user jobs went before the waiting background jobs' : 'FAILED');
await limiter.close();
api.close();
api.closeAllConnections();
process.exitCode = held ? 0 : 1;
