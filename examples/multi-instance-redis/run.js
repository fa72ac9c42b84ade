// @ts-check
// Two app processes behind one Redis keep one shared limit.
//
//   node run.js        (or: pnpm --filter @floodgate/example-multi-instance-redis start)
//
// 1. starts a private redis-server (from the PATH) on a free port, nothing persisted;
// 2. starts two instances of app.js against it;
// 3. hammers both at once with the same API key, many requests in flight;
// 4. prints what each instance admitted and the total, which equals the limit;
// 5. stops the apps and redis-server by PID.
// It never touches a Redis it did not start (6379 included).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';

const REQUESTS_PER_INSTANCE = 40;
const IN_FLIGHT_PER_INSTANCE = 8;

/** @type {import('node:child_process').ChildProcess[]} */
const children = [];
// Whatever happens, leave no process behind.
process.on('exit', () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

/** A port nobody listens on right now (never 6379, the machine's default Redis). @returns {Promise<number>} */
async function freePort() {
  for (;;) {
    const port = await new Promise((resolve, reject) => {
      const server = createServer();
      server.on('error', reject);
      server.listen(0, '127.0.0.1', () => {
        const address = server.address();
        server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
      });
    });
    if (port !== 6379) return port;
  }
}

/** @param {import('node:child_process').ChildProcess} child */
const exited = (child) =>
  child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((resolve) => child.once('exit', () => resolve(undefined)));

const sleep = (/** @type {number} */ ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Starts redis-server on a free port and waits until it answers PING. */
async function startRedis() {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-example-redis-'));
    const child = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--protected-mode', 'no'],
      { stdio: 'ignore' },
    );
    children.push(child);
    const spawnError = new Promise((_, reject) => child.once('error', reject));
    const deadline = Date.now() + 10_000;
    while (child.exitCode === null && Date.now() < deadline) {
      const probe = new Redis({ port, host: '127.0.0.1', lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
      probe.on('error', () => {});
      try {
        await Promise.race([probe.connect().then(() => probe.ping()), spawnError]);
        probe.disconnect();
        return { port, pid: /** @type {number} */ (child.pid), child, dir };
      } catch (error) {
        probe.disconnect();
        if (/** @type {NodeJS.ErrnoException} */ (error).code === 'ENOENT')
          throw new Error('redis-server is not on the PATH (Debian: apt-get install redis-server)');
        await sleep(25);
      }
    }
    child.kill('SIGKILL');
    await exited(child);
    rmSync(dir, { recursive: true, force: true });
    if (attempt >= 3) throw new Error(`redis-server did not start on port ${port}`);
    // The port was taken in between: try another.
  }
}

/** Starts one app.js and waits for its "listening on <url>" line. @param {string} instance @param {number} redisPort */
async function startApp(instance, redisPort) {
  const child = spawn(process.execPath, ['app.js'], {
    cwd: import.meta.dirname,
    env: { ...process.env, INSTANCE: instance, REDIS_PORT: String(redisPort), PORT: '0' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  const url = await new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => reject(new Error(`app ${instance} did not start within 15 s`)), 15_000);
    child.stdout?.on('data', (chunk) => {
      output += chunk;
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`app ${instance} exited with ${code} before listening`));
    });
  });
  return { instance, url: /** @type {string} */ (url), pid: /** @type {number} */ (child.pid), child };
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

let failed = false;
const redis = await startRedis();
console.log(`redis-server (pid ${redis.pid}) on 127.0.0.1:${redis.port}`);
try {
  const apps = await Promise.all([startApp('a', redis.port), startApp('b', redis.port)]);
  for (const app of apps) console.log(`app ${app.instance} (pid ${app.pid}) on ${app.url}`);

  console.log(`\nHammering both at once: ${REQUESTS_PER_INSTANCE} requests each, ${IN_FLIGHT_PER_INSTANCE} in flight per app, same API key.\n`);
  const results = await Promise.all(apps.map((app) => hammer(app.url, REQUESTS_PER_INSTANCE, IN_FLIGHT_PER_INSTANCE)));
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
  const limit = Math.max(...results.map((r) => r.limit));
  console.log(`\ntotal admitted: ${total} (the shared limit is ${limit})`);
  failed = total !== limit;

  for (const app of apps) {
    app.child.kill('SIGTERM');
    await exited(app.child);
    console.log(`stopped app ${app.instance} (pid ${app.pid})`);
  }
} catch (error) {
  failed = true;
  console.error(error);
} finally {
  redis.child.kill('SIGTERM');
  await exited(redis.child);
  rmSync(redis.dir, { recursive: true, force: true });
  console.log(`stopped redis-server (pid ${redis.pid})`);
}
process.exitCode = failed ? 1 : 0;
