import type { CompiledRule } from '../rules.js';
import { ceilDiv, floorDiv, type Verdict } from './types.js';

/*
 * The arithmetic token-bucket, leaky-bucket and gcra share. All three are one
 * meter: a level ("debt") of units that drains at `unitsPerMs`, with room for
 * `burst` tokens. Internal units make every quantity an integer:
 *
 *   one token = rule.unitsPerToken units  (windowMs / gcd(windowMs, limit))
 *   drain     = rule.unitsPerMs units/ms  (limit    / gcd(windowMs, limit))
 *
 * so `limit` tokens drain in exactly `windowMs`, and integer arithmetic on
 * doubles stays exact (rules are bounded at compile time). The Redis scripts
 * mirror these functions line for line.
 */

/** The level after `elapsedMs` of draining, without overflowing on long idle times. */
export function drain(level: number, elapsedMs: number, unitsPerMs: number): number {
  if (elapsedMs <= 0 || level <= 0) return Math.max(level, 0);
  if (elapsedMs >= ceilDiv(level, unitsPerMs)) return 0;
  return level - elapsedMs * unitsPerMs;
}

/**
 * Re-expresses a level stored under another unit size (the rule's windowMs or
 * limit changed since). Rounds up: a rule change never hands out free units.
 * At most a full bucket (burst * unitsPerToken), as a token bucket never holds more
 * than a full bucket of tokens: a rule made much slower would otherwise carry
 * over a debt of ages, past what integer arithmetic keeps exact.
 */
export function rescaleLevel(rule: CompiledRule, level: number, storedUnitsPerToken: number): number {
  const unit = rule.unitsPerToken;
  const rescaled = storedUnitsPerToken === unit ? level : ceilDiv(level * unit, storedUnitsPerToken);
  return Math.min(rescaled, rule.burst * unit);
}

/**
 * Decides a call against a level (already drained to `now`). Fills `out` and
 * returns the level after admitting (meaningful only when `out.allowed`).
 */
export function decideLevel(rule: CompiledRule, level: number, cost: number, out: Verdict): number {
  const unit = rule.unitsPerToken;
  const perMs = rule.unitsPerMs;
  const room = rule.burst * unit;
  const after = level + cost * unit;
  out.remainingNow = level < room ? floorDiv(room - level, unit) : 0;
  out.resetMsNow = ceilDiv(level, perMs);
  if (after <= room) {
    out.allowed = true;
    out.retryAfterMs = 0;
    out.delayMs = rule.mode === 'shape' ? out.resetMsNow : 0;
    out.remaining = floorDiv(room - after, unit);
    out.resetMs = ceilDiv(after, perMs);
    out.ttlMs = out.resetMs;
  } else {
    out.allowed = false;
    out.retryAfterMs = cost > rule.burst ? Number.POSITIVE_INFINITY : ceilDiv(after - room, perMs);
    out.delayMs = 0;
    out.remaining = out.remainingNow;
    out.resetMs = out.resetMsNow;
    out.ttlMs = 0;
  }
  return after;
}

/** The level after giving `cost` tokens back, never below empty. */
export function refundLevel(rule: CompiledRule, level: number, cost: number): number {
  const after = level - cost * rule.unitsPerToken;
  return Math.max(after, 0);
}
