import type { Decision } from './decision.js';
import type { BlockedInfo } from './stores/types.js';

interface Denial {
  /** Limiter time at which the denied call was decided. */
  at: number;
  /** Limiter time from which that call would pass. */
  until: number;
  /** Limiter time from which the store must decide again (at `until` at the latest). */
  expires: number;
  cost: number;
  decision: Decision;
}

/**
 * Denials remembered in the process (`localDenyCache: true`): once a key is
 * denied a call of cost c until time T, the same call is denied here until T
 * without asking the store. It never denies a call the store would admit:
 * without refunds, resets or rule changes a key's state only fills up or
 * drains, a block only runs out (a refund leaves it; calls during it do not
 * extend it), and `retryAfterMs` is exact, so the store would deny it too,
 * with the same wait. Nor does it hide a breach: a rule whose own numbers
 * deny for longer than its block would start a new block with the first call
 * after it (blockMs), so the store decides again once that block ends. The limiter forgets a key when it admits a call for it or
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
    if (now >= denial.expires || now < denial.at) {
      this.denials.delete(key);
      return undefined;
    }
    if (cost !== denial.cost) return undefined;
    const elapsed = now - denial.at;
    const shorten = (ms: number) => (ms > elapsed ? ms - elapsed : 0);
    // A block is what is left of it, and this call did not start it.
    const block = (b: BlockedInfo | undefined) => (b === undefined ? {} : { blocked: { ...b, leftMs: shorten(b.leftMs), started: false } });
    const d = denial.decision;
    return {
      ...d,
      retryAfterMs: denial.until - now,
      resetMs: shorten(d.resetMs),
      ...block(d.blocked),
      rules: d.rules.map((r) => ({ ...r, retryAfterMs: shorten(r.retryAfterMs), resetMs: shorten(r.resetMs), ...block(r.blocked) })),
    };
  }

  /**
   * Remembers a denial that says when the call would pass. Another denial
   * replaces what the key had: it may have started a block (of another cost).
   */
  remember(key: string, cost: number, decision: Decision, now: number): void {
    if (decision.allowed || decision.storeError !== undefined || !Number.isFinite(decision.retryAfterMs) || decision.retryAfterMs <= 0) {
      this.denials.delete(key);
      return;
    }
    if (this.denials.size >= this.maxKeys && !this.denials.has(key)) {
      const oldest = this.denials.keys().next().value as string;
      this.denials.delete(oldest);
    }
    let expires = now + decision.retryAfterMs;
    for (const r of decision.rules) {
      if (r.blocked !== undefined && r.retryAfterMs > r.blocked.leftMs) expires = Math.min(expires, now + r.blocked.leftMs);
    }
    this.denials.delete(key);
    this.denials.set(key, { at: now, until: now + decision.retryAfterMs, expires, cost, decision });
  }

  forget(key: string): void {
    this.denials.delete(key);
  }

  clear(): void {
    this.denials.clear();
  }
}
