// CI runs the example and checks what the fake API saw: never more than 2 calls
// in flight, never more than 5 in any 1 s window, the 4 user jobs (priority 4)
// right after the background jobs already admitted when they arrived, and the
// job that could wait only 300 ms refused without reaching the API.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runExample } from '../example-test.mjs';

test('a Bottleneck queue on Floodgate: maxConcurrent and minTime hold, and priorities are honoured', async () => {
  const stdout = await runExample(import.meta.dirname, ['index.js'], 60_000);
  assert.match(stdout, /^the API answered 16 jobs in [\d.]+ s, in this order:$/m);
  const order = (/in this order:\n(.*)$/m.exec(stdout)?.[1] ?? '').split(' ');
  assert.equal(order.length, 16, stdout);
  // At +300 ms, two background jobs have started (at +0 and +220): the user jobs come next, in their order.
  assert.deepEqual(order.slice(0, 6), ['background-1', 'background-2', 'user-1', 'user-2', 'user-3', 'user-4'], stdout);
  assert.deepEqual(
    order.slice(6),
    Array.from({ length: 10 }, (_, i) => `background-${i + 3}`),
  );
  const inFlight = Number(/^most in flight at once: (\d+)/m.exec(stdout)?.[1]);
  assert.ok(inFlight === 2, `at most 2 in flight, and the limit was reached:\n${stdout}`);
  const perSecond = Number(/^most calls in any 1 s window: (\d+)/m.exec(stdout)?.[1]);
  assert.ok(perSecond >= 4 && perSecond <= 5, `at most 5 in any 1 s window:\n${stdout}`);
  assert.match(stdout, /^the job that could wait 300 ms: ERR_FG_WAIT_TIMEOUT; the API saw it: false$/m);
  assert.match(stdout, /^ok: /m);
});
