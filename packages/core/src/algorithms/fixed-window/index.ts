import type { AlgorithmDefinition, RuleNumbers, VectorAlgorithm, Verdict } from '../types.js';
import { vectorCodec } from '../vector-codec.js';

/**
 * Decides a call of `cost` against the `count` already in a window that ends
 * in `msToEnd` ms; fills `out` and returns whether it is admitted. Shared by
 * the decide below and the Redis store, whose library answers with just
 * these two numbers.
 */
export function countInWindow(rule: RuleNumbers, count: number, msToEnd: number, cost: number, out: Verdict): boolean {
  const limit = rule.limit;
  const after = count + cost;
  out.remainingNow = count < limit ? limit - count : 0;
  out.resetMsNow = count > 0 ? msToEnd : 0;
  out.delayMs = 0;
  if (after <= limit) {
    out.allowed = true;
    out.retryAfterMs = 0;
    out.remaining = limit - after;
    out.resetMs = msToEnd;
    out.ttlMs = msToEnd;
    return true;
  }
  out.allowed = false;
  out.retryAfterMs = cost > limit ? Number.POSITIVE_INFINITY : msToEnd;
  out.remaining = out.remainingNow;
  out.resetMs = out.resetMsNow;
  out.ttlMs = 0;
  return false;
}

/**
 * Fixed window: time is cut into windows aligned to the epoch
 * (window = floor(now / windowMs)); a call is admitted while
 * count + cost <= limit within its window.
 *
 * State: [windowEnd, count]. A stored window counts until it ends, also when
 * it ends later than the current window would: after the clock went back
 * (time stands still for the key), or under a rule whose windowMs changed
 * (the count runs out with the window it was taken in). The Redis store keeps
 * the same state as the count and an expiry at windowEnd - 1.
 */
export const fixedWindow: VectorAlgorithm = {
  stateSize: () => 2,

  decide(rule, state, base, now, cost, out, next) {
    let end: number;
    let count = 0;
    if (state !== null && (state[base] as number) > now) {
      end = state[base] as number;
      count = state[base + 1] as number;
    } else {
      end = now - (now % rule.windowMs) + rule.windowMs; // a new window (a modulo of doubles costs: only here)
    }
    if (countInWindow(rule, count, end - now, cost, out)) {
      next[0] = end;
      next[1] = count + cost;
    }
  },

  refund(_rule, state, base, now, cost, next) {
    const end = state[base] as number;
    if (end <= now) return 0; // that window is over: nothing to give back
    const count = Math.max(0, (state[base + 1] as number) - cost);
    if (count === 0) return 0;
    next[0] = end;
    next[1] = count;
    return end - now;
  },
};

/**
 * Fixed window in the rest of Floodgate. Text: `<windowEnd>,<count>`. Redis
 * (fixed-window.lua, fast.lua): the count, expiring with its window; the
 * library's view is the count and ms to the window's end.
 */
export const definition: AlgorithmDefinition = {
  takes: [],
  blocks: true,
  unit: 'requests',
  state: { kind: 'vector', algorithm: fixedWindow },
  codec: vectorCodec('fw', fixedWindow),
  view: (rule) => ({
    spec: `fw:${rule.limit}:${rule.windowMs}`,
    size: 2, // count, ms to the window's end
    fast: true,
    verdict: (reply, at, cost, out) => {
      countInWindow(rule, reply[at] as number, reply[at + 1] as number, cost, out);
    },
  }),
};
