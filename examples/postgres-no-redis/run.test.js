// CI runs the whole demo: a schema of its own in PostgreSQL (or a private server), two app
// processes, both hammered at once. Across both, exactly each limit is admitted.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runExample } from '../example-test.mjs';

test('two instances behind one PostgreSQL admit exactly the per-user limit and the per-account login limit between them', async () => {
  const stdout = await runExample(import.meta.dirname, ['run.js'], 120_000);
  const api = [...stdout.matchAll(/^api, app ([ab]): (\d+) admitted, (\d+) denied \(429\)$/gm)];
  assert.equal(api.length, 2, stdout);
  for (const [, , admitted, denied] of api) assert.equal(Number(admitted) + Number(denied), 30, `every request a 200 or a 429 (no 503):\n${stdout}`);
  assert.match(stdout, /^api, admitted in all: 20 \(per-user limit 20\)$/m);
  const login = [...stdout.matchAll(/^login, app ([ab]): (\d+) tried, (\d+) denied \(429\)$/gm)];
  assert.equal(login.length, 2, stdout);
  for (const [, , tried, denied] of login) assert.equal(Number(tried) + Number(denied), 8, stdout);
  assert.match(stdout, /^login, tried in all: 5 \(per-account limit 5\)$/m);
});
