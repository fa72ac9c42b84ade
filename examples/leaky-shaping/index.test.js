// CI runs the example: the decided delays are exact (the limiter's clock is
// injected), the real waits are checked with margins (timers never fire early;
// a loaded machine may run them late).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runExample } from '../example-test.mjs';

test('a burst of 12 leaves the shaper 200 ms apart; what overflows the queue of 10 gets a 429', async () => {
  const stdout = await runExample(import.meta.dirname, ['index.js'], 60_000);
  const rows = stdout
    .split('\n')
    .filter((line) => line.startsWith('#'))
    .map((line) => line.split(/\s{2,}/));
  assert.equal(rows.length, 12);
  rows.forEach((cells, i) => {
    assert.equal(cells[0], `#${i + 1}`, 'rows in arrival order');
    if (i < 10) {
      const delay = i * 200;
      assert.deepEqual(cells.slice(1, 3), ['200', String(delay)], `arrival #${i + 1}`);
      const waited = Number(/^(\d+) ms$/.exec(cells[3] ?? '')?.[1]);
      const servedAt = Number(/^\+(\d+) ms$/.exec(cells[4] ?? '')?.[1]);
      assert.ok(waited >= delay - 2 && waited <= delay + 3_000, `arrival #${i + 1} waited ${waited} ms for a delay of ${delay} ms`);
      assert.ok(servedAt >= delay - 2, `arrival #${i + 1} served at +${servedAt} ms, not before +${delay} ms`);
    } else {
      assert.deepEqual(cells.slice(1), ['429', '-', '-', 'queue full, Retry-After 1 s'], `arrival #${i + 1}`);
    }
  });
});
