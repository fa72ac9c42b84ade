import type { Keys, RuleDecision } from '@floodgate/core';

/** The key a rule counted a call under: its scope's. */
const keyOf = (keys: Keys, scope: string): string => (scope === 'global' ? '' : typeof keys === 'string' ? keys : (keys[scope] ?? ''));

/**
 * The keys of one limiter that have used at least `ratio` of a rule's limit and are
 * not yet back to full capacity, counted per rule. Bounded: beyond `maxKeys` the
 * least recently seen key is dropped, so a flood of new keys cannot grow it.
 */
export class NearLimitKeys {
  /** key + rule -> the rule, and when the key is back to full capacity (limiter clock, ms). */
  private readonly keys = new Map<string, { rule: string; until: number }>();

  constructor(
    private readonly ratio: number,
    private readonly maxKeys: number,
    /**
     * The limiter's clock: `resetMs` is relative to the decision, so entries expire on the
     * clock that made it (and a test's injected clock moves them without sleeping).
     */
    private readonly now: () => number,
  ) {}

  /** Notes where a decision left each rule of the call's keys. */
  track(keys: Keys, rules: readonly RuleDecision[]): void {
    const now = this.now();
    for (const r of rules) {
      const id = `${r.name}\u0000${keyOf(keys, r.scope)}`;
      this.keys.delete(id); // re-inserted below: the Map stays ordered by last sight
      if (r.limit > 0 && r.limit - r.remaining >= this.ratio * r.limit && r.resetMs > 0) {
        if (this.keys.size >= this.maxKeys) this.keys.delete(this.keys.keys().next().value as string);
        this.keys.set(id, { rule: r.name, until: now + r.resetMs });
      }
    }
  }

  /** Keys near their limit now, per rule name (rules with none are absent); forgets the expired ones. */
  counts(): Map<string, number> {
    const now = this.now();
    const counts = new Map<string, number>();
    for (const [id, entry] of this.keys) {
      if (entry.until <= now) this.keys.delete(id);
      else counts.set(entry.rule, (counts.get(entry.rule) ?? 0) + 1);
    }
    return counts;
  }
}
