// @ts-check
// Downloads cost their size: a token bucket per user that holds up to 300 MB
// and refills at 100 MB a minute, where each request costs the file's size in
// megabytes. A big file waits for enough tokens (Retry-After says how long),
// small files still pass meanwhile, and a file larger than the bucket can never
// pass (429 without Retry-After). The limiter's clock is injected so the run is
// instant and the numbers are the same every time.
//
//   pnpm example download-cost   (from the repository root; or: node index.js, packages built)
import { createLimiter, keyBy, rateLimit } from '@floodgate/hono';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';

const START = Date.UTC(2025, 0, 1);
let now = START;

/** The catalogue: file name -> size in MB. */
/** @type {Record<string, number>} */
const files = { 'video.mp4': 150, 'dataset.csv': 120, 'photo.jpg': 5, 'backup.tar': 400 };

const downloads = createLimiter({
  algorithm: 'token-bucket',
  limit: 100, // MB refilled per windowMs
  windowMs: 60_000,
  burst: 300, // MB the bucket holds: the most one user can download at once
  now: () => now, // drop this line in a real app: the default clock is Date.now
});

const app = new Hono();
app.get(
  '/download/:name',
  async (c, next) => (c.req.param('name') in files ? next() : c.json({ error: 'no such file' }, 404)),
  rateLimit({
    limiter: downloads,
    key: keyBy.header('x-user-id'),
    cost: (c) => files[c.req.param('name') ?? ''] ?? 1,
    message: { error: 'download quota exceeded' },
  }),
  (c) => c.json({ file: c.req.param('name'), mb: files[c.req.param('name')], remainingMb: c.get('rateLimit').remaining }),
);

const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
await new Promise((resolve) => server.once('listening', resolve));
const address = server.address();
const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;

const widths = [7, 5, 26, 4, 6, 7, 11];
/** @param {string[]} cells */
const row = (cells) =>
  cells
    .map((cell, i) => cell.padEnd(widths[i] ?? 10))
    .join('  ')
    .trimEnd();

/** @param {number} offsetMs @param {string} user @param {string} name */
async function download(offsetMs, user, name) {
  now = START + offsetMs;
  const res = await fetch(`${base}/download/${name}`, { headers: { 'x-user-id': user } });
  await res.arrayBuffer();
  console.log(
    row([
      `+${offsetMs / 1000} s`,
      user,
      `GET /download/${name}`,
      String(files[name]),
      String(res.status),
      res.headers.get('x-ratelimit-remaining') ?? '-',
      res.headers.get('retry-after') ?? '-',
    ]),
  );
}

console.log('Per user: a token bucket of 300 MB refilled at 100 MB a minute; a download costs its size in MB.\n');
console.log(row(['time', 'user', 'request', 'MB', 'status', 'MB left', 'Retry-After']));
await download(0, 'ada', 'video.mp4');
await download(0, 'ada', 'dataset.csv');
await download(0, 'ada', 'photo.jpg');
await download(0, 'ada', 'video.mp4'); // 25 MB left: wait until 150 MB are back (125 MB at 100 MB/min = 75 s)
await download(0, 'ada', 'backup.tar'); // 400 MB never fits in a 300 MB bucket: no Retry-After
await download(0, 'bob', 'video.mp4'); // bob has his own bucket
await download(75_000, 'ada', 'video.mp4'); // exactly when Retry-After said
await download(75_000, 'ada', 'photo.jpg'); // the bucket is empty now
await download(135_000, 'ada', 'dataset.csv'); // a minute later: 100 MB back, 120 MB asked

console.log('\nMB left: X-RateLimit-Remaining. Retry-After: seconds until the same download fits, if nothing else is downloaded meanwhile.');
server.close();
