// @ts-check
// Throttling outbound calls across processes:
//
//   pnpm example outbound-api   (from the repository root; or: node index.js, packages built)
//
// 1. starts a private redis-server (from the PATH) on a free port, nothing persisted;
// 2. starts a fake third-party API on a free port: it allows 10 calls in any
//    second (counted when they arrive) and answers 429 to an 11th;
// 3. starts 3 worker processes (worker.js) and, once all are ready, has each make
//    20 calls at once through limiter.wrap(..., { wait: true }) on one Redis limit;
// 4. prints what the API saw: calls per second, the most in any 1 s window,
//    and the rate achieved; then stops everything it started, by PID.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:http';
import { startRedis } from '../private-redis.mjs';

const WORKERS = 3;
const CALLS_PER_WORKER = 20;
const API_LIMIT = 10; // calls in any 1 s window

/** Arrival times at the fake API (ms, performance.now()). */
const arrivals = /** @type {number[]} */ ([]);
let refused = 0;
const api = createServer((req, res) => {
  if (req.url === '/health') {
    res.end('ok');
    return;
  }
  const now = performance.now();
  const inLastSecond = arrivals.filter((t) => now - t < 1000).length;
  arrivals.push(now);
  if (inLastSecond >= API_LIMIT) {
    refused++;
    res.writeHead(429, { 'retry-after': '1' }).end();
    return;
  }
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ item: req.url }));
});
api.listen(0, '127.0.0.1');
await once(api, 'listening');
const address = api.address();
const apiUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;

/**
 * Starts one worker and resolves once it is ready, with `go()` to start its calls and `done`, its exit.
 * @param {string} worker @param {number} redisPort
 */
async function startWorker(worker, redisPort) {
  const child = spawn(process.execPath, ['worker.js'], {
    cwd: import.meta.dirname,
    env: { ...process.env, WORKER: worker, REDIS_PORT: String(redisPort), API_URL: apiUrl, CALLS: String(CALLS_PER_WORKER) },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const done = new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(child.pid) : reject(new Error(`worker ${worker} exited with ${code}`))));
  });
  let output = '';
  child.stdout?.setEncoding('utf8');
  await new Promise((resolve, reject) => {
    child.stdout?.on('data', (chunk) => {
      output += chunk;
      if (output.includes('ready\n')) resolve(undefined);
      // After "ready", what the worker prints is its report: pass it on.
      const report = output.split('ready\n')[1];
      if (report) {
        process.stdout.write(report);
        output = 'ready\n';
      }
    });
    done.catch(reject);
  });
  return { go: () => child.stdin?.end('go\n'), done };
}

let failed = false;
const redis = await startRedis();
console.log(`redis-server (pid ${redis.pid}) on 127.0.0.1:${redis.port}; fake API on ${apiUrl} (${API_LIMIT} calls in any second, 429 beyond)`);
console.log(`${WORKERS} workers x ${CALLS_PER_WORKER} calls, all made at once once every worker is ready, sharing one limit in Redis\n`);
try {
  const workers = await Promise.all(Array.from({ length: WORKERS }, (_, i) => startWorker(String.fromCharCode(97 + i), redis.port)));
  for (const worker of workers) worker.go();
  await Promise.all(workers.map((worker) => worker.done));

  const first = arrivals[0] ?? 0;
  const times = arrivals.map((t) => t - first);
  // The most calls in any 1 s window [t, t + 1000): a window that starts at an arrival holds at least as many as any other.
  const mostInAWindow = Math.max(...times.map((t) => times.filter((u) => u >= t && u < t + 1000).length));
  const perSecond = Array.from({ length: Math.floor((times.at(-1) ?? 0) / 1000) + 1 }, (_, s) => times.filter((t) => Math.floor(t / 1000) === s).length);
  const spanMs = times.at(-1) ?? 0;
  const rate = ((arrivals.length - 1) * 1000) / spanMs; // calls per second: the intervals between the calls, over the time they took

  console.log(`\nthe API saw ${arrivals.length} calls in ${(spanMs / 1000).toFixed(2)} s; per second (from the first call): ${perSecond.join(' ')}`);
  console.log(`most calls in any 1 s window: ${mostInAWindow} (limit ${API_LIMIT}); refused by the API (429): ${refused}`);
  console.log(`achieved rate: ${rate.toFixed(2)} calls/s (${arrivals.length - 1} intervals in ${(spanMs / 1000).toFixed(2)} s)`);
  failed = arrivals.length !== WORKERS * CALLS_PER_WORKER || mostInAWindow > API_LIMIT || refused > 0 || rate < 9;
  console.log(failed ? '\nFAILED' : `\nok: at most ${API_LIMIT} calls in every 1 s window, and at least 9 a second overall`);
} catch (error) {
  failed = true;
  console.error(error);
} finally {
  api.close();
  await redis.stop();
  console.log(`stopped redis-server (pid ${redis.pid}) and the fake API`);
}
process.exitCode = failed ? 1 : 0;
