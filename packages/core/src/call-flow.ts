/*
 * The call flow: what every adapter decides about a call, framework-neutral,
 * without rendering it. Options are read once (call-options.ts); then a call
 * reads top to bottom: skip → key → cost → rules → consume → verdict, and a
 * shaping delay is waited out. Adapters turn the verdict into their answer
 * (a Socket.IO error, a TRPCError, a GraphQL error); the HTTP flow
 * (http/middleware.ts) is the same steps with allow and deny lists, headers
 * and denial bodies around them.
 */
import { type CallConfiguration, parseCallOptions } from './call-options.js';
import type { Decision } from './decision.js';
import type { HeadersMode, PolicyReport } from './http/headers.js';
import type { KeyFunction } from './http/keys.js';
import type { Keys } from './keys.js';
import { drive, type Later, wait } from './later.js';
import { type ConsumeOptions, consumeNow, type Limiter } from './limiter.js';
import type { LimiterOptions } from './options.js';
import type { RuleOptions } from './rules.js';
import { sleep } from './sleep.js';

/** A flow that decides calls for an adapter that renders them itself: `createCallFlow()`. */
export interface CallFlow<Args extends unknown[]> {
  readonly limiter: Limiter;
  /**
   * Skip, key, cost, rules and the limiter: the verdict on one call, once a
   * shaping delay (leaky-bucket, mode 'shape') is waited out. A value, not a
   * promise, when every callback and the store answered synchronously (the
   * memory store). Throws (or rejects with) a FloodgateError for a bad key or
   * cost: ERR_FG_KEY or ERR_FG_COST, with the callback's error as `cause`
   * and its HTTP status as `status` (else 500). What `skip` throws passes as
   * it is.
   */
  decide(args: Args): CallFlow.Verdict | Promise<CallFlow.Verdict>;
  /**
   * Ends what a call holds once its work is over (a concurrency rule's
   * lease); nothing for a call that holds nothing. Never rejects: failures
   * go to the limiter's 'error' event.
   */
  settle(verdict: CallFlow.Verdict): Promise<void>;
}

export declare namespace CallFlow {
  /**
   * The options every adapter's `rateLimit()` takes: everything
   * `createLimiter` takes (or `limiter`, to share one), plus how to key,
   * cost and skip calls. `Args` is what the adapter hands the callbacks.
   */
  export interface Options<Args extends unknown[]> extends Omit<LimiterOptions, 'limit' | 'rules'> {
    /**
     * Units per window: a number, or a function of the call (a plan, a
     * tenant): `(req) => (req.user?.paid ? 1000 : 100)`. Counts are kept per
     * rule name, so a client whose limit changes keeps its count.
     */
    limit?: number | ((...args: Args) => number | Promise<number>);
    /** Several rules, all of which must pass: a list, or a function of the call that returns one (return one of a few constant lists). */
    rules?: readonly RuleOptions[] | ((...args: Args) => readonly RuleOptions[] | Promise<readonly RuleOptions[]>);
    /** A limiter to use instead of creating one: share it between routes. Not together with limiter options (but `limit` or `rules` as functions). */
    limiter?: Limiter;
    /**
     * The key(s) a call is limited under: a function (scope `key`; it may also
     * return an object of keys by scope), or an object of functions, one per
     * scope the rules use: `{ ip: keyBy.ip(), user: keyBy.header('x-user-id') }`.
     * @defaultValue keyBy.ip()
     */
    key?: KeyFunction<Args> | ((...args: Args) => Keys | Promise<Keys>) | Readonly<Record<string, KeyFunction<Args>>>;
    /** Units a call takes: a positive integer, or a function of the call. @defaultValue 1 */
    cost?: number | ((...args: Args) => number | Promise<number>);
    /** Calls for which this returns true are not limited at all. */
    skip?: (...args: Args) => boolean | Promise<boolean>;
    /** Decide, report and emit events, but never deny: a dark launch. */
    shadow?: boolean;
    /**
     * Which rate-limit headers to send: `'legacy'` (`X-RateLimit-*`), the IETF
     * drafts `'draft-6'`, `'draft-7'`, `'draft-8'`, `'draft-10'`, `'both'`
     * (legacy and draft-8), or `false`. Several limiters on one request are
     * reported together (the most restrictive for one-policy headers, every
     * policy for draft-8 and draft-10), and with different modes the response
     * carries the fields of each mode, all built from every limiter. @defaultValue 'legacy'
     */
    headers?: HeadersMode;
  }

  /**
   * What a call flow decided about a call: skipped, or decided by the
   * limiter (`deny` only when it denied and the flow is not in shadow mode).
   */
  export type Verdict = { readonly kind: 'skip' } | ({ readonly kind: 'pass' } & Decided) | ({ readonly kind: 'deny' } & Decided);

  /** What the limiter decided about a call, and what the call was decided under. */
  export interface Decided {
    readonly decision: Decision;
    readonly keys: Keys;
    readonly cost: number;
    /** The rules the call was decided under when `limit` or `rules` is a function of it; undefined: the limiter's. */
    readonly rules: readonly RuleOptions[] | undefined;
    /** What the decision says in rate-limit headers (`rateLimitHeaders`), in the mode of the `headers` option. */
    readonly report: PolicyReport;
  }
}

const SKIP: CallFlow.Verdict = Object.freeze({ kind: 'skip' });
const DONE: Promise<void> = Promise.resolve();

/**
 * Key, cost, rules and the limiter: the verdict on a call that `skip` let
 * through. `keyed` sees the keys before the cost is read (the HTTP flow's
 * setup warnings). `yield* wait(x)` is x once it is there (later.ts).
 */
export function* decideCall<Args extends unknown[]>(
  config: CallConfiguration<Args>,
  args: Args,
  keyed?: (args: Args, keys: Keys) => void,
): Generator<Later<unknown>, Exclude<CallFlow.Verdict, { kind: 'skip' }>, unknown> {
  const { limiter } = config;
  const keys = yield* wait(config.keysOf(args));
  keyed?.(args, keys);
  const cost = yield* wait(config.costOf(args));
  const rules = config.rulesOf === undefined ? undefined : yield* wait(config.rulesOf(args));

  // The time the decision is about: X-RateLimit-Reset is this plus resetMs, whatever happens after.
  const decidedAt = limiter.now();
  const call: ConsumeOptions | undefined = rules !== undefined ? { cost, rules } : cost === 1 ? undefined : { cost };
  const decision = yield* wait(consumeNow(limiter, keys, call));
  // Built field by field: spreading optional parts costs a call an object copy each.
  const report: { -readonly [K in keyof PolicyReport]: PolicyReport[K] } = {
    decision,
    rules: rules === undefined ? limiter.rules : limiter.rulesFor(rules),
    decidedAt,
    headers: config.headersMode,
  };
  if (config.shadow) report.shadow = true;
  return { kind: decision.allowed || config.shadow ? 'pass' : 'deny', decision, keys, cost, rules, report };
}

/** Ends a concurrency lease; never rejects (release() reports store failures through the limiter's 'error' event). */
export function releaseLease(limiter: Limiter, keys: Keys, leaseId: string, rules: readonly RuleOptions[] | undefined): Promise<void> {
  return limiter.release(keys, leaseId, rules && { rules }).catch(() => {});
}

/**
 * The flow of an adapter that answers calls its own way (Socket.IO events,
 * tRPC procedures, GraphQL operations): reads the options once, and decides
 * each call without rendering it: the adapter turns the verdict into its
 * answer, and calls `settle` once the call's work is over.
 *
 * @example
 * ```ts
 * const flow = createCallFlow<[call: Call]>(options, { where: "@floodgate/rpc's rateLimit()", defaultKey: () => keyBy.ip() });
 * const verdict = await flow.decide([call]);
 * if (verdict.kind === 'deny') throw new TooManyRequests(verdict.decision.retryAfterMs);
 * try {
 *   return await handle(call);
 * } finally {
 *   flow.settle(verdict);
 * }
 * ```
 */
export function createCallFlow<Args extends unknown[]>(
  options: CallFlow.Options<Args>,
  adapter: {
    /** Where the options were given, as errors name it: `"@floodgate/trpc's rateLimit()"`. */
    where: string;
    /** The key when the options give none (usually `keyBy.ip()`); without it, `key` is required. */
    defaultKey?: () => KeyFunction<Args>;
    /** The adapter's own options, which the flow lets through for the adapter to read. */
    extraKeys?: readonly string[];
    /** Options the adapter does not take, each with what to do instead: refused with ERR_FG_UNKNOWN_OPTION. */
    unsupported?: Readonly<Record<string, string>>;
  },
): CallFlow<Args> {
  const config = parseCallOptions<Args>(options as CallFlow.Options<Args> & Record<string, unknown>, adapter);
  const { limiter, skip } = config;

  function* decide(args: Args): Generator<Later<unknown>, CallFlow.Verdict, unknown> {
    if (skip !== undefined && (yield* wait(skip(...args)))) return SKIP;
    const verdict = yield* decideCall(config, args);
    const { decision } = verdict;
    if (decision.allowed && decision.delayMs > 0) yield* wait(sleep(decision.delayMs));
    return verdict;
  }

  return {
    limiter,
    decide: (args) => drive(decide(args)),
    settle(verdict) {
      if (verdict.kind === 'skip' || verdict.decision.leaseId === undefined) return DONE;
      return releaseLease(limiter, verdict.keys, verdict.decision.leaseId, verdict.rules);
    },
  };
}
