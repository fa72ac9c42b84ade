// @ts-check
// Hand-made SVG: two panels that share the time axis.
//   top:    requests admitted per time bucket, one line per algorithm, over grey bars of the offered traffic
//   bottom: requests admitted in the trailing window (t - windowMs, t], a step line per algorithm,
//           against the limit: what "10 per 10 s" promises, measured on a truly sliding window
// Plain SVG 1.1 with no script, no external font and no CSS, so it renders the same in a
// browser, on GitHub (which shows SVGs as images) and in an image viewer.

const WIDTH = 960;
const LEFT = 64;
const RIGHT = 24;
const PLOT_WIDTH = WIDTH - LEFT - RIGHT;
const FONT = "system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif";

/**
 * @typedef {object} Series
 * @property {string} label
 * @property {string} color
 * @property {string} [dash]     stroke-dasharray
 * @property {number[]} times    when its requests were admitted (served, for shaping), ms, ascending
 */

/**
 * @typedef {object} ChartInput
 * @property {string} title
 * @property {string[]} subtitle  one or two lines
 * @property {number} limit
 * @property {number} windowMs
 * @property {number} bucketMs
 * @property {number} durationMs
 * @property {number[]} offered  arrival times of every request
 * @property {Series[]} series   drawn in this order, the first one widest so lines that coincide stay visible
 */

/** @param {string} text */
const escapeXml = (text) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** Rounds to 0.1 px: short paths, identical output on every run. @param {number} n */
const px = (n) => String(Math.round(n * 10) / 10);

/** A tick step of 1, 2 or 5 times a power of ten, for about `count` ticks up to `max`. @param {number} max @param {number} count */
function tickStep(max, count) {
  const raw = Math.max(max, 1) / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * power >= raw) return Math.max(1, m * power);
  return 10 * power;
}

/** @param {number[]} times @param {number} bucketMs @param {number} buckets */
function countPerBucket(times, bucketMs, buckets) {
  const counts = new Array(buckets).fill(0);
  for (const t of times) {
    const i = Math.floor(t / bucketMs);
    if (i >= 0 && i < buckets) counts[i]++;
  }
  return counts;
}

/**
 * The trailing-window count as a step function: +1 when a request is admitted,
 * -1 windowMs later (when it leaves (t - windowMs, t]).
 *
 * @param {number[]} times @param {number} windowMs
 * @returns {Array<[number, number]>} [time, count from that time on]
 */
function trailingCount(times, windowMs) {
  /** @type {Array<[number, number]>} */
  const events = [];
  for (const t of times) events.push([t, 1], [t + windowMs, -1]);
  events.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  /** @type {Array<[number, number]>} */
  const steps = [[0, 0]];
  let count = 0;
  for (let i = 0; i < events.length; ) {
    const at = /** @type {[number, number]} */ (events[i])[0];
    while (i < events.length && /** @type {[number, number]} */ (events[i])[0] === at) count += /** @type {[number, number]} */ (events[i++])[1];
    steps.push([at, count]);
  }
  return steps;
}

/**
 * @param {{ top: number, height: number, yMax: number, xMax: number, windowMs: number, title: string }} panel
 * @returns {{ svg: string[], x: (t: number) => number, y: (v: number) => number }}
 */
function axes({ top, height, yMax, xMax, windowMs, title }) {
  const x = (/** @type {number} */ t) => LEFT + (t / xMax) * PLOT_WIDTH;
  const y = (/** @type {number} */ v) => top + height - (v / yMax) * height;
  const svg = [`<text x="${LEFT}" y="${top - 10}" font-size="14" font-weight="600" fill="#222">${escapeXml(title)}</text>`];
  svg.push(`<rect x="${LEFT}" y="${top}" width="${PLOT_WIDTH}" height="${height}" fill="#fcfcfc" stroke="#bbb"/>`);
  const step = tickStep(yMax, 5);
  for (let v = 0; v <= yMax; v += step) {
    svg.push(`<line x1="${LEFT}" x2="${LEFT + PLOT_WIDTH}" y1="${px(y(v))}" y2="${px(y(v))}" stroke="#e6e6e6"/>`);
    svg.push(`<text x="${LEFT - 8}" y="${px(y(v) + 4)}" font-size="12" text-anchor="end" fill="#555">${v}</text>`);
  }
  // One gridline per window: fixed windows start on them.
  for (let t = 0; t <= xMax; t += windowMs) {
    svg.push(`<line x1="${px(x(t))}" x2="${px(x(t))}" y1="${top}" y2="${top + height}" stroke="#d0d0d0" stroke-dasharray="3 3"/>`);
    svg.push(`<text x="${px(x(t))}" y="${top + height + 16}" font-size="12" text-anchor="middle" fill="#555">${t / 1000} s</text>`);
  }
  return { svg, x, y };
}

/** @param {ChartInput} input */
export function renderChart(input) {
  const { limit, windowMs, bucketMs, offered, series } = input;
  const lastServed = Math.max(input.durationMs, ...series.flatMap((s) => s.times));
  const xMax = Math.ceil((lastServed + 1) / windowMs) * windowMs;
  const buckets = xMax / bucketMs;
  const offeredCounts = countPerBucket(offered, bucketMs, buckets);
  const counts = series.map((s) => countPerBucket(s.times, bucketMs, buckets));
  const steps = series.map((s) => trailingCount(s.times, windowMs));

  // Legend entries flow left to right and wrap; text width is estimated (no font metrics in a string).
  const legend = [
    { label: 'offered (requests per second)', swatch: /** @type {Series | undefined} */ (undefined) },
    ...series.map((s) => ({ label: s.label, swatch: s })),
  ];
  /** @type {Array<{ x: number, row: number }>} */
  const places = [];
  let cursor = 0;
  let rowIndex = 0;
  for (const entry of legend) {
    const entryWidth = 36 + entry.label.length * 7.4 + 28;
    if (cursor > 0 && cursor + entryWidth > PLOT_WIDTH) {
      cursor = 0;
      rowIndex++;
    }
    places.push({ x: LEFT + cursor, row: rowIndex });
    cursor += entryWidth;
  }
  const legendTop = 104;
  const topA = legendTop + (rowIndex + 1) * 22 + 28;
  const heightA = 220;
  const topB = topA + heightA + 64;
  const heightB = 200;
  const height = topB + heightB + 52;

  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="${FONT}">`,
    `<title>${escapeXml(`${input.title}: ${input.subtitle.join(' ')}`)}</title>`,
    `<desc>${escapeXml(`Requests admitted per ${bucketMs / 1000} s and in the trailing ${windowMs / 1000} s by each algorithm, for the limit ${limit} per ${windowMs / 1000} s.`)}</desc>`,
    `<rect width="${WIDTH}" height="${height}" fill="#ffffff"/>`,
    `<text x="${LEFT}" y="34" font-size="20" font-weight="700" fill="#111">${escapeXml(input.title)}</text>`,
    ...input.subtitle.map((line, i) => `<text x="${LEFT}" y="${58 + i * 18}" font-size="13" fill="#444">${escapeXml(line)}</text>`),
  ];
  legend.forEach((entry, i) => {
    const { x: lx, row: r } = places[i] ?? { x: LEFT, row: 0 };
    const ly = legendTop + r * 22;
    const s = entry.swatch;
    if (s === undefined) {
      out.push(`<rect x="${lx}" y="${ly - 9}" width="28" height="10" fill="#d9d9d9"/>`);
    } else {
      out.push(
        `<line x1="${lx}" x2="${lx + 28}" y1="${ly - 4}" y2="${ly - 4}" stroke="${s.color}" stroke-width="3"${s.dash ? ` stroke-dasharray="${s.dash}"` : ''}/>`,
      );
    }
    out.push(`<text x="${lx + 36}" y="${ly}" font-size="13" fill="#222">${escapeXml(entry.label)}</text>`);
  });

  // Top panel: per bucket.
  const maxA = Math.max(...offeredCounts, ...counts.flat(), 1);
  const a = axes({
    top: topA,
    height: heightA,
    yMax: Math.ceil(maxA / tickStep(maxA, 5)) * tickStep(maxA, 5),
    xMax,
    windowMs,
    title: `Admitted per ${bucketMs / 1000} s`,
  });
  out.push(...a.svg);
  const barWidth = (bucketMs / xMax) * PLOT_WIDTH;
  offeredCounts.forEach((n, i) => {
    if (n > 0) {
      out.push(`<rect x="${px(a.x(i * bucketMs) + 1)}" y="${px(a.y(n))}" width="${px(barWidth - 2)}" height="${px(a.y(0) - a.y(n))}" fill="#d9d9d9"/>`);
    }
  });
  series.forEach((s, k) => {
    const points = counts[k]?.map((n, i) => `${px(a.x((i + 0.5) * bucketMs))},${px(a.y(n))}`).join(' ');
    out.push(
      `<polyline points="${points}" fill="none" stroke="${s.color}" stroke-width="${px(lineWidth(k, series.length))}" stroke-linejoin="round" stroke-linecap="round"${s.dash ? ` stroke-dasharray="${s.dash}"` : ''}/>`,
    );
  });

  // Bottom panel: trailing window against the limit.
  const maxB = Math.max(2 * limit, ...steps.flat().map(([, n]) => n));
  const b = axes({
    top: topB,
    height: heightB,
    yMax: Math.ceil(maxB / tickStep(maxB, 5)) * tickStep(maxB, 5),
    xMax,
    windowMs,
    title: `Admitted in the last ${windowMs / 1000} s (the limit is ${limit} per ${windowMs / 1000} s)`,
  });
  out.push(...b.svg);
  out.push(
    `<line x1="${LEFT}" x2="${LEFT + PLOT_WIDTH}" y1="${px(b.y(limit))}" y2="${px(b.y(limit))}" stroke="#111" stroke-width="1.5" stroke-dasharray="6 4"/>`,
  );
  out.push(`<text x="${LEFT + PLOT_WIDTH - 6}" y="${px(b.y(limit) - 6)}" font-size="12" text-anchor="end" fill="#111">limit ${limit}</text>`);
  series.forEach((s, k) => {
    const stepList = steps[k] ?? [];
    let d = `M${px(b.x(0))},${px(b.y(0))}`;
    for (const [t, n] of stepList) {
      if (t > xMax) break;
      d += `H${px(b.x(t))}V${px(b.y(n))}`;
    }
    d += `H${px(b.x(xMax))}`;
    out.push(
      `<path d="${d}" fill="none" stroke="${s.color}" stroke-width="${px(lineWidth(k, series.length))}" stroke-linejoin="round"${s.dash ? ` stroke-dasharray="${s.dash}"` : ''}/>`,
    );
  });
  out.push(
    `<text x="${LEFT + PLOT_WIDTH / 2}" y="${topB + heightB + 40}" font-size="12" text-anchor="middle" fill="#555">time (dashed gridlines: window edges, where fixed windows start)</text>`,
  );
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

/** Earlier series are drawn wider, so a later line lying on top of them leaves both visible. @param {number} k @param {number} n */
function lineWidth(k, n) {
  return 1.75 + (n - 1 - k) * 1.1;
}
