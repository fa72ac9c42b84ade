// @ts-check
// One SMS route, three rules per phone number, all of which must pass:
//   1 a minute, 5 an hour, 10 a day (fixed windows: the quotas a user reads on a calendar).
// The limiter's clock is injected, so a day and a half of traffic runs in a blink;
// each denial shows which rule bound it (the one that makes the client wait longest)
// and which rules denied it.
//
//   pnpm example sms-multi-rule   (from the repository root; or: node index.js, packages built)
import { once } from 'node:events';
import { createLimiter, rateLimit } from '@floodgate/express';
import express from 'express';

const START = Date.UTC(2025, 0, 1); // 2025-01-01 00:00 UTC, a Wednesday
let now = START;

const limiter = createLimiter({
  rules: [
    { name: 'per-minute', algorithm: 'fixed-window', limit: 1, windowMs: 60_000 },
    { name: 'per-hour', algorithm: 'fixed-window', limit: 5, windowMs: 3_600_000 },
    { name: 'per-day', algorithm: 'fixed-window', limit: 10, windowMs: 86_400_000 },
  ],
  now: () => now, // drop this line in a real app: the default clock is Date.now
});

const app = express();
app.post(
  '/sms',
  express.json(),
  rateLimit({
    limiter,
    key: (req) => `phone:${req.body?.phone}`,
    headers: 'draft-8', // RateLimit-Policy / RateLimit name the binding rule
    handler: (_req, res, _next, decision) => {
      res.status(429).json({
        error: 'too many text messages to this number',
        rule: decision.rule,
        deniedBy: decision.rules.filter((r) => !r.allowed).map((r) => r.name),
        retryAfterSeconds: Math.ceil(decision.retryAfterMs / 1000),
      });
    },
  }),
  (req, res) => {
    const left = Object.fromEntries((req.rateLimit?.rules ?? []).map((r) => [r.name, r.remaining]));
    res.json({ sent: true, to: req.body.phone, left });
  },
);

const server = app.listen(0, '127.0.0.1');
await once(server, 'listening');
const address = server.address();
const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;

/** "day 1 00:05:00" for a time in ms since START. @param {number} ms */
function clockText(ms) {
  const day = Math.floor(ms / 86_400_000) + 1;
  return `day ${day} ${new Date(START + ms).toISOString().slice(11, 19)}`;
}

/** "40 s", "3300 s (55 min)", "82500 s (22 h 55 min)". @param {number} seconds */
function waitText(seconds) {
  if (seconds < 60) return `${seconds} s`;
  const hours = Math.floor(seconds / 3600);
  const minutes = Math.floor((seconds % 3600) / 60);
  return `${seconds} s (${[hours > 0 ? `${hours} h` : '', minutes > 0 ? `${minutes} min` : ''].filter(Boolean).join(' ')})`;
}

const widths = [16, 9, 6, 11, 22, 22, 14];
/** @param {string[]} cells */
const row = (cells) =>
  cells
    .map((cell, i) => cell.padEnd(widths[i] ?? 10))
    .join('  ')
    .trimEnd();

/** Sends one SMS at `offsetMs` after the start and prints a row. @param {number} offsetMs @param {string} phone */
async function send(offsetMs, phone) {
  now = START + offsetMs;
  const res = await fetch(`${base}/sms`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ phone }) });
  const body = await res.json();
  if (res.status === 200) {
    const left = `${body.left['per-minute']}/${body.left['per-hour']}/${body.left['per-day']}`;
    console.log(row([clockText(offsetMs), phone, String(res.status), 'sent', '', '', left]));
  } else {
    const retryAfter = Number(res.headers.get('retry-after'));
    console.log(row([clockText(offsetMs), phone, String(res.status), body.rule, body.deniedBy.join(', '), waitText(retryAfter), '']));
  }
}

const MIN = 60_000;
const HOUR = 60 * MIN;

console.log('POST /sms, per phone number: 1 a minute, 5 an hour, 10 a day (fixed windows, UTC), all must pass.\n');
console.log(row(['time', 'phone', 'status', 'bound by', 'denied by', 'Retry-After', 'left m/h/d']));
await send(0, '+15550001');
await send(20_000, '+15550001'); // a second text within the minute
await send(20_000, '+15550002'); // another number has its own quota
for (let m = 1; m <= 4; m++) await send(m * MIN, '+15550001'); // 5 this hour
await send(5 * MIN, '+15550001'); // the minute is free, the hour is not
for (let m = 0; m < 5; m++) await send(HOUR + m * MIN, '+15550001'); // a new hour: 10 today
await send(HOUR + 5 * MIN, '+15550001'); // both the hour and the day are used up: the day binds (longest wait)
await send(2 * HOUR, '+15550001'); // a new hour, but the day is still used up
await send(24 * HOUR, '+15550001'); // the next day (UTC midnight): sent again

console.log('\nleft m/h/d: texts left this minute / hour / day. A denied text counts against no rule.');
server.close();
