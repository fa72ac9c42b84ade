// CI runs the example and checks each row: which texts were sent, which rule
// bound each denial, which rules denied it, and the exact Retry-After.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runExample } from '../example-test.mjs';

test('three rules per phone number: each denial names the rule that bound it', async () => {
  const stdout = await runExample(import.meta.dirname, ['index.js'], 30_000);
  const rows = stdout
    .split('\n')
    .filter((line) => line.startsWith('day '))
    .map((line) => line.split(/\s{2,}/));
  assert.deepEqual(rows, [
    ['day 1 00:00:00', '+15550001', '200', 'sent', '0/4/9'],
    ['day 1 00:00:20', '+15550001', '429', 'per-minute', 'per-minute', '40 s'],
    ['day 1 00:00:20', '+15550002', '200', 'sent', '0/4/9'],
    ['day 1 00:01:00', '+15550001', '200', 'sent', '0/3/8'],
    ['day 1 00:02:00', '+15550001', '200', 'sent', '0/2/7'],
    ['day 1 00:03:00', '+15550001', '200', 'sent', '0/1/6'],
    ['day 1 00:04:00', '+15550001', '200', 'sent', '0/0/5'],
    ['day 1 00:05:00', '+15550001', '429', 'per-hour', 'per-hour', '3300 s (55 min)'],
    ['day 1 01:00:00', '+15550001', '200', 'sent', '0/4/4'],
    ['day 1 01:01:00', '+15550001', '200', 'sent', '0/3/3'],
    ['day 1 01:02:00', '+15550001', '200', 'sent', '0/2/2'],
    ['day 1 01:03:00', '+15550001', '200', 'sent', '0/1/1'],
    ['day 1 01:04:00', '+15550001', '200', 'sent', '0/0/0'],
    ['day 1 01:05:00', '+15550001', '429', 'per-day', 'per-hour, per-day', '82500 s (22 h 55 min)'],
    ['day 1 02:00:00', '+15550001', '429', 'per-day', 'per-day', '79200 s (22 h)'],
    ['day 2 00:00:00', '+15550001', '200', 'sent', '0/4/9'],
  ]);
});
