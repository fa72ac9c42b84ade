#!/usr/bin/env node
// CI check of the Next.js example: `next build`, then `next start` on a free loopback port;
// requests the route handler (/api/hello, 5 a minute) and the path middleware.ts limits
// (/api/limited, 3 a minute) until each answers 429, checks the rate-limit headers, and
// stops the server. Next's telemetry stays off; the build needs nothing from outside npm.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const env = { ...process.env, NEXT_TELEMETRY_DISABLED: '1' };
const next = fileURLToPath(import.meta.resolve('next/dist/bin/next'));
const started = performance.now();
const seconds = () => `${((performance.now() - started) / 1000).toFixed(1)} s`;

const build = spawnSync(process.execPath, [next, 'build'], { env, stdio: ['ignore', 'inherit', 'inherit'], timeout: 300_000 });
assert.equal(build.status, 0, `next build failed (${build.error ?? `exit ${build.status}`})`);
console.log(`ok next build (${seconds()})`);

// Its own process group: whatever next start runs stops with it.
const server = spawn(process.execPath, [next, 'start', '--port', '0', '--hostname', '127.0.0.1'], {
  env,
  detached: true,
  stdio: ['ignore', 'pipe', 'inherit'],
});
const stop = () => {
  if (server.exitCode === null && server.signalCode === null) process.kill(-server.pid, 'SIGKILL');
};
const timer = setTimeout(() => {
  stop();
  console.error('next start did not answer within 60 s');
  process.exit(1);
}, 60_000);

/** Requests `path` until the request after `limit` is denied; `check200` reads each admitted response's body. */
async function untilDenied(url, path, limit, check200) {
  const statuses = [];
  for (let i = 0; i <= limit; i++) {
    const res = await fetch(new URL(path, url));
    statuses.push(res.status);
    if (i < limit) {
      assert.equal(res.status, 200, `${path}: request ${i + 1} of ${limit} is admitted (got ${statuses.join(', ')})`);
      assert.equal(res.headers.get('x-ratelimit-limit'), String(limit));
      assert.equal(res.headers.get('x-ratelimit-remaining'), String(limit - 1 - i));
      assert.ok(Number(res.headers.get('x-ratelimit-reset')) > Date.now() / 1000, 'X-RateLimit-Reset is a Unix time ahead');
      await check200(res, limit - 1 - i);
    } else {
      assert.equal(res.status, 429, `${path}: request ${limit + 1} is denied (got ${statuses.join(', ')})`);
      assert.equal(await res.text(), 'Too many requests, please try again later.');
      assert.equal(res.headers.get('x-ratelimit-remaining'), '0');
      assert.ok(Number(res.headers.get('retry-after')) >= 1, 'Retry-After on the 429');
    }
  }
  console.log(`ok ${path}: ${statuses.join(' ')}`);
}

try {
  const url = await new Promise((resolve, reject) => {
    let out = '';
    server.stdout.on('data', (chunk) => {
      out += chunk;
      const match = /Local:\s+(http:\/\/\S+)[\s\S]*Ready/.exec(out);
      if (match) resolve(match[1]);
    });
    server.once('exit', (code) => reject(new Error(`next start exited with ${code}: ${out}`)));
  });
  await untilDenied(url, '/api/hello', 5, async (res, remaining) => assert.deepEqual(await res.json(), { hello: 'world', remaining }));
  await untilDenied(url, '/api/limited', 3, async (res) => assert.deepEqual(await res.json(), { limited: 'by middleware' }));
  console.log(`ok the Next.js example (${seconds()})`);
} finally {
  clearTimeout(timer);
  stop();
}
