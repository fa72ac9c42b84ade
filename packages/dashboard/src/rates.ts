import type { Limiter } from '@floodgate/core';

/** Decisions of one rule: admitted and denied calls. */
export interface RuleCounts {
  rule: string;
  allowed: number;
  limited: number;
}

export interface Rates {
  /** The last whole second's decisions by rule, and every decision counted since `sinceMs`. */
  read(): { perSecond: RuleCounts[]; total: RuleCounts[]; sinceMs: number };
  stop(): void;
}

/** Past this many rule names (plans built per call can name many), decisions count under '(other)'. */
const MAX_RULES = 1_000;

/**
 * Counts the limiter's decisions by rule from its 'allowed' and 'limited'
 * events, in this process: per second of the wall clock and in total. A
 * second's counts are read once it has ended, so a page polling every second
 * shows whole seconds.
 */
export function countDecisions(limiter: Limiter, now: () => number = Date.now): Rates {
  const sinceMs = now();
  const total = new Map<string, RuleCounts>();
  let second = Math.floor(sinceMs / 1000);
  let current = new Map<string, RuleCounts>();
  let previous = new Map<string, RuleCounts>();

  const turn = (at: number): void => {
    const s = Math.floor(at / 1000);
    if (s === second) return;
    previous = s === second + 1 ? current : new Map();
    current = new Map();
    second = s;
  };
  const entry = (map: Map<string, RuleCounts>, rule: string): RuleCounts => {
    const name = map.has(rule) || map.size < MAX_RULES ? rule : '(other)';
    let counts = map.get(name);
    if (counts === undefined) {
      counts = { rule: name, allowed: 0, limited: 0 };
      map.set(name, counts);
    }
    return counts;
  };
  const count = (outcome: 'allowed' | 'limited') => (event: { rule: string }) => {
    turn(now());
    entry(current, event.rule)[outcome]++;
    entry(total, event.rule)[outcome]++;
  };
  const stops = [limiter.on('allowed', count('allowed')), limiter.on('limited', count('limited'))];
  const copy = (map: Map<string, RuleCounts>) => [...map.values()].map((c) => ({ ...c }));

  return {
    read() {
      turn(now());
      return { perSecond: copy(previous), total: copy(total), sinceMs };
    },
    stop() {
      for (const stop of stops) stop();
    },
  };
}
