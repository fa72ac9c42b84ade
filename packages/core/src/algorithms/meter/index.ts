import { type AlgorithmDefinition, ceilDiv, floorDiv, type RuleNumbers, type StateVector, type VectorAlgorithm, type Verdict } from '../types.js';
import { vectorCodec } from '../vector-codec.js';

/*
 * token-bucket, leaky-bucket and gcra are one meter: a level ("debt") of units
 * that drains at `unitsPerMs`, with room for `burst` tokens. They decide alike
 * on every trace (the contract's guarantee 5), and here they also keep the
 * same state, so that they stay alike when the clock goes back or a rule
 * changes. Internal units make every quantity an integer:
 *
 *   one token = rule.unitsPerToken units  (windowMs / gcd(windowMs, limit))
 *   drain     = rule.unitsPerMs units/ms  (limit    / gcd(windowMs, limit))
 *
 * so `limit` tokens drain in exactly `windowMs`, and integer arithmetic on
 * doubles stays exact (rules are bounded at compile time). A token bucket's
 * tokens are `burst - level`; a GCRA's theoretical arrival time is
 * `updatedAt + level / unitsPerMs`. The Redis library (meter.lua, fast.lua)
 * mirrors these functions.
 *
 * State: [level, updatedAt, unitsPerToken, unitsPerMs]: the level and the
 * time it was counted at, in the units of the rule that wrote it and draining
 * at that rule's rate. Read under another rule (a plan, a hot update), the
 * level drains at the rate it was written with up to now, and is then
 * re-expressed in the reader's units: the state ends when its writer said it
 * would (its key's expiry on Redis), whichever rule reads it.
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
 * At most a full bucket (burst * unitsPerToken), as a bucket never holds more:
 * a rule made much slower would otherwise carry over a debt of ages.
 */
export function rescaleLevel(rule: RuleNumbers, level: number, storedUnitsPerToken: number): number {
  const unit = rule.unitsPerToken;
  const rescaled = storedUnitsPerToken === unit ? level : ceilDiv(level * unit, storedUnitsPerToken);
  return Math.min(rescaled, rule.burst * unit);
}

/**
 * Decides a call against a level (already drained to `now`). Fills `out` and
 * returns the level after admitting (meaningful only when `out.allowed`).
 */
export function decideLevel(rule: RuleNumbers, level: number, cost: number, out: Verdict): number {
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

/**
 * The time a state counts from at `now`: the later of `now` and the time it
 * was written, so that a clock that went back stands still for the key
 * instead of handing out or taking away units.
 */
const countFrom = (state: StateVector, base: number, now: number): number => Math.max(state[base + 1] as number, now);

/** The level a state stands for at `at` (from countFrom), in `rule`'s units. */
function levelAt(rule: RuleNumbers, state: StateVector, base: number, at: number): number {
  const drained = drain(state[base] as number, at - (state[base + 1] as number), state[base + 3] as number);
  return rescaleLevel(rule, drained, state[base + 2] as number);
}

function write(rule: RuleNumbers, level: number, at: number, next: StateVector): void {
  next[0] = level;
  next[1] = at;
  next[2] = rule.unitsPerToken;
  next[3] = rule.unitsPerMs;
}

function meter(): VectorAlgorithm {
  return {
    stateSize: () => 4,

    decide(rule, state, base, now, cost, out, next) {
      const at = state === null ? now : countFrom(state, base, now);
      const after = decideLevel(rule, state === null ? 0 : levelAt(rule, state, base, at), cost, out);
      if (out.allowed) {
        write(rule, after, at, next);
        // Kept until the level has drained, counted from `at` (later than now when the clock went back).
        out.ttlMs += at - now;
      }
    },

    refund(rule, state, base, now, cost, next) {
      const at = countFrom(state, base, now);
      const after = Math.max(levelAt(rule, state, base, at) - cost * rule.unitsPerToken, 0);
      if (after === 0) return 0;
      write(rule, after, at, next);
      return at - now + ceilDiv(after, rule.unitsPerMs);
    },
  };
}

/**
 * Token bucket: a bucket of `burst` tokens (default `limit`) that starts full
 * and refills `limit` tokens per `windowMs`; a call takes `cost` tokens or is
 * denied.
 */
export const tokenBucket: VectorAlgorithm = meter();

/**
 * Leaky bucket: a meter of capacity `burst` (default `limit`) that drains
 * `limit` units per `windowMs`; a call adds `cost` units.
 *
 * - `mode: 'police'` (default) denies a call that would overflow.
 * - `mode: 'shape'` admits the same calls but returns `delayMs`: how long the
 *   call waits for the units queued ahead of it to drain, so that calls leave
 *   at a constant rate.
 */
export const leakyBucket: VectorAlgorithm = meter();

/**
 * GCRA (generic cell rate algorithm), as in redis-cell and go-redis/redis_rate:
 * one emission interval T = windowMs / limit per unit, burst tolerance
 * `burst` (default `limit`) units. A call of cost c is admitted when
 * max(TAT, now) + c·T - burst·T <= now.
 */
export const gcra: VectorAlgorithm = meter();

/** A unit comes back as the level drains: the next one when the level is one token below where it is. */
function nextUnitMs(rule: RuleNumbers, remaining: number, resetMs: number): number {
  if (remaining >= rule.burst) return resetMs;
  return Math.max(0, resetMs - ((rule.burst - remaining - 1) * rule.windowMs) / rule.limit);
}

/**
 * The meter in the rest of Floodgate, under three names. Text: its state's
 * numbers (`level,updatedAt,unitsPerToken,unitsPerMs`). Redis (meter.lua,
 * fast.lua): "level:unitsPerToken:unitsPerMs", expiring when the level has
 * drained; the library's view is the level now.
 */
function meterDefinition(algorithm: VectorAlgorithm, tag: string, takes: AlgorithmDefinition['takes']): AlgorithmDefinition {
  return {
    takes,
    blocks: true,
    unit: 'requests',
    state: { kind: 'vector', algorithm },
    // Units per token and per ms divide.
    codec: vectorCodec(tag, algorithm, (numbers) => numbers[2] !== 0 && numbers[3] !== 0),
    view: (rule) => ({
      spec: `m:${rule.burst}:${rule.unitsPerToken}:${rule.unitsPerMs}`,
      size: 1, // the level now
      fast: true,
      verdict: (reply, at, cost, out) => {
        decideLevel(rule, reply[at] as number, cost, out);
      },
    }),
    nextUnitMs,
    // A bucket holds up to two capacities of units while deciding.
    largest: (rule) => 2 * rule.burst * rule.unitsPerToken,
  };
}

export const tokenBucketDefinition = meterDefinition(tokenBucket, 'tb', ['burst']);
export const leakyBucketDefinition = meterDefinition(leakyBucket, 'lb', ['burst', 'mode']);
export const gcraDefinition = meterDefinition(gcra, 'gc', ['burst']);
