import type { CompiledRule } from '../rules.js';
import type { Verdict } from './types.js';

/**
 * The leases a key holds under a concurrency rule: `ids[i]` holds `costs[i]`
 * units until `expires[i]` (ms), unless released before.
 */
export interface LeaseState {
  ids: string[];
  costs: number[];
  expires: number[];
}

/**
 * A lease id carries the units it holds, so that a release knows what to give
 * back without a lookup: `${cost}.${random}`.
 */
export function leaseCost(leaseId: string): number {
  const cost = Number(leaseId.slice(0, leaseId.indexOf('.')));
  return Number.isSafeInteger(cost) && cost > 0 ? cost : 0;
}

/** The leases still alive at `now`, oldest expiry first. */
function alive(state: LeaseState | null, now: number): { cost: number; expires: number }[] {
  if (state === null) return [];
  const leases: { cost: number; expires: number }[] = [];
  for (let i = 0; i < state.ids.length; i++)
    if ((state.expires[i] as number) > now) leases.push({ cost: state.costs[i] as number, expires: state.expires[i] as number });
  return leases.sort((a, b) => a.expires - b.expires);
}

/**
 * Concurrency: at most `limit` units in flight per key. A call takes a lease
 * of `cost` units that lives until it is released (adapters release it when
 * the response ends) or for `windowMs`, so that the leases of a crashed
 * process free themselves. `retryAfterMs` is exact for "nothing else
 * happens": when enough leases expire; a release usually comes sooner.
 */
export const concurrency = {
  name: 'concurrency' as const,

  decide(rule: CompiledRule, state: LeaseState | null, now: number, cost: number, out: Verdict): void {
    const leases = alive(state, now);
    let used = 0;
    for (const lease of leases) used += lease.cost;
    const limit = rule.limit;
    const after = used + cost;
    const latest = leases.length > 0 ? (leases[leases.length - 1] as { expires: number }).expires : now;
    out.remainingNow = used < limit ? limit - used : 0;
    out.resetMsNow = latest - now;
    out.delayMs = 0;
    if (after <= limit) {
      out.allowed = true;
      out.retryAfterMs = 0;
      out.remaining = limit - after;
      out.resetMs = Math.max(out.resetMsNow, rule.windowMs);
      out.ttlMs = out.resetMs;
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
    // The call fits once the leases holding the first `after - limit` units have expired.
    let excess = after - limit;
    let i = 0;
    while (excess > (leases[i] as { cost: number }).cost) excess -= (leases[i++] as { cost: number }).cost;
    out.retryAfterMs = (leases[i] as { expires: number }).expires - now;
  },

  /** Records the lease of an admitted call, dropping expired ones; returns the state to keep. */
  commit(rule: CompiledRule, state: LeaseState | null, now: number, cost: number, leaseId: string): LeaseState {
    const next: LeaseState = { ids: [], costs: [], expires: [] };
    if (state !== null) {
      for (let i = 0; i < state.ids.length; i++) {
        if ((state.expires[i] as number) <= now) continue;
        next.ids.push(state.ids[i] as string);
        next.costs.push(state.costs[i] as number);
        next.expires.push(state.expires[i] as number);
      }
    }
    next.ids.push(leaseId);
    next.costs.push(cost);
    next.expires.push(now + rule.windowMs);
    return next;
  },

  /** Ends a lease early. Returns ms the remaining leases must be kept, 0 when none is left. */
  release(state: LeaseState, leaseId: string, now: number): number {
    const at = state.ids.indexOf(leaseId);
    if (at >= 0) {
      state.ids.splice(at, 1);
      state.costs.splice(at, 1);
      state.expires.splice(at, 1);
    }
    let latest = 0;
    for (let i = 0; i < state.ids.length; i++) if ((state.expires[i] as number) > latest) latest = state.expires[i] as number;
    return latest > now ? latest - now : 0;
  },
};
