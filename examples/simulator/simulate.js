// @ts-check
// Runs one traffic pattern through one algorithm: a real limiter with the
// memory store, whose clock is a variable the simulation moves from arrival
// to arrival, so a minute of traffic takes a few milliseconds and every run
// gives the same numbers.
import { createLimiter, MemoryStore } from '@floodgate/core';

/**
 * Time zero of every run. A multiple of every window length used here, so
 * fixed windows (aligned to the epoch) start at t = 0, 10 s, 20 s, ...
 */
export const EPOCH = Date.UTC(2025, 0, 1);

/**
 * @typedef {object} Contestant
 * @property {string} label   how the table and the charts name it
 * @property {import('@floodgate/core').RuleOptions['algorithm']} algorithm
 * @property {'police' | 'shape'} [mode]
 * @property {number} [segments]
 */

/** Every algorithm; sliding-window also cut into 10 segments, the leaky bucket in both of its modes. */
/** @type {Contestant[]} */
export const contestants = [
  { label: 'fixed-window', algorithm: 'fixed-window' },
  { label: 'sliding-window', algorithm: 'sliding-window' },
  { label: 'sliding-window (10 segments)', algorithm: 'sliding-window', segments: 10 },
  { label: 'sliding-log', algorithm: 'sliding-log' },
  { label: 'token-bucket', algorithm: 'token-bucket' },
  { label: 'leaky-bucket (police)', algorithm: 'leaky-bucket', mode: 'police' },
  { label: 'gcra', algorithm: 'gcra' },
  { label: 'leaky-bucket (shape)', algorithm: 'leaky-bucket', mode: 'shape' },
];

/**
 * @typedef {object} Run
 * @property {Contestant} contestant
 * @property {number[]} arrivals  arrival times of the admitted requests
 * @property {number[]} served    when they are served: arrival + delayMs (equal to arrivals unless shaping)
 * @property {number[]} delays    delayMs of each admitted request
 * @property {number} denied
 * @property {number} maxInWindow most requests served in any interval (t - windowMs, t]
 */

/**
 * @param {number[]} arrivals request times in ms from the start, ascending
 * @param {Contestant} contestant
 * @param {{ limit: number, windowMs: number }} rule
 * @returns {Promise<Run>}
 */
export async function simulate(arrivals, contestant, { limit, windowMs }) {
  let clock = EPOCH;
  const store = new MemoryStore();
  const limiter = createLimiter({
    algorithm: contestant.algorithm,
    ...(contestant.mode === undefined ? {} : { mode: contestant.mode }),
    ...(contestant.segments === undefined ? {} : { segments: contestant.segments }),
    limit,
    windowMs,
    store,
    now: () => clock,
  });
  /** @type {number[]} */ const admitted = [];
  /** @type {number[]} */ const served = [];
  /** @type {number[]} */ const delays = [];
  let denied = 0;
  try {
    for (const t of arrivals) {
      clock = EPOCH + t;
      const decision = await limiter.consume('client');
      if (decision.allowed) {
        admitted.push(t);
        served.push(t + decision.delayMs);
        delays.push(decision.delayMs);
      } else {
        denied++;
      }
    }
  } finally {
    store.close();
  }
  served.sort((a, b) => a - b);
  return { contestant, arrivals: admitted, served, delays, denied, maxInWindow: maxInWindow(served, windowMs) };
}

/**
 * The most events in any interval (t - windowMs, t]: the number a "limit per
 * window" promise is about, measured on a truly sliding window.
 *
 * @param {number[]} times ascending
 * @param {number} windowMs
 */
export function maxInWindow(times, windowMs) {
  let max = 0;
  let first = 0;
  for (let last = 0; last < times.length; last++) {
    while ((times[first] ?? 0) <= (times[last] ?? 0) - windowMs) first++;
    max = Math.max(max, last - first + 1);
  }
  return max;
}

/**
 * Counts per time bucket: [0, bucketMs), [bucketMs, 2 bucketMs), ...
 *
 * @param {number[]} times
 * @param {number} bucketMs
 * @param {number} buckets
 */
export function perBucket(times, bucketMs, buckets) {
  const counts = new Array(buckets).fill(0);
  for (const t of times) {
    const i = Math.floor(t / bucketMs);
    if (i < buckets) counts[i]++;
  }
  return counts;
}
