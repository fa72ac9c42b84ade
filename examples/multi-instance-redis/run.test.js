// CI runs the whole demo: a private redis-server, two app processes, both
// hammered at once. Across both, exactly the limit is admitted, everything
// else is a 429 (no 503: Redis answered every call). Then new rules published
// with RedisRuleSource reach both apps, and exactly the raised limit's extra
// calls are admitted. Every process the demo started is gone afterwards.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { alive, runExample } from '../example-test.mjs';

test('two instances behind one Redis admit exactly the shared limit between them, and follow rules published to Redis', async () => {
  const stdout = await runExample(import.meta.dirname, ['run.js'], 90_000);
  const perApp = [...stdout.matchAll(/^app ([ab]): (\d+) admitted, (\d+) denied \(429\)$/gm)].map((m) => ({
    app: m[1],
    admitted: Number(m[2]),
    denied: Number(m[3]),
  }));
  assert.equal(perApp.length, 4, `a line per app and round without other statuses:\n${stdout}`);
  const [a1, b1, a2, b2] = perApp;
  for (const { app, admitted, denied } of [a1, b1]) assert.equal(admitted + denied, 40, `app ${app}, first round`);
  for (const { app, admitted, denied } of [a2, b2]) assert.equal(admitted + denied, 10, `app ${app}, second round`);

  const total = /^total admitted: (\d+) \(the shared limit is (\d+)\)$/m.exec(stdout);
  assert.ok(total, stdout);
  assert.equal(Number(total[2]), 30);
  assert.equal(Number(total[1]), 30);
  assert.equal(a1.admitted + b1.admitted, 30);

  // RedisRuleSource: both instances switch to the published rules without a restart, and keep the state.
  assert.match(stdout, /^app a enforces limit 40$/m);
  assert.match(stdout, /^app b enforces limit 40$/m);
  const second = /^second round admitted: (\d+) \(the shared limit is now (\d+), 30 already used\)$/m.exec(stdout);
  assert.ok(second, stdout);
  assert.equal(Number(second[2]), 40);
  assert.equal(Number(second[1]), 10);
  assert.equal(a2.admitted + b2.admitted, 10);

  const redisPort = Number(/^redis-server \(pid \d+\) on 127\.0\.0\.1:(\d+)$/m.exec(stdout)?.[1]);
  assert.ok(redisPort > 0 && redisPort !== 6379, 'a private redis-server on a free port');
  const pids = [...stdout.matchAll(/^stopped (?:app [ab]|redis-server) \(pid (\d+)\)$/gm)].map((m) => Number(m[1]));
  assert.equal(pids.length, 3, 'both apps and redis-server stopped');
  for (const pid of pids) assert.equal(alive(pid), false, `pid ${pid} is gone`);
});
