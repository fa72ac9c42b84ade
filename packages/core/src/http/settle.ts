/*
 * Costs known only after the response (the adapters' `settle` option): a
 * request is admitted with its `cost`, an estimate (a prompt's length), and
 * once its response is over the handler knows what it really took (the
 * tokens a model reports). The difference is given back, or taken as far as
 * each rule has it, and no further.
 *
 * Why no debt: LLM gateways (Kong's AI rate limiting, Envoy's
 * `apply_on_stream_done`, agentgateway) count the units after the response
 * and let the counter run past the limit, so that the next requests wait
 * until the window has drained the excess. A Floodgate rule's state never
 * holds more than its capacity: every algorithm's state is bounded, the
 * stores read a value beyond it as one they could not have written (and
 * start that key afresh), and all stores share one encoding. Taking the
 * extra units as far as the rule has them leaves the key empty (the next
 * request waits for the rule to refill) without a state no store can keep,
 * so the key never owes more than the rules allow. An estimate that is an
 * upper bound (the prompt plus `max_tokens`) makes every settle a refund,
 * and the limit exact.
 */
import { describe, ErrorCodes, FloodgateError } from '../errors.js';
import type { Keys } from '../keys.js';
import type { Later } from '../later.js';
import { consumeUnreported, type Limiter, reportSettleError } from '../limiter.js';
import { type CompiledRule, optionsOf, type RuleOptions } from '../rules.js';

/** What an admitted request took: its keys, its cost (the estimate) and the rules it was decided under (undefined: the limiter's). */
export interface Taken {
  readonly keys: Keys;
  readonly cost: number;
  readonly rules: readonly RuleOptions[] | undefined;
}

const DONE: Promise<void> = Promise.resolve();

/** How often a rule's extra units are tried when a concurrent request takes what a peek saw first. */
const ATTEMPTS = 3;

/** What a `settle` function returns: the units the request took, a non-negative integer, or undefined (the estimate stands). */
export function checkSettled(units: unknown): number | undefined {
  if (units === undefined || (typeof units === 'number' && Number.isSafeInteger(units) && units >= 0)) return units;
  throw new FloodgateError(
    ErrorCodes.COST,
    `The settle function returned ${describe(units)}; it must return the units the request took, a non-negative integer (or undefined to keep its cost).`,
  );
}

/**
 * Settles a request with the units its `settle` function reports (a value,
 * or a promise of one; `measure` may throw): gives back what it took beyond
 * them, or takes what it took short of them as far as each rule has it.
 * Resolves once done; never rejects: what the function does wrong is
 * reported through the limiter's 'error' event (`operation: 'settle'`), and
 * the estimate then stands.
 */
export function settleTaken(limiter: Limiter, taken: Taken, measure: () => Later<number | undefined>): Promise<void> {
  const failed = (error: unknown) => reportSettleError(limiter, taken.keys, error instanceof Error ? error : new Error(String(error)));
  try {
    return Promise.resolve(measure())
      .then((units) => (units === undefined ? undefined : settleCost(limiter, taken, units)))
      .catch(failed);
  } catch (error) {
    failed(error);
    return DONE;
  }
}

/**
 * The arithmetic: `units` below the estimate gives the difference back to
 * every rule (never above capacity: refund()); above it, each rate rule
 * takes the difference, or what it has left when that is less (0 when
 * blocked). Concurrency rules are not settled: their lease of the
 * estimate's weight ends with the request, as without `settle`.
 */
export async function settleCost(limiter: Limiter, taken: Taken, units: number): Promise<void> {
  const { keys, cost, rules } = taken;
  if (units < cost) await limiter.refund(keys, rules === undefined ? { cost: cost - units } : { cost: cost - units, rules });
  else if (units > cost) await Promise.all(ruleListsOf(limiter, rules).map((each) => takeMore(limiter, keys, each, units - cost)));
}

/** Each rate rule of a rule set as a list of its own, without its blocks: made once per rule set. */
const singleRules = new WeakMap<readonly CompiledRule[], readonly (readonly RuleOptions[] | undefined)[]>();

/**
 * The rule lists to take extra units under, each rule apart, so that a rule
 * with room takes them all though another has less. A rule's state is kept
 * by name and algorithm, so a list of one rule reaches the same state; and
 * without `blockMs` it starts no block, though it honours one (a plan
 * without blockMs does). The call's own rules when they are one rate rule
 * that blocks nobody.
 */
function ruleListsOf(limiter: Limiter, rules: readonly RuleOptions[] | undefined): readonly (readonly RuleOptions[] | undefined)[] {
  const compiled = limiter.rulesFor(rules);
  let lists = singleRules.get(compiled);
  if (lists === undefined) {
    const [only, ...more] = compiled;
    lists =
      only !== undefined && more.length === 0 && only.algorithm !== 'concurrency' && only.blockMs === 0
        ? [rules]
        : compiled
            .filter((rule) => rule.algorithm !== 'concurrency')
            .map((rule) => {
              const { blockMs: _blockMs, maxBlockMs: _maxBlockMs, ...options } = optionsOf(rule);
              return Object.freeze([Object.freeze(options)]);
            });
    singleRules.set(compiled, lists);
  }
  return lists;
}

/**
 * Takes `units` more under `rules`, or what they have left, as a peek sees
 * it. Tried again when a concurrent request took the units between the peek
 * and the consume (that denial starts no block: the rule is given without
 * its blocks); nothing is taken when the store fails (the 'error' event
 * says so).
 */
async function takeMore(limiter: Limiter, keys: Keys, rules: readonly RuleOptions[] | undefined, units: number): Promise<void> {
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const now = await limiter.peek(keys, rules === undefined ? undefined : { rules });
    const take = Math.min(units, now.remaining);
    if (now.storeError !== undefined || take <= 0) return;
    const taken = await consumeUnreported(limiter, keys, rules === undefined ? { cost: take } : { cost: take, rules });
    if (taken.allowed) return;
  }
}
