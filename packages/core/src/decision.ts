import type { RuleDecision } from './stores/types.js';

/**
 * What `consume` and `peek` return, and what adapters expose on the request.
 * The top-level numbers are those of the binding rule: when denied, the
 * denying rule with the largest `retryAfterMs`; when allowed, the rule with
 * the smallest `remaining` (the first one on ties). So is `blocked`: set when
 * the binding rule holds the key blocked (`blockMs`); `rules[i].blocked`
 * tells each rule's own.
 */
export interface Decision extends Omit<RuleDecision, 'name' | 'scope'> {
  /** Whether every rule admits the call. `limit`, `remaining`, `resetMs` and `retryAfterMs` are the binding rule's; `delayMs` is the largest delay of all rules. */
  allowed: boolean;
  /** The binding rule's name (`'default'` for the shorthand). */
  rule: string;
  /** One entry per rule, in the order of the rules. */
  rules: RuleDecision[];
  /** Set when `onStoreError` decided the outcome: the numbers above are then not measured. */
  storeError?: Error;
  /** Set when an admitted call took a lease under a concurrency rule: give it back with `limiter.release(key, leaseId)`. */
  leaseId?: string;
}

/** Folds the rules' decisions into one Decision with its binding rule. */
export function combine(rules: RuleDecision[]): Decision {
  let allowed = true;
  let delayMs = 0;
  for (const r of rules) {
    if (!r.allowed) allowed = false;
    if (r.delayMs > delayMs) delayMs = r.delayMs;
  }
  let binding = rules[0] as RuleDecision;
  for (let i = 1; i < rules.length; i++) {
    const r = rules[i] as RuleDecision;
    if (allowed ? r.remaining < binding.remaining : !r.allowed && (binding.allowed || r.retryAfterMs > binding.retryAfterMs)) binding = r;
  }
  const decision: Decision = {
    allowed,
    limit: binding.limit,
    remaining: binding.remaining,
    resetMs: binding.resetMs,
    retryAfterMs: allowed ? 0 : binding.retryAfterMs,
    delayMs: allowed ? delayMs : 0,
    rule: binding.name,
    rules,
  };
  if (binding.blocked !== undefined) decision.blocked = binding.blocked;
  return decision;
}
