/*
 * docs/benchmarks.svg: the run's ratios as horizontal bars, hand-written SVG
 * (no chart library), one group per benchmark, each against its own 1.0×
 * reference (the Map baseline, the raw EVALSHA floor, rate-limiter-flexible
 * on the same database, the bare framework).
 */
import type { HttpRow } from './http.js';
import { frameworks } from './http-apps.js';
import { redisAlgorithmContenders } from './redis.js';
import type { BenchResults } from './results.js';
import { floodgateOf, referenceOf, sqlContenderInfo } from './sql-contenders.js';
import { pairedRatio } from './stats.js';

interface Bar {
  label: string;
  ratio: number;
  floodgate: boolean;
}

interface Group {
  title: string;
  bars: Bar[];
}

const escapeXml = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function groups(results: BenchResults): Group[] {
  const out: Group[] = [];
  const { memory, redis, sql, edge, http } = results;
  if (memory !== undefined) {
    for (const [scenario, title] of [
      ['hot', 'Memory store, one hot key: decisions/s × awaited Map baseline'],
      ['random', `Memory store, ${memory.randomKeys / 1000}k random keys: decisions/s × awaited Map baseline`],
    ] as const) {
      out.push({
        title,
        bars: memory.contenders
          .filter((c) => c.id !== 'map' && !c.variant)
          .map((c) => ({ label: c.label, ratio: pairedRatio(memory.throughput[scenario][c.id], memory.throughput[scenario].map), floodgate: c.floodgate })),
      });
    }
  }
  if (redis !== undefined) {
    for (const [mode, title] of [
      ['sequential', 'Redis store, sequential: decisions/s × raw EVALSHA floor'],
      ['concurrent', `Redis store, ${redis.inFlight} in flight: decisions/s × raw EVALSHA floor`],
    ] as const) {
      out.push({
        title,
        bars: redis.contenders
          .filter((c) => c.id !== 'floor' && redisAlgorithmContenders.includes(c.id))
          .map((c) => ({ label: c.label, ratio: pairedRatio(redis.throughput[mode][c.id] ?? [], redis.throughput[mode].floor ?? []), floodgate: c.floodgate })),
      });
    }
  }
  if (redis !== undefined) {
    const t = redis.throughput;
    out.push({
      title: `Redis store, ${redis.inFlight} in flight: Floodgate's 3 scopes in one call and plans per call`,
      bars: [
        {
          label: '3 scopes in one call × 3 stacked limiters',
          ratio: pairedRatio(t.concurrent['floodgate-3-scopes'] ?? [], t.concurrent['floodgate-3-stacked'] ?? []),
          floodgate: true,
        },
        {
          label: 'a plan per call × a static limiter',
          ratio: pairedRatio(t.concurrent['floodgate-fixed-window-plans'] ?? [], t.concurrent['floodgate-fixed-window'] ?? []),
          floodgate: true,
        },
      ],
    });
  }
  if (sql !== undefined) {
    // The hot-key rows (one batch per turn for Floodgate, several times the peers' rate) are in the tables, off this scale.
    const bars: Bar[] = [];
    for (const database of ['postgres', 'mysql', 'sqlite'] as const) {
      for (const id of [floodgateOf[database], ...(database === 'postgres' ? (['acpr-postgres'] as const) : [])]) {
        for (const mode of ['sequential', 'concurrent'] as const) {
          const t = sql.throughput[mode];
          bars.push({
            label: `${sqlContenderInfo[id].short}, ${mode === 'sequential' ? 'sequential' : `${sql.inFlight} in flight`}`,
            ratio: pairedRatio(t[id] ?? [], t[referenceOf[database]] ?? []),
            floodgate: sqlContenderInfo[id].floodgate,
          });
        }
      }
    }
    out.push({ title: 'SQL stores, random keys: decisions/s × rate-limiter-flexible on the same database', bars });
  }
  if (edge !== undefined) {
    out.push({
      title: `Upstash REST bridge, ${edge.inFlight} in flight: decisions/s × @upstash/ratelimit fixedWindow`,
      bars: edge.contenders
        .filter((c) => c.id !== 'upstash-ratelimit-fixed-window')
        .map((c) => ({
          label: c.label,
          ratio: pairedRatio(edge.throughput.concurrent[c.id] ?? [], edge.throughput.concurrent['upstash-ratelimit-fixed-window'] ?? []),
          floodgate: c.floodgate,
        })),
    });
  }
  if (http !== undefined) {
    for (const framework of frameworks) {
      const rows = http.rows.filter((r) => r.framework === framework);
      const bare = rows.find((r) => r.variant === 'bare') as HttpRow;
      out.push({
        title: `HTTP, ${bare.label.replace(/, bare$/, '')}: req/s × bare`,
        bars: rows
          .filter((r) => r.variant !== 'bare')
          .map((r) => ({ label: r.label, ratio: pairedRatio(r.requestsPerSecond, bare.requestsPerSecond), floodgate: r.variant.startsWith('floodgate') })),
      });
    }
  }
  return out;
}

export function renderChart(results: BenchResults): string {
  const all = groups(results);
  const width = 900;
  const labelWidth = 330;
  const barArea = width - labelWidth - 70;
  const rowHeight = 20;
  const titleHeight = 28;
  const max = Math.max(1.2, ...all.flatMap((g) => g.bars.map((b) => (Number.isFinite(b.ratio) ? b.ratio : 0))));
  const x = (ratio: number) => labelWidth + (Math.max(0, ratio) / max) * barArea;
  const parts: string[] = [];
  let y = 50;
  for (const group of all) {
    parts.push(`<text x="10" y="${y + 18}" class="title">${escapeXml(group.title)}</text>`);
    const top = y + titleHeight;
    y = top;
    for (const bar of group.bars) {
      const end = x(Number.isFinite(bar.ratio) ? bar.ratio : 0);
      parts.push(
        `<text x="${labelWidth - 8}" y="${y + 14}" class="label">${escapeXml(bar.label)}</text>`,
        `<rect x="${labelWidth}" y="${y + 3}" width="${(end - labelWidth).toFixed(1)}" height="${rowHeight - 6}" class="${bar.floodgate ? 'floodgate' : 'peer'}"/>`,
        `<text x="${(end + 5).toFixed(1)}" y="${y + 14}" class="value">${Number.isFinite(bar.ratio) ? `${bar.ratio.toFixed(2)}×` : '–'}</text>`,
      );
      y += rowHeight;
    }
    // The group's 1.0× reference.
    parts.push(`<line x1="${x(1).toFixed(1)}" y1="${top}" x2="${x(1).toFixed(1)}" y2="${y}" class="reference"/>`);
    y += 12;
  }
  const height = y + 30;
  const when = results.startedAt.slice(0, 10);
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, -apple-system, 'Segoe UI', sans-serif">
<title>Floodgate vs its peers: ratios measured in one run</title>
<style>
  .heading { font-size: 16px; font-weight: 600; fill: #111; }
  .title { font-size: 13px; font-weight: 600; fill: #222; }
  .label { font-size: 12px; fill: #333; text-anchor: end; }
  .value { font-size: 12px; fill: #333; }
  .note { font-size: 11px; fill: #666; }
  .floodgate { fill: #2563eb; }
  .peer { fill: #9ca3af; }
  .reference { stroke: #dc2626; stroke-width: 1.5; stroke-dasharray: 4 3; }
</style>
<rect width="100%" height="100%" fill="#fff"/>
<text x="10" y="24" class="heading">Floodgate vs its peers: ratios measured in one run (${escapeXml(when)}, ${escapeXml(results.machine.cpu)}, ${results.machine.cores} cores)</text>
<text x="10" y="40" class="note">Blue: Floodgate. Grey: peers. Dashed red line: 1.0× (the group's reference). Higher is faster. From \`pnpm bench\`; tables in BENCHMARKS.md.</text>
${parts.join('\n')}
</svg>
`;
}
