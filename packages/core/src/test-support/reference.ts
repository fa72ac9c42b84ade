/*
 * The reference a store must agree with: each rule run by the pure step
 * functions (checked against brute-force models in algorithms.test.ts) and
 * composed all-or-nothing, as the contract says.
 */
import { type RuleState, refundStep, releaseStep, step, type Verdict } from '../algorithms/index.js';
import type { Decision } from '../decision.js';
import type { CompiledRule } from '../rules.js';
import type { RuleDecision } from '../stores/types.js';

/** Binding rule by the contract: when denied the denier with the largest retryAfterMs, else the smallest remaining; first on ties. */
export function bindingOf(rules: RuleDecision[]): RuleDecision {
  const denied = rules.filter((r) => !r.allowed);
  if (denied.length > 0) return denied.reduce((best, r) => (r.retryAfterMs > best.retryAfterMs ? r : best));
  return rules.reduce((best, r) => (r.remaining < best.remaining ? r : best));
}

/** The Decision the contract expects from per-rule decisions. */
export function expectedDecision(rules: RuleDecision[]): Decision {
  const binding = bindingOf(rules);
  const allowed = rules.every((r) => r.allowed);
  return {
    allowed,
    limit: binding.limit,
    remaining: binding.remaining,
    resetMs: binding.resetMs,
    retryAfterMs: allowed ? 0 : binding.retryAfterMs,
    delayMs: allowed ? Math.max(...rules.map((r) => r.delayMs)) : 0,
    rule: binding.name,
    rules,
  };
}

/** What a rule reports when the call left its state as it was. */
function nothingRecorded(rule: CompiledRule, v: Verdict, delayMs: number): RuleDecision {
  return {
    name: rule.name,
    scope: rule.scope,
    allowed: v.allowed,
    limit: rule.limit,
    remaining: v.remainingNow,
    resetMs: v.resetMsNow,
    retryAfterMs: v.retryAfterMs,
    delayMs,
  };
}

/** The key a rule counts under in a call: scope `key` takes a string, the others a field of an object; `global` none. */
type Keys = string | Readonly<Record<string, string>>;

function keyOf(rule: CompiledRule, keys: Keys): string {
  if (rule.scope === 'global') return '';
  const key = typeof keys === 'string' ? (rule.scope === 'key' ? keys : undefined) : keys[rule.scope];
  if (key === undefined) throw new Error(`reference: no key for scope ${rule.scope}`);
  return key;
}

/** What shapes a rule's state: state is kept per rule name, algorithm and size, so it carries over to other rules of that name. */
function shapeOf(rule: CompiledRule): string {
  const size = rule.algorithm === 'sliding-window' ? rule.segments : 0;
  return `${rule.name}\u0000${rule.algorithm}\u0000${size}`;
}

/**
 * The reference limiter over `rules`; `consume` and the others may name other
 * rules for one call (a plan): their state is shared by rule name, algorithm
 * and size, as the stores keep it.
 */
export function referenceLimiter(own: readonly CompiledRule[]) {
  /** State per rule shape, scope and key. */
  const states = new Map<string, RuleState>();
  const view = (rules: readonly CompiledRule[]) => {
    const id = (i: number, keys: Keys) => {
      const rule = rules[i] as CompiledRule;
      return `${shapeOf(rule)}\u0000${rule.scope}\u0000${keyOf(rule, keys)}`;
    };
    const get = (i: number, keys: Keys) => states.get(id(i, keys)) ?? null;
    const set = (i: number, keys: Keys, state: RuleState) => {
      if (state === null) states.delete(id(i, keys));
      else states.set(id(i, keys), state);
    };
    return {
      consume(keys: Keys, now: number, cost: number, leaseId?: string): RuleDecision[] {
        const results = rules.map((rule, i) => step(rule, get(i, keys), now, cost, leaseId));
        const admitted = results.every((r) => r.verdict.allowed);
        if (admitted)
          results.forEach((r, i) => {
            set(i, keys, r.state);
          });
        return results.map(({ verdict: v }, i) => {
          const rule = rules[i] as CompiledRule;
          if (admitted)
            return {
              name: rule.name,
              scope: rule.scope,
              allowed: true,
              limit: rule.limit,
              remaining: v.remaining,
              resetMs: v.resetMs,
              retryAfterMs: 0,
              delayMs: v.delayMs,
            };
          return nothingRecorded(rule, v, 0);
        });
      },
      peek(keys: Keys, now: number): RuleDecision[] {
        return rules.map((rule, i) => {
          const v = step(rule, get(i, keys), now, 1).verdict;
          return nothingRecorded(rule, v, v.allowed ? v.delayMs : 0);
        });
      },
      refund(keys: Keys, now: number, cost: number): void {
        rules.forEach((rule, i) => {
          set(i, keys, refundStep(rule, get(i, keys), now, cost));
        });
      },
      reset(keys: Keys): void {
        rules.forEach((_, i) => {
          set(i, keys, null);
        });
      },
      release(keys: Keys, now: number, leaseId: string): void {
        rules.forEach((rule, i) => {
          if (rule.algorithm === 'concurrency') set(i, keys, releaseStep(get(i, keys), leaseId, now));
        });
      },
    };
  };
  /** The same limiter deciding a call under other rules (a plan): state is shared by rule name, algorithm and size. */
  return { ...view(own), under: view };
}
