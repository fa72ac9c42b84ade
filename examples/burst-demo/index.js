// @ts-check
// An Express app limited by Floodgate (memory store), hit with a burst of
// requests. Prints one row per request: status, the rate-limit headers, and
// the rule that decided.
import { once } from 'node:events';
import { keyBy, rateLimit } from '@floodgate/express';
import express from 'express';

const app = express();

// 5 requests per 10 s per client IP, sliding window (the default algorithm),
// with both the legacy X-RateLimit-* and the IETF draft-8 headers.
app.get('/api', rateLimit({ limit: 5, windowMs: 10_000, headers: 'both' }), (req, res) => {
  res.json({ ok: true, remaining: req.rateLimit?.remaining });
});

// Downloads cost their size: a token bucket of 20 MB refilled at 20 MB a minute, per user.
app.get(
  '/download/:mb',
  rateLimit({
    algorithm: 'token-bucket',
    limit: 20,
    windowMs: 60_000,
    key: keyBy.header('x-user-id'),
    cost: (req) => Number(req.params.mb),
    message: { error: 'download quota exceeded' },
  }),
  (req, res) => {
    res.json({ ok: true, mb: Number(req.params.mb) });
  },
);

const server = app.listen(0, '127.0.0.1');
await once(server, 'listening');
const address = server.address();
const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;

/** @param {string} path @param {Record<string, string>} [headers] */
async function hit(path, headers = {}) {
  const res = await fetch(base + path, { headers });
  await res.arrayBuffer();
  return res;
}

/** @param {string[]} cells @param {number[]} widths */
const row = (cells, widths) => cells.map((c, i) => c.padEnd(widths[i] ?? 10)).join('  ');

console.log('Burst of 8 requests to GET /api (limit 5 per 10 s, sliding window):\n');
const widths = [3, 6, 9, 10, 11, 28];
console.log(row(['#', 'status', 'remaining', 'reset (s)', 'retry-after', 'RateLimit (draft-8)'], widths));
const started = Date.now();
for (let i = 1; i <= 8; i++) {
  const res = await hit('/api');
  const reset = Number(res.headers.get('x-ratelimit-reset')) - Math.floor(started / 1000);
  console.log(
    row(
      [
        String(i),
        String(res.status),
        res.headers.get('x-ratelimit-remaining') ?? '-',
        `+${reset}`,
        res.headers.get('retry-after') ?? '-',
        res.headers.get('ratelimit') ?? '-',
      ],
      widths,
    ),
  );
}

console.log('\nDownloads by user "ada" against a 20 MB token bucket (cost = size):\n');
const downloadWidths = [17, 6, 9, 11];
console.log(row(['request', 'status', 'remaining', 'retry-after'], downloadWidths));
for (const mb of [8, 8, 8, 3, 25]) {
  const res = await hit(`/download/${mb}`, { 'x-user-id': 'ada' });
  console.log(
    row([`GET /download/${mb}`, String(res.status), res.headers.get('x-ratelimit-remaining') ?? '-', res.headers.get('retry-after') ?? '-'], downloadWidths),
  );
}
console.log('\n(25 MB can never fit in a 20 MB bucket: 429 without Retry-After.)');

server.close();
