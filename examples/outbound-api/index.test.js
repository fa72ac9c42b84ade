// CI runs the whole example: a private redis-server, a fake API, three worker
// processes. What the API saw is checked: every call answered, never more than
// 10 in any 1 s window (by arrival time at the API), at least 9 a second
// overall. Every process the example started is gone afterwards.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { alive, runExample } from '../example-test.mjs';

test('3 workers on one Redis limit: at most 10 calls in every 1 s window at the API, and at least 9 a second', async () => {
  const stdout = await runExample(import.meta.dirname, ['index.js'], 60_000);
  const workers = [...stdout.matchAll(/^worker ([abc]): (\d+) of (\d+) calls answered 200$/gm)];
  assert.equal(workers.length, 3, stdout);
  for (const [, worker, ok, calls] of workers) assert.deepEqual([ok, calls], ['20', '20'], `worker ${worker}`);

  assert.match(stdout, /^the API saw 60 calls in [\d.]+ s; per second \(from the first call\): [\d ]+$/m);
  const window = /^most calls in any 1 s window: (\d+) \(limit 10\); refused by the API \(429\): (\d+)$/m.exec(stdout);
  assert.ok(window, stdout);
  assert.ok(Number(window[1]) <= 10, `at most 10 in any 1 s window:\n${stdout}`);
  assert.equal(window[2], '0', 'the API refused nothing');
  const rate = Number(/^achieved rate: ([\d.]+) calls\/s/m.exec(stdout)?.[1]);
  assert.ok(rate >= 9 && rate <= 10, `achieved rate ${rate} calls/s`);
  assert.match(stdout, /^ok: at most 10 calls in every 1 s window, and at least 9 a second overall$/m);

  const redisPid = Number(/^stopped redis-server \(pid (\d+)\)/m.exec(stdout)?.[1]);
  assert.ok(redisPid > 0, stdout);
  assert.equal(alive(redisPid), false, 'redis-server is gone');
});
