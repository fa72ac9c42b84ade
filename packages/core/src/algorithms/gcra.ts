import type { CompiledRule } from '../rules.js';
import { decideLevel, refundLevel } from './meter.js';
import { ceilDiv, floorDiv, type StateVector, type VectorAlgorithm } from './types.js';

/*
 * The theoretical arrival time (TAT) is a rational number of ms:
 * tatMs + fraction / unitsPerMs, because one emission interval
 * (windowMs / limit) need not be a whole number of ms. Stored as
 * [tatMs, fraction, unitsPerMs]; the Redis store writes a bare integer when
 * the fraction is 0, which it is whenever limit divides windowMs.
 */

/** The level (in internal units) a stored TAT stands for at `now`. */
function levelAt(rule: CompiledRule, state: StateVector, base: number, now: number): number {
  const tatMs = state[base] as number;
  let fraction = state[base + 1] as number;
  const storedPerMs = state[base + 2] as number;
  if (storedPerMs !== rule.unitsPerMs && fraction > 0) {
    fraction = ceilDiv(fraction * rule.unitsPerMs, storedPerMs); // may reach unitsPerMs: that is one whole ms, still exact
  }
  if (tatMs < now || (tatMs === now && fraction === 0)) return 0;
  return (tatMs - now) * rule.unitsPerMs + fraction;
}

/** Writes the TAT that leaves `level` units at `now`. */
function writeTat(rule: CompiledRule, level: number, now: number, next: StateVector): void {
  const whole = floorDiv(level, rule.unitsPerMs);
  next[0] = now + whole;
  next[1] = level - whole * rule.unitsPerMs;
  next[2] = rule.unitsPerMs;
}

/**
 * GCRA (generic cell rate algorithm), as in redis-cell and go-redis/redis_rate:
 * one emission interval T = windowMs / limit per unit, burst tolerance
 * `burst` (default `limit`) units. A call of cost c is admitted when
 * max(TAT, now) + c·T - burst·T <= now. Decides exactly like token-bucket
 * and leaky-bucket (police) with the same numbers.
 *
 * State: one theoretical arrival time, [tatMs, fraction, unitsPerMs].
 */
export const gcra: VectorAlgorithm = {
  name: 'gcra',
  stateSize: () => 3,

  decide(rule, state, base, now, cost, out, next) {
    const level = state === null ? 0 : levelAt(rule, state, base, now);
    const after = decideLevel(rule, level, cost, out);
    if (out.allowed) writeTat(rule, after, now, next);
  },

  refund(rule, state, base, now, cost, next) {
    const level = refundLevel(rule, levelAt(rule, state, base, now), cost);
    if (level === 0) return 0;
    writeTat(rule, level, now, next);
    return ceilDiv(level, rule.unitsPerMs);
  },
};
