/*
 * Reference models: each algorithm written straight from its definition over
 * the full list of admitted calls, with exact arithmetic (BigInt) and brute
 * force where the definition gives no formula. Slow and obviously right; the
 * property tests check the real algorithms against them.
 */
import type { CompiledRule } from '../rules.js';

export interface ModelDecision {
  allowed: boolean;
  retryAfterMs: number;
  remaining: number;
  resetMs: number;
  delayMs: number;
}

export interface Model {
  consume(now: number, cost: number): ModelDecision;
  /** Units available now and ms until full capacity. */
  peek(now: number): { remaining: number; resetMs: number };
}

interface Call {
  at: number;
  cost: number;
}

/** Smallest d in [from, to] with predicate(d), or -1. */
function search(from: number, to: number, predicate: (d: number) => boolean): number {
  for (let d = from; d <= to; d++) if (predicate(d)) return d;
  return -1;
}

/** A model that only needs "units in use at time t": fixed window, sliding log, sliding window. */
function countingModel(rule: CompiledRule, usedTimesG: (calls: Call[], now: number) => number, horizon: number): Model {
  const calls: Call[] = [];
  const G = rule.algorithm === 'sliding-window' ? rule.segmentMs : 1;
  const room = rule.limit * G;
  const remainingAt = (now: number) => Math.max(0, Math.floor((room - usedTimesG(calls, now)) / G));
  const resetAt = (now: number) => {
    const d = search(0, horizon, (x) => usedTimesG(calls, now + x) === 0);
    if (d < 0) throw new Error('model: no reset within the horizon');
    return d;
  };
  return {
    consume(now, cost) {
      const allowed = usedTimesG(calls, now) + cost * G <= room;
      if (allowed) calls.push({ at: now, cost });
      let retryAfterMs = 0;
      if (!allowed) {
        retryAfterMs = cost > rule.limit ? Number.POSITIVE_INFINITY : search(1, horizon, (d) => usedTimesG(calls, now + d) + cost * G <= room);
        if (retryAfterMs < 0) throw new Error('model: no retry within the horizon');
      }
      return { allowed, retryAfterMs, remaining: remainingAt(now), resetMs: resetAt(now), delayMs: 0 };
    },
    peek: (now) => ({ remaining: remainingAt(now), resetMs: resetAt(now) }),
  };
}

export function fixedWindowModel(rule: CompiledRule): Model {
  const W = rule.windowMs;
  return countingModel(rule, (calls, now) => calls.filter((c) => Math.floor(c.at / W) === Math.floor(now / W)).reduce((sum, c) => sum + c.cost, 0), W);
}

export function slidingLogModel(rule: CompiledRule): Model {
  const W = rule.windowMs;
  return countingModel(rule, (calls, now) => calls.filter((c) => c.at > now - W && c.at <= now).reduce((sum, c) => sum + c.cost, 0), W);
}

/** estimate · G = oldest · (G - phase) + G · (newer segments), counted from the calls. */
export function slidingWindowModel(rule: CompiledRule): Model {
  const G = rule.segmentMs;
  const S = rule.segments;
  const countIn = (calls: Call[], segment: number) => calls.filter((c) => Math.floor(c.at / G) === segment).reduce((sum, c) => sum + c.cost, 0);
  return countingModel(
    rule,
    (calls, now) => {
      const k = Math.floor(now / G);
      const phase = now - k * G;
      let newer = 0;
      for (let j = k - S + 1; j <= k; j++) newer += countIn(calls, j);
      return countIn(calls, k - S) * (G - phase) + newer * G;
    },
    rule.windowMs + 2 * G,
  );
}

const big = BigInt;
const ceilDiv = (a: bigint, b: bigint) => (a <= 0n ? -(-a / b) : (a + b - 1n) / b);
const floorDiv = (a: bigint, b: bigint) => (a >= 0n ? a / b : -((-a + b - 1n) / b));

/**
 * GCRA with exact rationals: times are kept multiplied by `limit`, so the
 * emission interval windowMs/limit becomes windowMs. token-bucket and
 * leaky-bucket must decide exactly like this too.
 */
export function bucketModel(rule: CompiledRule): Model {
  const L = big(rule.limit);
  const W = big(rule.windowMs);
  const B = big(rule.burst);
  let tat: bigint | null = null; // theoretical arrival time · L
  const levelAt = (now: bigint) => (tat === null || tat < now * L ? 0n : tat - now * L); // debt · L (ms·L)
  const view = (now: number) => {
    const level = levelAt(big(now));
    const remaining = floorDiv(B * W - level, W);
    return { remaining: Number(remaining < 0n ? 0n : remaining), resetMs: Number(ceilDiv(level, L)) };
  };
  return {
    consume(now, cost) {
      const n = big(now);
      const level = levelAt(n);
      const after = level + big(cost) * W;
      const allowed = after <= B * W;
      let retryAfterMs = 0;
      let delayMs = 0;
      if (allowed) {
        delayMs = rule.mode === 'shape' ? Number(ceilDiv(level, L)) : 0;
        tat = n * L + after;
      } else {
        retryAfterMs = big(cost) > B ? Number.POSITIVE_INFINITY : Number(ceilDiv(after - B * W, L));
      }
      return { allowed, retryAfterMs, delayMs, ...view(now) };
    },
    peek: view,
  };
}

export function modelFor(rule: CompiledRule): Model {
  switch (rule.algorithm) {
    case 'fixed-window':
      return fixedWindowModel(rule);
    case 'sliding-log':
    // Without releases a lease lives exactly windowMs from its admission: the units alive are those of a sliding log.
    case 'concurrency':
      return slidingLogModel(rule);
    case 'sliding-window':
      return slidingWindowModel(rule);
    default:
      return bucketModel(rule);
  }
}
