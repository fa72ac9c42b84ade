import { decideLevel, drain, refundLevel, rescaleLevel } from './meter.js';
import { ceilDiv, type VectorAlgorithm } from './types.js';

/**
 * Leaky bucket: a meter of capacity `burst` (default `limit`) that drains
 * `limit` units per `windowMs`. A call adds `cost` units.
 *
 * - `mode: 'police'` (default) denies a call that would overflow; it decides
 *   exactly like token-bucket and gcra with the same numbers.
 * - `mode: 'shape'` admits the same calls but returns `delayMs`: how long the
 *   call waits for the units queued ahead of it to drain, so that calls leave
 *   at a constant rate.
 *
 * State: [level, updatedAt, unitsPerToken] in internal units (see meter.ts).
 */
export const leakyBucket: VectorAlgorithm = {
  name: 'leaky-bucket',
  stateSize: () => 3,

  decide(rule, state, base, now, cost, out, next) {
    let level = 0;
    let at = now;
    if (state !== null) {
      const stored = state[base + 1] as number;
      if (stored > at) at = stored; // the clock went back: count from the later time
      level = drain(rescaleLevel(rule, state[base] as number, state[base + 2] as number), at - stored, rule.unitsPerMs);
    }
    const after = decideLevel(rule, level, cost, out);
    if (out.allowed) {
      next[0] = after;
      next[1] = at;
      next[2] = rule.unitsPerToken;
    }
  },

  refund(rule, state, base, now, cost, next) {
    const stored = state[base + 1] as number;
    const at = Math.max(stored, now);
    const level = refundLevel(rule, drain(rescaleLevel(rule, state[base] as number, state[base + 2] as number), at - stored, rule.unitsPerMs), cost);
    if (level === 0) return 0;
    next[0] = level;
    next[1] = at;
    next[2] = rule.unitsPerToken;
    return ceilDiv(level, rule.unitsPerMs);
  },
};
