import type { RuleNumbers, Verdict } from './types.js';

/**
 * A verdict from units in use out of `limit`, for the algorithms that count
 * units (sliding-log, concurrency) as the Redis library reports them: units
 * used, ms until they are all free (`resetNow`), ms until the call fits
 * (`retryMs`), and the reset an admitted call has.
 */
export function countedUnits(rule: RuleNumbers, used: number, resetNow: number, retryMs: number, admittedResetMs: number, cost: number, out: Verdict): void {
  const after = used + cost;
  out.remainingNow = used < rule.limit ? rule.limit - used : 0;
  out.resetMsNow = resetNow;
  out.delayMs = 0;
  out.ttlMs = 0;
  if (after <= rule.limit) {
    out.allowed = true;
    out.retryAfterMs = 0;
    out.remaining = rule.limit - after;
    out.resetMs = admittedResetMs;
    return;
  }
  out.allowed = false;
  out.retryAfterMs = cost > rule.limit ? Number.POSITIVE_INFINITY : retryMs;
  out.remaining = out.remainingNow;
  out.resetMs = resetNow;
}
