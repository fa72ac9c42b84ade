import type { CompiledRule } from '../rules.js';
import { decideLevel, drain, refundLevel } from './meter.js';
import { ceilDiv, floorDiv, type StateVector, type VectorAlgorithm } from './types.js';

/** Stored tokens in the rule's current units (rounded down: a rule change hands out no free tokens), at most a full bucket. */
function storedTokens(rule: CompiledRule, state: StateVector, base: number, room: number): number {
  const storedUnit = state[base + 2] as number;
  let tokens = state[base] as number;
  if (storedUnit !== rule.unitsPerToken) tokens = floorDiv(tokens * rule.unitsPerToken, storedUnit);
  return Math.min(tokens, room);
}

/**
 * Token bucket: a bucket of `burst` tokens (default `limit`) that starts full
 * and refills `limit` tokens per `windowMs`; a call takes `cost` tokens or is
 * denied. Decides exactly like leaky-bucket (police) and gcra with the same
 * numbers; the state differs.
 *
 * State: [tokens, updatedAt, unitsPerToken] — tokens in internal units
 * (see meter.ts), the time they were counted, and the unit size they were
 * counted in.
 */
export const tokenBucket: VectorAlgorithm = {
  name: 'token-bucket',
  stateSize: () => 3,

  decide(rule, state, base, now, cost, out, next) {
    const room = rule.burst * rule.unitsPerToken;
    let level = 0;
    let at = now;
    if (state !== null) {
      const stored = state[base + 1] as number;
      if (stored > at) at = stored; // the clock went back: count from the later time
      level = drain(room - storedTokens(rule, state, base, room), at - stored, rule.unitsPerMs);
    }
    const after = decideLevel(rule, level, cost, out);
    if (out.allowed) {
      next[0] = room - after;
      next[1] = at;
      next[2] = rule.unitsPerToken;
    }
  },

  refund(rule, state, base, now, cost, next) {
    const room = rule.burst * rule.unitsPerToken;
    const stored = state[base + 1] as number;
    const at = Math.max(stored, now);
    const level = refundLevel(rule, drain(room - storedTokens(rule, state, base, room), at - stored, rule.unitsPerMs), cost);
    if (level === 0) return 0;
    next[0] = room - level;
    next[1] = at;
    next[2] = rule.unitsPerToken;
    return ceilDiv(level, rule.unitsPerMs);
  },
};
