// @ts-check
// The traffic the simulator replays. Times are ms from the start of the run;
// every algorithm sees exactly the same arrivals, one request (cost 1) each.

/** The rule every algorithm runs with: 10 requests per 10 s (burst 10 where it applies). */
export const LIMIT = 10;
export const WINDOW_MS = 10_000;
/** Length of a run, and the width of the charts' time buckets. */
export const DURATION_MS = 60_000;
export const BUCKET_MS = 1_000;

/**
 * @typedef {object} Pattern
 * @property {string} id         file name of its chart (docs/simulator/<id>.svg)
 * @property {string} title
 * @property {string} description what the traffic is, in one sentence
 * @property {number[]} arrivals  request times in ms, ascending
 */

/** @param {number} from @param {number} to (exclusive) @param {number} everyMs */
function every(from, to, everyMs) {
  const times = [];
  for (let t = from; t < to; t += everyMs) times.push(t);
  return times;
}

/** @type {Pattern[]} */
export const patterns = [
  {
    id: 'steady',
    title: 'Steady',
    description: 'one request every 500 ms for 60 s: twice the allowed rate, evenly spread',
    arrivals: every(0, DURATION_MS, 500),
  },
  {
    id: 'bursty',
    title: 'Bursty',
    description: 'a burst of 15 requests (20 ms apart) every 7 s',
    arrivals: every(0, DURATION_MS, 7_000).flatMap((start) => every(start, start + 15 * 20, 20)),
  },
  {
    id: 'boundary-attack',
    title: 'Boundary attack',
    description: `${LIMIT} requests in the last 100 ms before a window edge and ${LIMIT} in the first 100 ms after it, at 10 s, 30 s and 50 s`,
    arrivals: [10_000, 30_000, 50_000].flatMap((edge) => [...every(edge - 100, edge, 10), ...every(edge, edge + 100, 10)]),
  },
  {
    id: 'on-off',
    title: 'On/off',
    description: '4 requests a second for 6 s, then 14 s of silence, three times (the bursts start at 6 s, 26 s and 46 s)',
    arrivals: [6_000, 26_000, 46_000].flatMap((start) => every(start, start + 6_000, 250)),
  },
];
