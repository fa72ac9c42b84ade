import type { AlgorithmDefinition, RuleNumbers, StateCodec, Verdict } from '../types.js';
import { countedUnits } from '../view-helpers.js';

/**
 * The admitted calls of one key under a sliding-log rule, oldest first:
 * `times[i]` (ms) and `counts[i]` (units admitted at that ms). Entries before
 * `head` are dropped; `total` sums the counts from `head` on.
 */
export interface LogState {
  times: number[];
  counts: number[];
  head: number;
  total: number;
}

export function createLog(): LogState {
  return { times: [], counts: [], head: 0, total: 0 };
}

/** Index of the first entry still inside the window (now - windowMs, now]. */
function firstInside(log: LogState, from: number): number {
  let lo = log.head;
  let hi = log.times.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((log.times[mid] as number) > from) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** The later of `now` and the newest entry: a clock that went back does not reopen the window. */
function effectiveNow(log: LogState | null, now: number): number {
  if (log === null || log.times.length === log.head) return now;
  const newest = log.times[log.times.length - 1] as number;
  return Math.max(newest, now);
}

/** Drops the entries that left the window. */
function prune(log: LogState, first: number): void {
  for (let i = log.head; i < first; i++) log.total -= log.counts[i] as number;
  log.head = first;
  if (log.head > 32 && log.head * 2 > log.times.length) {
    log.times.splice(0, log.head);
    log.counts.splice(0, log.head);
    log.head = 0;
  }
}

/**
 * Sliding log: exact. A call is admitted when the units admitted in
 * (now - windowMs, now] plus its cost stay within `limit`. State grows with
 * the number of admitted calls in a window (O(limit) per key).
 */
export const slidingLog = {
  /** Decides a call without changing `log`. */
  decide(rule: RuleNumbers, log: LogState | null, now: number, cost: number, out: Verdict): void {
    const at = effectiveNow(log, now);
    let used = 0;
    let first = 0;
    if (log !== null) {
      first = firstInside(log, at - rule.windowMs);
      used = log.total;
      for (let i = log.head; i < first; i++) used -= log.counts[i] as number;
    }
    const limit = rule.limit;
    const after = used + cost;
    out.remainingNow = used < limit ? limit - used : 0;
    out.resetMsNow = used > 0 ? ((log as LogState).times[(log as LogState).times.length - 1] as number) + rule.windowMs - at : 0;
    out.delayMs = 0;
    if (after <= limit) {
      out.allowed = true;
      out.retryAfterMs = 0;
      out.remaining = limit - after;
      out.resetMs = rule.windowMs;
      out.ttlMs = rule.windowMs + (at - now); // kept from now, and `at` is later than now when the clock went back
      return;
    }
    out.allowed = false;
    out.remaining = out.remainingNow;
    out.resetMs = out.resetMsNow;
    out.ttlMs = 0;
    if (cost > limit) {
      out.retryAfterMs = Number.POSITIVE_INFINITY;
      return;
    }
    // The call fits once the oldest `after - limit` units have left the window.
    const l = log as LogState;
    let excess = after - limit;
    let i = first;
    while (excess > (l.counts[i] as number)) excess -= l.counts[i++] as number;
    out.retryAfterMs = (l.times[i] as number) + rule.windowMs - at;
  },

  /** Records an admitted call; returns the log to keep (a new one when `log` is null). */
  commit(rule: RuleNumbers, log: LogState | null, now: number, cost: number): LogState {
    const target = log ?? createLog();
    const at = effectiveNow(target, now);
    prune(target, firstInside(target, at - rule.windowMs));
    const last = target.times.length - 1;
    if (last >= target.head && target.times[last] === at) target.counts[last] = (target.counts[last] as number) + cost;
    else {
      target.times.push(at);
      target.counts.push(cost);
    }
    target.total += cost;
    return target;
  },

  /** Gives `cost` units back, newest first. Returns ms the log must be kept, 0 when it is empty. */
  refund(rule: RuleNumbers, log: LogState, now: number, cost: number): number {
    const at = effectiveNow(log, now);
    prune(log, firstInside(log, at - rule.windowMs));
    let left = cost;
    while (left > 0 && log.times.length > log.head) {
      const last = log.times.length - 1;
      const take = Math.min(left, log.counts[last] as number);
      left -= take;
      log.total -= take;
      if (take === log.counts[last]) {
        log.times.pop();
        log.counts.pop();
      } else log.counts[last] = (log.counts[last] as number) - take;
    }
    if (log.times.length === log.head) return 0;
    return (log.times[log.times.length - 1] as number) + rule.windowMs - now;
  },
};

const integer = (text: string | undefined): number => (text !== undefined && /^(?:0|[1-9]\d{0,15})$/.test(text) ? Number(text) : Number.NaN);

/** Text: `<ms>/<units>` per admitted ms, oldest first. */
const codec: StateCodec<LogState> = {
  tag: 'sl',
  encode(log) {
    const parts: string[] = [];
    for (let i = log.head; i < log.times.length; i++) parts.push(`${log.times[i]}/${log.counts[i]}`);
    return parts.join(',');
  },
  decode(_rule, text) {
    const log = createLog();
    for (const part of text.split(',')) {
      const [at, units, extra] = part.split('/');
      const time = integer(at);
      const count = integer(units);
      if (extra !== undefined || !Number.isSafeInteger(time) || !Number.isSafeInteger(count) || count === 0) return undefined;
      if (log.times.length > 0 && time <= (log.times[log.times.length - 1] as number)) return undefined;
      log.times.push(time);
      log.counts.push(count);
      log.total += count;
    }
    return Number.isSafeInteger(log.total) ? log : undefined;
  },
};

/**
 * Sliding log in the rest of Floodgate. Redis (sliding-log.lua): a sorted set,
 * one member per admitted call; the library's view is the units in the
 * window, ms until they have all left it, and ms until the call would fit.
 */
export const definition: AlgorithmDefinition = {
  takes: [],
  blocks: true,
  unit: 'requests',
  state: { kind: 'log' },
  codec,
  view: (rule) => ({
    spec: `sl:${rule.limit}:${rule.windowMs}`,
    size: 3, // units in the window, ms until they have left it, ms until the call fits
    fast: false,
    verdict: (reply, at, cost, out) => {
      countedUnits(rule, reply[at] as number, reply[at + 1] as number, reply[at + 2] as number, rule.windowMs, cost, out);
    },
  }),
};
