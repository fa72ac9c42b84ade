// CI runs the example and checks every download: status, MB left and Retry-After.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runExample } from '../example-test.mjs';

test('each download costs its size in MB against a 300 MB token bucket refilled at 100 MB a minute', async () => {
  const stdout = await runExample(import.meta.dirname, ['index.js'], 30_000);
  const rows = stdout
    .split('\n')
    .filter((line) => line.startsWith('+'))
    .map((line) => line.split(/\s{2,}/));
  assert.deepEqual(rows, [
    // time, user, request, MB, status, MB left, Retry-After
    ['+0 s', 'ada', 'GET /download/video.mp4', '150', '200', '150', '-'],
    ['+0 s', 'ada', 'GET /download/dataset.csv', '120', '200', '30', '-'],
    ['+0 s', 'ada', 'GET /download/photo.jpg', '5', '200', '25', '-'],
    ['+0 s', 'ada', 'GET /download/video.mp4', '150', '429', '25', '75'], // 125 MB missing at 100 MB/min
    ['+0 s', 'ada', 'GET /download/backup.tar', '400', '429', '25', '-'], // larger than the bucket: never
    ['+0 s', 'bob', 'GET /download/video.mp4', '150', '200', '150', '-'],
    ['+75 s', 'ada', 'GET /download/video.mp4', '150', '200', '0', '-'],
    ['+75 s', 'ada', 'GET /download/photo.jpg', '5', '429', '0', '3'],
    ['+135 s', 'ada', 'GET /download/dataset.csv', '120', '429', '100', '12'],
  ]);
});
