// @ts-check
// The algorithm simulator: the same traffic through every algorithm, on a
// simulated clock. Prints one table per traffic pattern and writes one SVG
// chart per pattern (docs/simulator/<pattern>.svg by default).
//
//   node index.js              # tables + SVGs into docs/simulator/
//   node index.js --out DIR    # SVGs into DIR instead
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { renderChart } from './chart.js';
import { BUCKET_MS, DURATION_MS, LIMIT, patterns, WINDOW_MS } from './patterns.js';
import { contestants, simulate } from './simulate.js';

const { values } = parseArgs({ options: { out: { type: 'string' } } });
const repoRoot = resolve(import.meta.dirname, '..', '..');
const outDir = resolve(values.out ?? join(repoRoot, 'docs', 'simulator'));
mkdirSync(outDir, { recursive: true });

/** Colour (Okabe-Ito, readable with colour blindness) and dash per algorithm. */
/** @type {Record<string, { color: string, dash?: string }>} */
const styles = {
  'fixed-window': { color: '#D55E00' },
  'sliding-window': { color: '#0072B2', dash: '9 5' },
  'sliding-window (10 segments)': { color: '#56B4E9', dash: '14 4' },
  'sliding-log': { color: '#009E73' },
  'token-bucket': { color: '#E69F00', dash: '3 4' },
  'leaky-bucket (police)': { color: '#999999' },
  gcra: { color: '#7F7F00' },
  'leaky-bucket (shape)': { color: '#CC79A7' },
};

const columns = [
  { title: 'algorithm', width: 28, align: 'left' },
  { title: 'admitted', width: 8 },
  { title: 'denied', width: 6 },
  { title: `max in any ${WINDOW_MS / 1000} s`, width: 15 },
  { title: 'mean delay', width: 10 },
  { title: 'max delay', width: 9 },
];
/** @param {string[]} cells */
const row = (cells) =>
  cells.map((cell, i) => (columns[i]?.align === 'left' ? cell.padEnd(columns[i]?.width ?? 0) : cell.padStart(columns[i]?.width ?? 0))).join('  ');

console.log(`Floodgate algorithm simulator: every algorithm with limit ${LIMIT} per ${WINDOW_MS / 1000} s (burst ${LIMIT}), memory store, simulated clock.`);

for (const pattern of patterns) {
  const runs = [];
  for (const contestant of contestants) runs.push(await simulate(pattern.arrivals, contestant, { limit: LIMIT, windowMs: WINDOW_MS }));

  console.log(`\n== ${pattern.id}: ${pattern.description}`);
  console.log(`   ${pattern.arrivals.length} requests in ${DURATION_MS / 1000} s\n`);
  console.log(row(columns.map((c) => c.title)));
  for (const run of runs) {
    const shaping = run.contestant.mode === 'shape';
    const mean = run.delays.length === 0 ? 0 : run.delays.reduce((sum, d) => sum + d, 0) / run.delays.length;
    console.log(
      row([
        run.contestant.label,
        String(run.arrivals.length),
        String(run.denied),
        String(run.maxInWindow),
        shaping ? `${Math.round(mean)} ms` : '-',
        shaping ? `${Math.max(0, ...run.delays)} ms` : '-',
      ]),
    );
  }

  // Algorithms that admitted exactly the same requests share one line (and say so in the legend).
  /** @type {Map<string, { labels: string[], times: number[] }>} */
  const groups = new Map();
  for (const run of runs) {
    const id = `${run.contestant.mode === 'shape'}:${run.served.join(',')}`;
    const group = groups.get(id);
    if (group) group.labels.push(run.contestant.label);
    else groups.set(id, { labels: [run.contestant.label], times: run.served });
  }
  const series = [...groups.values()].map(({ labels, times }) => {
    const style = styles[labels[0] ?? ''] ?? { color: '#000' };
    const label = labels.join(' = ') + (labels[0] === 'leaky-bucket (shape)' ? ', counted when served' : '');
    return { label, times, ...style };
  });
  const svg = renderChart({
    title: `${pattern.title} traffic`,
    subtitle: [
      `${pattern.description[0]?.toUpperCase()}${pattern.description.slice(1)}: ${pattern.arrivals.length} requests.`,
      `Every algorithm: limit ${LIMIT} per ${WINDOW_MS / 1000} s (burst ${LIMIT}); memory store, simulated clock.`,
    ],
    limit: LIMIT,
    windowMs: WINDOW_MS,
    bucketMs: BUCKET_MS,
    durationMs: DURATION_MS,
    offered: pattern.arrivals,
    series,
  });
  const file = join(outDir, `${pattern.id}.svg`);
  writeFileSync(file, svg);
  const shown = relative(repoRoot, file);
  console.log(`\nwrote ${shown.startsWith('..') ? file : shown}`);
}

console.log(`
max in any ${WINDOW_MS / 1000} s: the most requests admitted in any interval (t - ${WINDOW_MS / 1000} s, t], i.e. on a truly sliding window
(for leaky-bucket (shape): the most requests served, at arrival + delay). Delays are the waits shaping adds.`);
