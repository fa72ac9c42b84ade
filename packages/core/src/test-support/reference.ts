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
  return { name: rule.name, allowed: v.allowed, limit: rule.limit, remaining: v.remainingNow, resetMs: v.resetMsNow, retryAfterMs: v.retryAfterMs, delayMs };
}

export function referenceLimiter(rules: readonly CompiledRule[]) {
  const states = new Map<string, RuleState[]>();
  const get = (key: string) => states.get(key) ?? rules.map(() => null);
  return {
    consume(key: string, now: number, cost: number, leaseId?: string): RuleDecision[] {
      const current = get(key);
      const results = rules.map((rule, i) => step(rule, current[i] ?? null, now, cost, leaseId));
      const admitted = results.every((r) => r.verdict.allowed);
      if (admitted)
        states.set(
          key,
          results.map((r) => r.state),
        );
      return results.map(({ verdict: v }, i) => {
        const rule = rules[i] as CompiledRule;
        if (admitted)
          return { name: rule.name, allowed: true, limit: rule.limit, remaining: v.remaining, resetMs: v.resetMs, retryAfterMs: 0, delayMs: v.delayMs };
        return nothingRecorded(rule, v, 0);
      });
    },
    peek(key: string, now: number): RuleDecision[] {
      const current = get(key);
      return rules.map((rule, i) => {
        const v = step(rule, current[i] ?? null, now, 1).verdict;
        return nothingRecorded(rule, v, v.allowed ? v.delayMs : 0);
      });
    },
    refund(key: string, now: number, cost: number): void {
      const current = get(key);
      states.set(
        key,
        rules.map((rule, i) => refundStep(rule, current[i] ?? null, now, cost)),
      );
    },
    reset(key: string): void {
      states.delete(key);
    },
    release(key: string, now: number, leaseId: string): void {
      const current = get(key);
      states.set(
        key,
        rules.map((rule, i) => (rule.algorithm === 'concurrency' ? releaseStep(current[i] ?? null, leaseId, now) : (current[i] ?? null))),
      );
    },
  };
}
