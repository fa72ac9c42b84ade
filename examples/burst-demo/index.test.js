// The demo is part of the README's quick start: CI runs it and checks what it prints.
// It runs on the real clock; here that clock stands still (frozen-clock.mjs), so
// that a window ending or the bucket refilling on a slow machine cannot change a row.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runExample } from '../example-test.mjs';

const frozenClock = new URL('../frozen-clock.mjs', import.meta.url).href;

test('the burst demo admits 5 of 8 requests and shows the download quota', async () => {
  const stdout = await runExample(import.meta.dirname, ['--import', frozenClock, 'index.js'], 30_000);
  const burst = stdout.split('\n').filter((line) => /^\d\s/.test(line));
  assert.deepEqual(
    burst.map((line) => line.split(/\s+/)[1]),
    ['200', '200', '200', '200', '200', '429', '429', '429'],
  );
  assert.match(stdout, /GET \/download\/8\s+200\s+12/);
  assert.match(stdout, /GET \/download\/8\s+429\s+4\s+\d+/);
  assert.match(stdout, /GET \/download\/3\s+200\s+1/);
  assert.match(stdout, /GET \/download\/25\s+429\s+1\s+-/);
});
