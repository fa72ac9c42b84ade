import type { AlgorithmDefinition, RuleNumbers, StateCodec, Verdict } from '../types.js';
import { countedUnits } from '../view-helpers.js';

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
  decide(rule: RuleNumbers, state: LeaseState | null, now: number, cost: number, out: Verdict): void {
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
  commit(rule: RuleNumbers, state: LeaseState | null, now: number, cost: number, leaseId: string): LeaseState {
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

const integer = (text: string | undefined): number => (text !== undefined && /^(?:0|[1-9]\d{0,15})$/.test(text) ? Number(text) : Number.NaN);
const LEASE_ID = /^[A-Za-z0-9._~-]{1,128}$/;

/** Text: `<lease id>/<units>/<expires>` per lease. */
const codec: StateCodec<LeaseState> = {
  tag: 'cc',
  encode: (leases) => leases.ids.map((id, i) => `${id}/${leases.costs[i]}/${leases.expires[i]}`).join(','),
  decode(_rule, text) {
    const leases: LeaseState = { ids: [], costs: [], expires: [] };
    for (const part of text.split(',')) {
      const [id, units, until, extra] = part.split('/');
      const cost = integer(units);
      const expires = integer(until);
      if (extra !== undefined || id === undefined || !LEASE_ID.test(id) || !Number.isSafeInteger(cost) || cost === 0 || !Number.isSafeInteger(expires)) {
        return undefined;
      }
      leases.ids.push(id);
      leases.costs.push(cost);
      leases.expires.push(expires);
    }
    return leases;
  },
};

/**
 * Concurrency in the rest of Floodgate. Redis (concurrency.lua): a sorted set,
 * one member per lease; the library's view is the units in use, ms until the
 * last lease ends, and ms until the call would fit if no lease were released.
 * Its rules take no blockMs (a denial ends when a request does: no breach),
 * and its quota is requests in flight, with no window.
 */
export const definition: AlgorithmDefinition = {
  takes: [],
  blocks: false,
  unit: 'concurrent-requests',
  state: { kind: 'leases' },
  codec,
  view: (rule) => ({
    spec: `cc:${rule.limit}:${rule.windowMs}`,
    size: 3, // units in use, ms until the last lease ends, ms until the call fits
    fast: false,
    verdict: (reply, at, cost, out) => {
      const resetNow = reply[at + 1] as number;
      countedUnits(rule, reply[at] as number, resetNow, reply[at + 2] as number, Math.max(resetNow, rule.windowMs), cost, out);
    },
  }),
};
