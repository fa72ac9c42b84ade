/*
 * `limiter.wrap(fn, options)`: the rate-limited function. The options are
 * checked once, when the function is wrapped; each call computes its keys,
 * cost and rules from its own arguments, is admitted (consume, or wait), then
 * runs `fn` with the same `this` and arguments. A lease taken under a
 * concurrency rule ends when `fn` is done.
 */
import type { Decision } from './decision.js';
import { describe, ErrorCodes, FloodgateError } from './errors.js';
import type { Keys } from './keys.js';
import { isPromise } from './later.js';
import { rejectUnknownKeys } from './options.js';
import { RateLimitedError } from './rate-limited-error.js';
import type { RuleOptions } from './rules.js';
import { sleep } from './sleep.js';
import { MAX_PRIORITY, MIN_PRIORITY, type WaitOptions } from './wait.js';

/** A value, or a function of the wrapped function's `this` and arguments that returns it (or a promise of it). */
type PerCall<T, A extends unknown[], This> = T | ((this: This, ...args: A) => T | Promise<T>);

/** Options of `limiter.wrap()` (and of `@rateLimited`). */
export interface WrapOptions<A extends unknown[] = unknown[], This = unknown> {
  /** The keys a call is limited under: `(...args) => keys` (called with the same `this`), or constant keys (`'github'`). */
  key: Keys | ((this: This, ...args: A) => Keys | Promise<Keys>);
  /** Units a call takes: a positive integer, or a function of the arguments. @defaultValue 1 */
  cost?: number | ((this: This, ...args: A) => number | Promise<number>);
  /**
   * Wait instead of rejecting: `true` waits as long as it takes,
   * `{ maxWaitMs, signal }` bounds it (`ERR_FG_WAIT_TIMEOUT` when admission
   * cannot come in time; the signal aborts every call that waits), and
   * `priority` (a number, or a function of the arguments) orders the calls
   * waiting on the same keys: higher first (see `WaitOptions.priority`).
   * @defaultValue false: a denied call rejects with RateLimitedError
   */
  wait?: boolean | WrapOptions.Wait<A, This>;
  /** Decide calls under these rules instead of the limiter's own (a plan): an array, or a function of the arguments. */
  rules?: readonly RuleOptions[] | ((this: This, ...args: A) => readonly RuleOptions[] | Promise<readonly RuleOptions[]>);
}

export declare namespace WrapOptions {
  /** How a wrapped function's calls wait (`wrap(fn, { wait: { ... } })`). */
  interface Wait<A extends unknown[] = unknown[], This = unknown> extends Pick<WaitOptions, 'maxWaitMs' | 'signal'> {
    /** The calls' priority: an integer from -1000 to 1000 (higher goes first), or a function of the arguments that returns one. @defaultValue 0 */
    priority?: number | ((this: This, ...args: A) => number | Promise<number>);
  }
}

/** What `wrap()` returns: `fn` with the same parameters and `this`, returning a promise of its result. */
type RateLimitedFunction<A extends unknown[], R, This = unknown> = (this: This, ...args: A) => Promise<Awaited<R>>;

/** What wrap needs of a limiter. */
export interface WrappableLimiter {
  consume(keys: Keys, options?: { cost?: number; rules?: readonly RuleOptions[] }): Promise<Decision>;
  wait(keys: Keys, options?: WaitOptions): Promise<Decision>;
  release(keys: Keys, leaseId: string, options?: { rules?: readonly RuleOptions[] }): Promise<void>;
}

const wrapOptionNames: ReadonlySet<string> = new Set(['key', 'cost', 'wait', 'rules']);

/** Wrap options, checked once: each call then only computes its values. */
export interface CallPlan<A extends unknown[], This> {
  readonly key: PerCall<Keys, A, This>;
  readonly cost: PerCall<number, A, This>;
  readonly rules: PerCall<readonly RuleOptions[], A, This> | undefined;
  /** undefined: do not wait. */
  readonly wait: WrapOptions.Wait<A, This> | undefined;
}

/** Checks wrap()'s (or the decorator's) call options. `where` names the caller in error messages. */
export function planCalls<A extends unknown[], This>(options: WrapOptions<A, This>, where: string): CallPlan<A, This> {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new FloodgateError(ErrorCodes.OPTION, `${where} takes options like { key: (...args) => 'key', wait: true }, got ${describe(options)}.`);
  }
  rejectUnknownKeys(options, wrapOptionNames, where);
  const { key, cost = 1, rules, wait = false } = options;
  if (typeof key !== 'function' && !(typeof key === 'string' && key !== '') && !(typeof key === 'object' && key !== null && !Array.isArray(key))) {
    throw new FloodgateError(
      ErrorCodes.KEY,
      `${where} needs key: a function of the arguments that returns the keys ((userId) => userId, or (order, ctx) => ({ ip: ctx.ip, user: ctx.user })), or constant keys ('github'); got ${describe(key)}.`,
    );
  }
  if (typeof cost !== 'function' && (!Number.isSafeInteger(cost) || cost < 1)) {
    throw new FloodgateError(ErrorCodes.COST, `${where}: cost must be a positive integer or a function of the arguments, got ${describe(cost)}.`);
  }
  if (rules !== undefined && typeof rules !== 'function' && !Array.isArray(rules)) {
    throw new FloodgateError(
      ErrorCodes.RULES,
      `${where}: rules must be an array of rules or a function of the arguments that returns one, got ${describe(rules)}.`,
    );
  }
  let waiting: CallPlan<A, This>['wait'];
  if (wait === true) waiting = {};
  else if (typeof wait === 'object' && wait !== null && !Array.isArray(wait)) {
    rejectUnknownKeys(wait, new Set(['maxWaitMs', 'signal', 'priority']), `${where} wait`);
    const { priority } = wait;
    if (priority !== undefined && typeof priority !== 'function' && (!Number.isSafeInteger(priority) || priority < MIN_PRIORITY || priority > MAX_PRIORITY)) {
      throw new FloodgateError(
        ErrorCodes.OPTION,
        `${where}: wait.priority must be an integer from ${MIN_PRIORITY} to ${MAX_PRIORITY} (higher goes first) or a function of the arguments, got ${describe(priority)}.`,
      );
    }
    waiting = wait;
  } else if (wait !== false) {
    throw new FloodgateError(ErrorCodes.OPTION, `${where}: wait must be true, false or { maxWaitMs, signal, priority }, got ${describe(wait)}.`);
  }
  return { key, cost, rules, wait: waiting };
}

const perCall = <T, A extends unknown[], This>(value: PerCall<T, A, This>, self: This, args: A): T | Promise<T> =>
  typeof value === 'function' ? (value as (this: This, ...args: A) => T | Promise<T>).apply(self, args) : value;

/** What one call is admitted under, computed from its arguments. */
interface CallValues {
  readonly keys: Keys;
  readonly cost: number;
  readonly rules: readonly RuleOptions[] | undefined;
  readonly priority: number | undefined;
}

/**
 * A call's values, awaited only when a function returned a promise: calls
 * whose functions return plain values reach wait() in the order they were
 * made, whatever options they have (each `await` would be a turn later).
 */
function valuesOf<A extends unknown[], This>(plan: CallPlan<A, This>, self: This, args: A): CallValues | Promise<CallValues> {
  const keys = perCall(plan.key, self, args);
  const cost = perCall(plan.cost, self, args);
  const rules = plan.rules === undefined ? undefined : perCall(plan.rules, self, args);
  const priority = plan.wait?.priority === undefined ? undefined : perCall(plan.wait.priority, self, args);
  if (!isPromise(keys) && !isPromise(cost) && !isPromise(rules) && !isPromise(priority)) return { keys, cost, rules, priority };
  return Promise.all([keys, cost, rules, priority]).then(([k, c, r, p]) => ({ keys: k, cost: c, rules: r, priority: p }));
}

/** Admits one call of a plan: waits, or consumes and throws RateLimitedError on a denial. Returns the decision and what it was taken under. */
export async function admit<A extends unknown[], This>(
  limiter: WrappableLimiter,
  plan: CallPlan<A, This>,
  self: This,
  args: A,
): Promise<{ decision: Decision; keys: Keys; rules: readonly RuleOptions[] | undefined }> {
  const values = valuesOf(plan, self, args);
  const { keys, cost, rules, priority } = isPromise(values) ? await values : values;
  if (plan.wait !== undefined) {
    const { maxWaitMs, signal } = plan.wait;
    // Given only when set: the options of a plain wait stay those of limiter.wait() before priorities.
    const options: WaitOptions = priority === undefined ? { cost, rules, maxWaitMs, signal } : { cost, rules, maxWaitMs, signal, priority };
    const decision = await limiter.wait(keys, options);
    return { decision, keys, rules };
  }
  const decision = await limiter.consume(keys, { cost, rules });
  if (!decision.allowed) throw new RateLimitedError(decision);
  // A shaping rule admitted the call for later: it runs then.
  if (decision.delayMs > 0) await sleep(decision.delayMs);
  return { decision, keys, rules };
}

/** Runs `fn` under the plan: admitted first, its lease (if any) ended once it is done. */
export async function runLimited<A extends unknown[], R, This>(
  limiter: WrappableLimiter,
  plan: CallPlan<A, This>,
  fn: (this: This, ...args: A) => R,
  self: This,
  args: A,
): Promise<Awaited<R>> {
  const { decision, keys, rules } = await admit(limiter, plan, self, args);
  if (decision.leaseId === undefined) return await fn.apply(self, args);
  try {
    return await fn.apply(self, args);
  } finally {
    await limiter.release(keys, decision.leaseId, { rules });
  }
}

/** `limiter.wrap()`: see the Limiter interface. */
export function wrap<A extends unknown[], R, This>(
  limiter: WrappableLimiter,
  fn: (this: This, ...args: A) => R,
  options: WrapOptions<A, This>,
): RateLimitedFunction<A, R, This> {
  if (typeof fn !== 'function') throw new FloodgateError(ErrorCodes.OPTION, `wrap() takes the function to limit first, got ${describe(fn)}.`);
  const plan = planCalls(options, 'wrap()');
  const limited = function (this: This, ...args: A): Promise<Awaited<R>> {
    return runLimited(limiter, plan, fn, this, args);
  };
  Object.defineProperty(limited, 'name', { value: fn.name, configurable: true });
  return limited;
}
