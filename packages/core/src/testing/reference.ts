/*
 * The reference a store must agree with: each rule run by the pure step
 * functions (checked against brute-force models in algorithms.test.ts) and
 * composed all-or-nothing, as the contract says. Blocks (blockMs,
 * maxBlockMs) are written here from the contract, apart from the stores'
 * own code (algorithms/block.ts).
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
    ...(binding.blocked === undefined ? {} : { blocked: binding.blocked }),
  };
}

/** A block as the contract describes it: until when it holds, how long it is, its strike, and until when it is remembered. */
interface ReferenceBlock {
  until: number;
  length: number;
  strike: number;
  forgetAt: number;
}

/** A rule's decision while a block holds the key for `left` ms more: denied, nothing to take, and at least `left` to wait. */
function whileBlocked(decision: RuleDecision, block: ReferenceBlock, left: number, started: boolean): RuleDecision {
  return {
    ...decision,
    allowed: false,
    remaining: 0,
    resetMs: Math.max(decision.resetMs, left),
    retryAfterMs: decision.allowed ? left : Math.max(decision.retryAfterMs, left),
    delayMs: 0,
    // A block by hand has no strike.
    blocked: { blockMs: block.length, leftMs: left, strike: block.strike, started, ...(block.strike === 0 ? { manual: true as const } : {}) },
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

/** Whether block() and unblock() without a rule name go under this rule: one of a key that can hold a block. */
const byHand = (rule: CompiledRule): boolean => rule.algorithm !== 'concurrency' && rule.scope !== 'global';

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
  /** Blocks by the same ids: kept apart from the state, which refunds change and blocks outlive. */
  const blocks = new Map<string, ReferenceBlock>();
  const view = (rules: readonly CompiledRule[]) => {
    const id = (i: number, keys: Keys) => {
      const rule = rules[i] as CompiledRule;
      return `${shapeOf(rule)}\u0000${rule.scope}\u0000${keyOf(rule, keys)}`;
    };
    const get = (i: number, keys: Keys) => states.get(id(i, keys)) ?? null;
    /**
     * Writes a rule's state. A block is remembered until its forgetAt; one
     * no longer remembered is dropped when the state is written (the stores
     * drop it as they write the key), so that a clock going back later finds
     * it gone in every store alike.
     */
    const set = (i: number, keys: Keys, state: RuleState, now: number) => {
      const block = blocks.get(id(i, keys));
      if (block !== undefined && now >= block.forgetAt) blocks.delete(id(i, keys));
      if (state === null) states.delete(id(i, keys));
      else states.set(id(i, keys), state);
    };
    /** The block remembered at `now`, if any. */
    const remembered = (i: number, keys: Keys, now: number) => {
      const block = blocks.get(id(i, keys));
      return block !== undefined && now < block.forgetAt ? block : undefined;
    };
    /** ms the block holds the key from `now`: never more than its length (a clock that went back stands still). */
    const leftOf = (block: ReferenceBlock | undefined, now: number) =>
      block === undefined || now >= block.until ? 0 : Math.min(block.until - now, block.length);
    return {
      consume(keys: Keys, now: number, cost: number, leaseId?: string): RuleDecision[] {
        const results = rules.map((rule, i) => step(rule, get(i, keys), now, cost, leaseId));
        const held = rules.map((_, i) => remembered(i, keys, now));
        const admitted = results.every((r, i) => r.verdict.allowed && leftOf(held[i], now) === 0);
        if (admitted)
          results.forEach((r, i) => {
            set(i, keys, r.state, now);
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
          const decision = nothingRecorded(rule, v, 0);
          const block = held[i];
          const left = leftOf(block, now);
          if (left > 0) return whileBlocked(decision, block as ReferenceBlock, left, false);
          // This rule's own numbers deny a call that could pass some day: its block starts (whichever rule binds).
          if (rule.blockMs > 0 && !v.allowed && v.retryAfterMs !== Number.POSITIVE_INFINITY) {
            const escalates = rule.maxBlockMs > 0 && block !== undefined;
            const length = escalates ? Math.min(Math.max(2 * block.length, rule.blockMs), rule.maxBlockMs) : rule.blockMs;
            const started = { until: now + length, length, strike: escalates ? block.strike + 1 : 1, forgetAt: now + length + rule.maxBlockMs };
            blocks.set(id(i, keys), started);
            return whileBlocked(decision, started, length, true);
          }
          return decision;
        });
      },
      peek(keys: Keys, now: number): RuleDecision[] {
        return rules.map((rule, i) => {
          const v = step(rule, get(i, keys), now, 1).verdict;
          const decision = nothingRecorded(rule, v, v.allowed ? v.delayMs : 0);
          const block = remembered(i, keys, now);
          const left = leftOf(block, now);
          return left > 0 ? whileBlocked(decision, block as ReferenceBlock, left, false) : decision;
        });
      },
      refund(keys: Keys, now: number, cost: number): void {
        rules.forEach((rule, i) => {
          const state = get(i, keys);
          // Blocks stay. A refund of nothing forgets a block no longer remembered; one of state
          // this rule does not read (another grid) writes nothing.
          if (state === null) set(i, keys, null, now);
          else {
            const after = refundStep(rule, state, now, cost);
            if (after !== state) set(i, keys, after, now);
          }
        });
      },
      /** By hand: every rule of a key that can hold a block (not concurrency, not a global rule) holds one for `ms`, forgotten as it ends; counts stay. */
      block(keys: Keys, now: number, ms: number): void {
        rules.forEach((rule, i) => {
          if (byHand(rule)) blocks.set(id(i, keys), { until: now + ms, length: ms, strike: 0, forgetAt: now + ms });
        });
      },
      /** Lifts every block still remembered; the state stays as it stands now (a refund of nothing: gone once it has ended). */
      unblock(keys: Keys, now: number): void {
        rules.forEach((rule, i) => {
          if (!byHand(rule) || remembered(i, keys, now) === undefined) return;
          blocks.delete(id(i, keys));
          const state = get(i, keys);
          if (state === null) return;
          const after = refundStep(rule, state, now, 0);
          if (after === null) states.delete(id(i, keys));
          else states.set(id(i, keys), after);
        });
      },
      reset(keys: Keys): void {
        rules.forEach((_, i) => {
          states.delete(id(i, keys));
          blocks.delete(id(i, keys));
        });
      },
      release(keys: Keys, now: number, leaseId: string): void {
        rules.forEach((rule, i) => {
          if (rule.algorithm === 'concurrency') set(i, keys, releaseStep(get(i, keys), leaseId, now), now);
        });
      },
    };
  };
  /** The same limiter deciding a call under other rules (a plan): state is shared by rule name, algorithm and size. */
  return { ...view(own), under: view };
}
