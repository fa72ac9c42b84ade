// CI runs the simulator and checks its tables against the algorithms' definitions:
// a small textbook model of each algorithm, written here from DESIGN.md, replays
// the same traffic, and the table must show exactly its numbers. Then the claims
// the docs make from the charts: fixed window lets ~2x the limit through at the
// boundary, sliding log never exceeds the limit in any window, and so on.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runExample } from '../example-test.mjs';
import { LIMIT, patterns, WINDOW_MS } from './patterns.js';

const BURST = LIMIT; // the simulator leaves burst at its default, the limit
const out = mkdtempSync(join(tmpdir(), 'floodgate-simulator-'));
const docs = join(import.meta.dirname, '..', '..', 'docs', 'simulator');

/** @type {string} */
let stdout = '';
/** @type {Map<string, Map<string, { admitted: number, denied: number, maxInWindow: number, meanDelay: string, maxDelay: string }>>} */
const tables = new Map();

before(async () => {
  stdout = await runExample(import.meta.dirname, ['index.js', '--out', out], 60_000);
  let current;
  for (const line of stdout.split('\n')) {
    const heading = /^== ([\w-]+):/.exec(line);
    if (heading) {
      current = new Map();
      tables.set(heading[1], current);
      continue;
    }
    const row = /^(\S+(?: \((?:police|shape|10 segments)\))?)\s+(\d+)\s+(\d+)\s+(\d+)\s+(-|\d+ ms)\s+(-|\d+ ms)$/.exec(line);
    if (row && current) {
      current.set(row[1], { admitted: Number(row[2]), denied: Number(row[3]), maxInWindow: Number(row[4]), meanDelay: row[5], maxDelay: row[6] });
    }
  }
});

after(() => rmSync(out, { recursive: true, force: true }));

// ---- textbook models (times in ms from the start; the simulator's epoch is a multiple of WINDOW_MS) ----

/** Fixed window: count per window floor(t / W); admitted while count < limit. */
function fixedWindowModel(arrivals) {
  const counts = new Map();
  return arrivals.filter((t) => {
    const w = Math.floor(t / WINDOW_MS);
    const n = counts.get(w) ?? 0;
    if (n >= LIMIT) return false;
    counts.set(w, n + 1);
    return true;
  });
}

/** Sliding log: admitted while fewer than `limit` admitted calls lie in (t - W, t]. */
function slidingLogModel(arrivals) {
  const admitted = [];
  for (const t of arrivals) {
    if (admitted.filter((a) => a > t - WINDOW_MS).length < LIMIT) admitted.push(t);
  }
  return admitted;
}

/**
 * Sliding window of S segments of G = W / S ms, aligned to the epoch: the oldest
 * segment weighed by its part still inside (t - W, t], plus the S - 1 newer ones.
 */
function slidingWindowModel(arrivals, segments) {
  const G = WINDOW_MS / segments;
  const counts = new Map();
  return arrivals.filter((t) => {
    const s = Math.floor(t / G);
    const phase = t - s * G;
    let newer = 0;
    for (let i = s - segments + 1; i <= s; i++) newer += counts.get(i) ?? 0;
    const oldest = counts.get(s - segments) ?? 0;
    // oldest * (G - phase) / G + newer + 1 <= limit, multiplied by G to stay in integers
    if (oldest * (G - phase) + (newer + 1) * G > LIMIT * G) return false;
    counts.set(s, (counts.get(s) ?? 0) + 1);
    return true;
  });
}

/**
 * Token bucket / leaky bucket / GCRA, one meter: a level in ms of work that drains
 * 1 per ms; a call adds W / limit and is admitted when the level stays within
 * burst * W / limit. Shaping serves it once the level ahead of it has drained.
 */
function meterModel(arrivals) {
  const interval = WINDOW_MS / LIMIT; // 1000: an integer for this rule
  let level = 0;
  let at = 0;
  const admitted = [];
  const delays = [];
  for (const t of arrivals) {
    level = Math.max(0, level - (t - at));
    at = t;
    if (level + interval > BURST * interval) continue;
    admitted.push(t);
    delays.push(level);
    level += interval;
  }
  return { admitted, delays };
}

function maxInWindow(times) {
  const sorted = [...times].sort((a, b) => a - b);
  let max = 0;
  for (let i = 0; i < sorted.length; i++) {
    max = Math.max(max, sorted.filter((t) => t > sorted[i] - WINDOW_MS && t <= sorted[i]).length);
  }
  return max;
}

const policed = ['token-bucket', 'leaky-bucket (police)', 'gcra'];

for (const pattern of patterns) {
  describe(`the ${pattern.id} pattern`, () => {
    const row = (label) => {
      const r = tables.get(pattern.id)?.get(label);
      assert.ok(r, `a row for ${label} under "== ${pattern.id}"`);
      return r;
    };

    it('has a row for every algorithm, each accounting for every request', () => {
      assert.equal(tables.get(pattern.id)?.size, 8);
      for (const [label, r] of tables.get(pattern.id) ?? []) assert.equal(r.admitted + r.denied, pattern.arrivals.length, label);
    });

    it('fixed-window admits what the fixed-window definition admits', () => {
      const admitted = fixedWindowModel(pattern.arrivals);
      assert.equal(row('fixed-window').admitted, admitted.length);
      assert.equal(row('fixed-window').maxInWindow, maxInWindow(admitted));
      assert.ok(row('fixed-window').maxInWindow <= 2 * LIMIT, 'never more than two windows worth');
    });

    it('sliding-log is exact: what the definition admits, never more than the limit in any window', () => {
      const admitted = slidingLogModel(pattern.arrivals);
      assert.equal(row('sliding-log').admitted, admitted.length);
      assert.equal(row('sliding-log').maxInWindow, maxInWindow(admitted));
      assert.ok(row('sliding-log').maxInWindow <= LIMIT);
    });

    it('sliding-window admits what the two-counter estimate admits', () => {
      const admitted = slidingWindowModel(pattern.arrivals, 1);
      assert.equal(row('sliding-window').admitted, admitted.length);
      assert.equal(row('sliding-window').maxInWindow, maxInWindow(admitted));
    });

    it('sliding-window with 10 segments admits what its estimate admits (and here stays within the limit)', () => {
      const admitted = slidingWindowModel(pattern.arrivals, 10);
      assert.equal(row('sliding-window (10 segments)').admitted, admitted.length);
      assert.equal(row('sliding-window (10 segments)').maxInWindow, maxInWindow(admitted));
      assert.ok(row('sliding-window (10 segments)').maxInWindow <= LIMIT);
    });

    it('token-bucket, leaky-bucket (police) and gcra decide identically, as the meter model does', () => {
      const { admitted } = meterModel(pattern.arrivals);
      for (const label of policed) {
        assert.deepEqual({ ...row(label) }, { ...row('token-bucket') }, label);
        assert.equal(row(label).admitted, admitted.length, label);
        assert.equal(row(label).maxInWindow, maxInWindow(admitted), label);
        assert.ok(row(label).maxInWindow <= BURST + LIMIT, `${label}: at most a full bucket plus one window of refill`);
        assert.equal(row(label).meanDelay, '-');
      }
    });

    it('leaky-bucket (shape) admits the same requests and serves them at a constant rate', () => {
      const { admitted, delays } = meterModel(pattern.arrivals);
      const shape = row('leaky-bucket (shape)');
      assert.equal(shape.admitted, admitted.length);
      assert.equal(shape.denied, row('leaky-bucket (police)').denied);
      assert.equal(shape.maxInWindow, maxInWindow(admitted.map((t, i) => t + delays[i])));
      assert.ok(shape.maxInWindow <= LIMIT, 'served: never more than the limit in any window');
      assert.equal(shape.meanDelay, `${Math.round(delays.reduce((a, b) => a + b, 0) / delays.length)} ms`);
      assert.equal(shape.maxDelay, `${Math.max(...delays)} ms`);
      assert.ok(Math.max(...delays) <= ((BURST - 1) * WINDOW_MS) / LIMIT, 'the queue holds at most burst - 1 ahead of a call');
    });
  });
}

describe('what the docs say about the boundary attack', () => {
  const table = () => tables.get('boundary-attack') ?? new Map();

  it('fixed-window lets twice the limit through within one window at the edge', () => {
    assert.equal(table().get('fixed-window')?.admitted, 6 * LIMIT);
    assert.equal(table().get('fixed-window')?.maxInWindow, 2 * LIMIT);
  });

  it('every other algorithm holds the limit in every window', () => {
    for (const [label, r] of table()) if (label !== 'fixed-window') assert.equal(r.maxInWindow, LIMIT, label);
  });
});

describe('the charts', () => {
  it('writes one SVG per pattern that names every algorithm', () => {
    assert.deepEqual(readdirSync(out).sort(), patterns.map((p) => `${p.id}.svg`).sort());
    for (const pattern of patterns) {
      const svg = readFileSync(join(out, `${pattern.id}.svg`), 'utf8');
      assert.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg" width="\d+" height="\d+" viewBox="0 0 \d+ \d+"/);
      assert.ok(svg.trimEnd().endsWith('</svg>'));
      for (const name of [
        'fixed-window',
        'sliding-window',
        'sliding-window (10 segments)',
        'sliding-log',
        'token-bucket',
        'leaky-bucket (police)',
        'gcra',
        'leaky-bucket (shape)',
      ]) {
        assert.ok(svg.includes(`${name}`), `${pattern.id}.svg names ${name}`);
      }
    }
  });

  it('docs/simulator holds exactly what the simulator draws, and a PNG preview of each chart', () => {
    for (const pattern of patterns) {
      const fresh = readFileSync(join(out, `${pattern.id}.svg`), 'utf8');
      const committed = readFileSync(join(docs, `${pattern.id}.svg`), 'utf8');
      assert.equal(committed, fresh, `docs/simulator/${pattern.id}.svg is stale: run \`npm run demo\` (and render-png.js for the previews)`);
      assert.ok(existsSync(join(docs, `${pattern.id}.png`)), `docs/simulator/${pattern.id}.png`);
    }
  });

  it('docs/choosing-an-algorithm.md quotes the tables exactly as the simulator prints them', () => {
    const guide = readFileSync(join(docs, '..', 'choosing-an-algorithm.md'), 'utf8');
    for (const block of stdout.split('\n== ').slice(1)) {
      const lines = block.split('\n');
      const start = lines.findIndex((line) => line.startsWith('algorithm '));
      const end = lines.findIndex((line, i) => i > start && line.trim() === '');
      const table = lines.slice(start, end).join('\n');
      assert.ok(guide.includes(`\n${table}\n`), `the guide's table for ${block.split(':')[0]} is stale: copy it from \`npm run demo\``);
    }
  });
});
