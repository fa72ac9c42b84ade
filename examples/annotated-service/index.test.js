// CI compiles the service with tsc (standard decorators) and runs the demo on
// a private redis-server: each denial names the rule the demo expects, the
// four rules of an order cost one script call in Redis (INFO commandstats),
// and MONITOR shows that call: one FCALL over the four keys.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { alive, runExample } from '../example-test.mjs';

test('one decorator, four rules over three scopes, one round trip to Redis per call', async () => {
  const stdout = await runExample(import.meta.dirname, ['index.js'], 60_000);
  const lines = stdout.split('\n').map((line) => line.trim());
  const u1 = lines.filter((line) => line.startsWith('u1@203.0.113.9: '));
  assert.equal(u1.length, 3, stdout);
  assert.match(u1[0], /: order-\d+: tea for u1$/);
  assert.match(u1[1], /: order-\d+: milk for u1$/);
  assert.match(u1[2], /: refused, Rate limited by rule 'per-user' \(scope 'user'\): retry in \d+ ms\.$/);
  const sameIp = lines.filter((line) => /^u[23]@203\.0\.113\.9: /.test(line));
  assert.equal(sameIp.length, 4, stdout);
  assert.deepEqual(
    sameIp.map((line) => (line.includes('refused') ? 'refused' : 'placed')),
    ['placed', 'placed', 'placed', 'refused'],
  );
  assert.match(sameIp[3], /refused, Rate limited by rule 'per-ip' \(scope 'ip'\): retry in \d+ ms\.$/);
  assert.match(stdout, /^ {2}44 admitted, 16 refused by 'all-10s': 50 orders in these 10 s, the first one included$/m);

  const counted = /^Redis ran (\d+) script calls for (\d+) orders: one round trip per order/m.exec(stdout);
  assert.ok(counted, stdout);
  assert.equal(counted[2], '67');
  assert.equal(counted[1], counted[2]);

  const sent = stdout.split('What one more order sends Redis (MONITOR):\n')[1]?.split('\n\n')[0]?.trim().split('\n') ?? [];
  assert.equal(sent.length, 1, `one command: ${sent.join(' | ')}`);
  const [command, , keyCount, ...rest] = sent[0].trim().split(' ');
  assert.equal(command, 'fcall');
  assert.equal(keyCount, '4');
  assert.deepEqual(rest.slice(0, 4), [
    'orders:{%global}:all-10s:v2',
    'orders:{%global}:all-60s:v2',
    'orders:{%ip:192.0.2.200}:per-ip:v2',
    'orders:{%user:u200}:per-user:v2',
  ]);

  const pid = Number(/^stopped redis-server \(pid (\d+)\)$/m.exec(stdout)?.[1]);
  assert.ok(pid > 0, stdout);
  assert.equal(alive(pid), false, 'redis-server is gone');
});
