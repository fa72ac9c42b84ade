import type { Decision } from './decision.js';

interface Denial {
  /** Limiter time at which the denied call was decided. */
  at: number;
  /** Limiter time from which that call would pass. */
  until: number;
  cost: number;
  decision: Decision;
}

/**
 * Denials remembered in the process (`localDenyCache: true`): once a key is
 * denied a call of cost c until time T, the same call is denied here until T
 * without asking the store. It never denies a call the store would admit:
 * without refunds, resets or rule changes a key's state only fills up or
 * drains, and `retryAfterMs` is exact, so the store would deny it too, with
 * the same wait. The limiter forgets a key when it admits a call for it or
 * refunds or resets it, and everything on updateRules. (A refund or reset
 * made by another process is not seen here: it takes effect for this process
 * at T at the latest.)
 */
export class DenyCache {
  private readonly denials = new Map<string, Denial>();

  constructor(private readonly maxKeys: number) {}

  /** The remembered denial for this call, with its waits shortened by the time since; undefined when the store must decide. */
  lookup(key: string, cost: number, now: number): Decision | undefined {
    const denial = this.denials.get(key);
    if (denial === undefined) return undefined;
    if (now >= denial.until || now < denial.at) {
      this.denials.delete(key);
      return undefined;
    }
    if (cost !== denial.cost) return undefined;
    const elapsed = now - denial.at;
    const shorten = (ms: number) => (ms > elapsed ? ms - elapsed : 0);
    const d = denial.decision;
    return {
      ...d,
      retryAfterMs: denial.until - now,
      resetMs: shorten(d.resetMs),
      rules: d.rules.map((r) => ({ ...r, retryAfterMs: shorten(r.retryAfterMs), resetMs: shorten(r.resetMs) })),
    };
  }

  /** Remembers a denial that says when the call would pass. */
  remember(key: string, cost: number, decision: Decision, now: number): void {
    if (decision.allowed || decision.storeError !== undefined || !Number.isFinite(decision.retryAfterMs) || decision.retryAfterMs <= 0) return;
    if (this.denials.size >= this.maxKeys && !this.denials.has(key)) {
      const oldest = this.denials.keys().next().value as string;
      this.denials.delete(oldest);
    }
    this.denials.delete(key);
    this.denials.set(key, { at: now, until: now + decision.retryAfterMs, cost, decision });
  }

  forget(key: string): void {
    this.denials.delete(key);
  }

  clear(): void {
    this.denials.clear();
  }
}
