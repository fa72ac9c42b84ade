#!/usr/bin/env node
// CI check for a runnable example: starts `node index.js` with PORT=0, waits for
// the "listening on <url>" line, requests the example's limited route until it
// answers 429 (within `limit + 1` requests), checks the rate-limit headers, and
// stops the process. The example's clock (Date.now) stands still (frozen-clock.mjs),
// so that no window ends and no bucket refills while the requests run, however slow
// the machine. Run from the example's folder:
// `node ../check-example.mjs <path> <limit> [<another path> <text it must contain>]`.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';

const [path = '/', limitArg = '5', extraPath, extraText] = process.argv.slice(2);
const limit = Number(limitArg);
const frozenClock = new URL('frozen-clock.mjs', import.meta.url).href;
const child = spawn(process.execPath, ['--import', frozenClock, 'index.js'], { env: { ...process.env, PORT: '0' }, stdio: ['ignore', 'pipe', 'inherit'] });
const timer = setTimeout(() => {
  child.kill('SIGKILL');
  console.error('the example did not start within 15 s');
  process.exit(1);
}, 15_000);

try {
  const url = await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const match = /listening on (http:\/\/\S+)/.exec(out);
      if (match) resolve(match[1]);
    });
    child.once('exit', (code) => reject(new Error(`the example exited with ${code} before listening`)));
  });
  const statuses = [];
  let denied;
  for (let i = 0; i <= limit; i++) {
    const res = await fetch(new URL(path, url));
    statuses.push(res.status);
    if (res.status === 429) {
      denied = res;
      break;
    }
    assert.equal(res.status, 200);
    assert.ok(res.headers.get('x-ratelimit-remaining') !== null || res.headers.get('ratelimit') !== null, 'rate-limit headers on a 200');
    await res.arrayBuffer();
  }
  assert.ok(denied, `expected a 429 within ${limit + 1} requests, got ${statuses.join(', ')}`);
  assert.equal(statuses.length, limit + 1, `the limit is ${limit}`);
  assert.ok(Number(denied.headers.get('retry-after')) >= 1, 'Retry-After on the 429');
  console.log(`ok ${path}: ${statuses.join(' ')}`);
  if (extraPath !== undefined) {
    const res = await fetch(new URL(extraPath, url));
    const body = await res.text();
    assert.equal(res.status, 200, `${extraPath} answers 200`);
    assert.ok(body.includes(extraText ?? ''), `${extraPath} contains ${extraText}`);
    console.log(`ok ${extraPath}: contains ${extraText}`);
  }
} finally {
  clearTimeout(timer);
  child.kill();
}
