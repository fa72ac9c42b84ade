// @ts-check
// Two app processes behind one Redis keep one shared limit, and take new rules
// published to Redis without a restart.
//
//   pnpm example multi-instance-redis   (from the repository root; or: node run.js, packages built)
//
// 1. starts a private redis-server (from the PATH) on a free port, nothing persisted;
// 2. starts two instances of app.js against it;
// 3. hammers both at once with the same API key, many requests in flight;
// 4. prints what each instance admitted and the total, which equals the limit (30);
// 5. publishes new rules (limit 40) with RedisRuleSource, waits until both
//    instances enforce them, hammers again: 10 more are admitted in all;
// 6. stops the apps and redis-server by PID.
// It never touches a Redis it did not start (6379 included).
import { spawn } from 'node:child_process';
import { RedisRuleSource } from '@floodgate/core';
import { Redis } from 'ioredis';
import { listeningUrl } from '../example-test.mjs';
import { startRedis } from '../private-redis.mjs';

const REQUESTS_PER_INSTANCE = 40;
const IN_FLIGHT_PER_INSTANCE = 8;
const NEW_LIMIT = 40;

/** @type {import('node:child_process').ChildProcess[]} */
const children = [];
// Whatever happens, leave no process behind.
process.on('exit', () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

/** @param {import('node:child_process').ChildProcess} child */
const exited = (child) =>
  child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((resolve) => child.once('exit', () => resolve(undefined)));

const sleep = (/** @type {number} */ ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Starts one app.js and waits for its "listening on <url>" line. @param {string} instance @param {number} redisPort */
async function startApp(instance, redisPort) {
  const child = spawn(process.execPath, ['app.js'], {
    cwd: import.meta.dirname,
    env: { ...process.env, INSTANCE: instance, REDIS_PORT: String(redisPort), PORT: '0' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  const url = await listeningUrl(child, 15_000, `app ${instance}`);
  return { instance, url, pid: /** @type {number} */ (child.pid), child };
}

/**
 * Sends `total` requests to `url`, `inFlight` at a time, and counts the statuses.
 * @param {string} url @param {number} total @param {number} inFlight
 */
async function hammer(url, total, inFlight) {
  /** @type {Record<string, number>} */
  const statuses = {};
  let limit = 0;
  let sent = 0;
  const worker = async () => {
    while (sent < total) {
      sent++;
      const res = await fetch(`${url}/api`, { headers: { 'x-api-key': 'demo-key' } });
      await res.arrayBuffer();
      statuses[res.status] = (statuses[res.status] ?? 0) + 1;
      limit = Math.max(limit, Number(res.headers.get('x-ratelimit-limit') ?? 0));
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  return { statuses, limit };
}

/**
 * Hammers every app at once and prints what each admitted; returns the total admitted and the limit the apps reported.
 * @param {{ instance: string, url: string }[]} apps @param {number} requests
 */
async function round(apps, requests) {
  console.log(`\nHammering both at once: ${requests} requests each, ${IN_FLIGHT_PER_INSTANCE} in flight per app, same API key.\n`);
  const results = await Promise.all(apps.map((app) => hammer(app.url, requests, IN_FLIGHT_PER_INSTANCE)));
  let total = 0;
  apps.forEach((app, i) => {
    const { statuses } = /** @type {{ statuses: Record<string, number> }} */ (results[i]);
    total += statuses[200] ?? 0;
    const others = Object.entries(statuses)
      .filter(([status]) => status !== '200' && status !== '429')
      .map(([status, n]) => `, ${n} x ${status}`)
      .join('');
    console.log(`app ${app.instance}: ${statuses[200] ?? 0} admitted, ${statuses[429] ?? 0} denied (429)${others}`);
  });
  return { total, limit: Math.max(...results.map((r) => r.limit)) };
}

/** The limit an app enforces now (its GET /rules). @param {string} url */
async function enforcedLimit(url) {
  const res = await fetch(`${url}/rules`);
  const rules = /** @type {{ limit: number }[]} */ (await res.json());
  return rules[0]?.limit;
}

let failed = false;
const redis = await startRedis();
console.log(`redis-server (pid ${redis.pid}) on 127.0.0.1:${redis.port}`);
try {
  const apps = await Promise.all([startApp('a', redis.port), startApp('b', redis.port)]);
  for (const app of apps) console.log(`app ${app.instance} (pid ${app.pid}) on ${app.url}`);

  const first = await round(apps, REQUESTS_PER_INSTANCE);
  console.log(`\ntotal admitted: ${first.total} (the shared limit is ${first.limit})`);
  failed = first.total !== first.limit;

  // An operator raises the limit for every instance at once: the rules are validated,
  // stored under the key the apps follow, and announced on its channel.
  const admin = new Redis({ port: redis.port, host: '127.0.0.1', maxRetriesPerRequest: 1 });
  try {
    await new RedisRuleSource({ client: admin, key: 'fg:rules:api' }).publish([
      { name: 'default', algorithm: 'sliding-log', limit: NEW_LIMIT, windowMs: 3_600_000 },
    ]);
  } finally {
    admin.disconnect();
  }
  console.log(`\npublished new rules to Redis: limit ${NEW_LIMIT} an hour`);
  for (const app of apps) {
    const deadline = Date.now() + 5_000;
    let limit = await enforcedLimit(app.url);
    while (limit !== NEW_LIMIT && Date.now() < deadline) {
      await sleep(20);
      limit = await enforcedLimit(app.url);
    }
    console.log(`app ${app.instance} enforces limit ${limit}`);
    if (limit !== NEW_LIMIT) failed = true;
  }

  // Same rule name and algorithm: the state is kept, so the 30 calls already made still count.
  const second = await round(apps, REQUESTS_PER_INSTANCE / 4);
  console.log(`\nsecond round admitted: ${second.total} (the shared limit is now ${second.limit}, ${first.total} already used)`);
  failed ||= second.total !== second.limit - first.total;

  for (const app of apps) {
    app.child.kill('SIGTERM');
    await exited(app.child);
    console.log(`stopped app ${app.instance} (pid ${app.pid})`);
  }
} catch (error) {
  failed = true;
  console.error(error);
} finally {
  await redis.stop();
  console.log(`stopped redis-server (pid ${redis.pid})`);
}
process.exitCode = failed ? 1 : 0;
