import { type CallFlow, decideCall, releaseLease } from '../call-flow.js';
import type { Decision } from '../decision.js';
import type { Keys } from '../keys.js';
import { drive, isPromise, type Later, wait } from '../later.js';
import { isUnmeasured, type Limiter } from '../limiter.js';
import type { RuleOptions } from '../rules.js';
import { sleep } from '../sleep.js';
import { DEFAULT_MESSAGE, parseFlowOptions, render } from './flow-options.js';
import { type PolicyReport, partitionKeys, rateLimitHeaders } from './headers.js';
import type { KeyFunction } from './keys.js';
import { problemResponse } from './problem.js';
import type { ProxyTrust } from './proxy-trust.js';
import { settleTaken } from './settle.js';

/**
 * The options every HTTP adapter's `rateLimit()` takes: those of every call
 * flow (the limiter's, key, cost, skip, shadow, headers), plus how to answer
 * requests. `Args` is what the framework hands a middleware (`[req, res]`,
 * `[ctx]`, `[c]`); `Handler` is the adapter's denial handler type.
 */
export interface RateLimitOptions<Args extends unknown[], Handler> extends CallFlow.Options<Args> {
  /** Status of a denial. @defaultValue 429 */
  statusCode?: number;
  /**
   * Body of a denial: a string (sent as text), an object (sent as JSON), or a
   * function of the request (undefined: the default message).
   * @defaultValue 'Too many requests, please try again later.'
   */
  message?: string | object | ((...args: Args) => string | object | undefined | Promise<string | object | undefined>);
  /** Full control of the denial response (headers are already set). */
  handler?: Handler;
  /**
   * Answer denials with an `application/problem+json` body (RFC 9457) of the
   * rate-limit draft's problem types: `quota-exceeded` with the
   * `violated-policies`, or `temporary-reduced-capacity` for the 503 of a
   * failed store. A string `message` becomes its `detail`, an object's
   * members are added to it. @defaultValue false
   */
  problemDetails?: boolean;
  /** Give the units back when the response status is < 400. */
  skipSuccessfulRequests?: boolean;
  /** Give the units back when the response status is >= 400 or the response failed. */
  skipFailedRequests?: boolean;
  /**
   * The units the request really took, known once its response is over (the
   * tokens a model reports): the request is admitted with `cost`, an
   * estimate; then the difference is given back, or taken as far as each rule
   * has it (the key owes nothing beyond an empty rule). `undefined` keeps the
   * estimate. Called once the response is over, as skipSuccessfulRequests
   * refunds are, and not for a request those give back. This response's
   * headers show the estimate; the next request's, the settled cost.
   *
   * @example
   * ```ts
   * rateLimit({ limit: 10_000, windowMs: 60_000, cost: (req) => estimateTokens(req.body), settle: (req, res) => res.locals.tokens });
   * ```
   */
  settle?: (...args: Args) => number | undefined | Promise<number | undefined>;
  /** Requests from these IP addresses/CIDR ranges (or for which the function is true) are never limited. */
  allowList?: readonly string[] | ((...args: Args) => boolean | Promise<boolean>);
  /** Requests from these IP addresses/CIDR ranges (or for which the function is true) get 403 without a store call. */
  denyList?: readonly string[] | ((...args: Args) => boolean | Promise<boolean>);
  /**
   * Warnings about the setup, each at most once: X-Forwarded-For while no proxy is trusted,
   * every proxy trusted, one key for most requests, a proxy header entry that is no address.
   * `false` turns them off, `{ singleKey: false }` one of them. @defaultValue true
   */
  validate?: boolean | { readonly xForwardedFor?: boolean; readonly trustProxy?: boolean; readonly singleKey?: boolean; readonly forwardedAddress?: boolean };
}

/**
 * The request flow behind every HTTP adapter: a call flow (`createCallFlow`) with
 * allow and deny lists, rate-limit headers, denial bodies and statuses, and
 * refunds by status around it.
 */
export interface RateLimitFlow<Args extends unknown[], Handler> {
  readonly limiter: Limiter;
  /** The custom denial handler, if any. */
  readonly handler: Handler | undefined;
  /** Whether `settle` has work to do for this outcome: a refund to decide or a lease to end. */
  mustSettle(outcome: RateLimitFlow.Outcome): boolean;
  /**
   * Runs skip, key, cost and the limiter, and waits out a shaping delay.
   * Rejects with a FloodgateError (status 500) for a bad key or cost, which
   * the adapter passes to the framework's error path.
   */
  run(args: Args): Promise<RateLimitFlow.Outcome>;
  /**
   * `run()` without a promise when every callback and the store answered synchronously
   * (the memory store): for adapters whose framework takes a synchronous answer. Throws
   * what run() rejects with.
   */
  runNow(args: Args): RateLimitFlow.Outcome | Promise<RateLimitFlow.Outcome>;
  /**
   * Tells the flow how the response ended (`undefined`: it failed or was cut off): ends leases, refunds
   * as configured, or settles the cost the `settle` option reports, which gets the request's arguments,
   * then `after` (the fetch adapter's Response, which its arguments do not hold). Resolves once that is
   * done; never rejects (failures go to the limiter's 'error' event).
   */
  settle(outcome: RateLimitFlow.Outcome, status: number | undefined, ...after: unknown[]): Promise<void>;
  /**
   * The rate-limit headers of an outcome as they stand now, over every limiter
   * that has decided the request since: for adapters that set headers after
   * the handler ran (a fetch handler wrapped twice), so that the outer one does
   * not overwrite the inner one's with fewer policies.
   */
  headersOf(outcome: RateLimitFlow.Outcome): (readonly [name: string, value: string])[];
}

export declare namespace RateLimitFlow {
  /**
   * What a custom `handler` is given about a denial: the decision, and what an
   * express-rate-limit handler finds in its `options` argument (`statusCode`,
   * `message`, `limit` and `windowMs` of the binding rule), so that one copied
   * from it answers as it did there.
   */
  export interface Denial extends Decision {
    /** The status the denial would be answered with: `statusCode` (429), or 503 when the store failed and onStoreError denied. */
    readonly statusCode: number;
    /** The `message` option as given (a function stays a function), or the default text. */
    readonly message: unknown;
    /** The binding rule's `windowMs`. */
    readonly windowMs: number;
  }

  /** What the flow decided about a request; the adapter turns it into a response. */
  export type Outcome =
    | { readonly kind: 'skip' }
    | {
        readonly kind: 'pass';
        readonly decision: Decision;
        /** The rate-limit headers as they stood when this limiter decided (`flow.headersOf(outcome)` recomputes them). */
        readonly headers: (readonly [name: string, value: string])[];
        /** What every limiter that decided this request so far reported, this one last: the headers' source. */
        readonly reports: readonly PolicyReport[];
        /**
         * Set when units were taken and `settle` may give them back (skipSuccessfulRequests, skipFailedRequests)
         * or adjust them to the units the `settle` option reports, which it calls with `args`.
         */
        readonly taken:
          | { readonly keys: Keys; readonly cost: number; readonly rules: readonly RuleOptions[] | undefined; readonly args: readonly unknown[] }
          | undefined;
        /** Set when a concurrency rule leased units: `settle` ends the lease. */
        readonly lease: { readonly keys: Keys; readonly leaseId: string; readonly rules: readonly RuleOptions[] | undefined } | undefined;
      }
    | {
        readonly kind: 'deny';
        readonly decision: Decision;
        readonly headers: (readonly [name: string, value: string])[];
        readonly reports: readonly PolicyReport[];
        readonly status: number;
        /** Whether the adapter answers with the custom `handler` (rate-limit denials when one is set), else with body and contentType. */
        readonly custom: boolean;
        readonly body: string;
        readonly contentType: string;
      };
}

/** What the flow decided about a request (`RateLimitFlow.Outcome`). */
export type Outcome = RateLimitFlow.Outcome;
type Denial = RateLimitFlow.Denial;

/**
 * What the limiters of a request reported, in the order they decided
 * (stacked limiters' headers are merged), kept on the request object itself
 * under a key of this module's own. Not a WeakMap: one entry per request made
 * every request pay for the collector's ephemeron work, about 1 µs.
 */
const REPORTS: unique symbol = Symbol('floodgate: reports of this request');
type Reported = { [REPORTS]?: PolicyReport[] };
/** The same for a request object nothing can be added to (frozen, sealed). */
const reportsOfSealed = new WeakMap<object, PolicyReport[]>();

const SKIP: Outcome = Object.freeze({ kind: 'skip' });
const DONE: Promise<void> = Promise.resolve();
const STORE_DOWN_MESSAGE = 'Service unavailable: the rate limiter cannot reach its store.';
const FORBIDDEN_MESSAGE = 'Forbidden';

/** The decision a deny-listed request gets: never admitted, no store asked. */
const DENY_LISTED: Decision = Object.freeze({
  allowed: false,
  limit: 0,
  remaining: 0,
  resetMs: 0,
  retryAfterMs: Number.POSITIVE_INFINITY,
  delayMs: 0,
  rule: 'deny-list',
  rules: [],
}) as Decision;

/**
 * Parses an adapter's options once and returns the request flow. Adapters
 * call it with how to read a request (`defaultKey`, usually `keyBy.ip()`)
 * and the names of their own extra options.
 */
export function createRateLimitFlow<Args extends unknown[], Handler>(
  options: RateLimitOptions<Args, Handler>,
  adapter: {
    name: string;
    defaultKey: () => KeyFunction<Args>;
    /** Puts the decision where the framework's users look for it (req.rateLimit, ctx.state.rateLimit, c.set). */
    expose: (decision: Decision, ...args: Args) => void;
    /** The client address as the framework sees it, for allow and deny lists. */
    clientIp: (...args: Args) => string | undefined;
    /** The object that is the same for every middleware of one request (the request, Koa's ctx, Hono's c). @defaultValue the first argument */
    request?: (...args: Args) => object;
    extraKeys?: readonly string[];
    /** A request header (lower-case name), as the key extractors read it: for the setup warnings. */
    header?: (name: string, ...args: Args) => string | readonly string[] | undefined;
    /** How far the framework trusts X-Forwarded-For for this request; undefined when the adapter cannot tell (the proxy warnings are skipped). */
    trust?: (...args: Args) => ProxyTrust | undefined;
  },
): RateLimitFlow<Args, Handler> {
  const config = parseFlowOptions<Args, Handler>(options as RateLimitOptions<Args, Handler> & Record<string, unknown>, adapter);
  const { call, denied, allowed, validate, skipSuccessfulRequests, skipFailedRequests, settle } = config;
  const { limiter, skip, headersMode } = call;
  const refunds = skipSuccessfulRequests || skipFailedRequests || settle !== undefined;
  const requestOf = adapter.request ?? ((...args: Args) => args[0] as object);

  /**
   * A request, top to bottom. `yield* wait(x)` is x once it is there: the
   * flow goes on synchronously while callbacks and the store answer at once
   * (later.ts), and waits only for a value that is a promise.
   */
  function* decide(args: Args): Generator<Later<unknown>, Later<Outcome>, unknown> {
    if (skip !== undefined && (yield* wait(skip(...args)))) return SKIP;
    if (denied !== undefined && (yield* wait(denied(adapter.clientIp(...args), args)))) return denyListed(args);
    if (allowed !== undefined && (yield* wait(allowed(adapter.clientIp(...args), args)))) return SKIP;

    // Key (seen by the setup warnings), cost, rules, consume: the call flow's steps.
    const verdict = yield* decideCall(call, args, validate);
    const { decision, keys, cost, rules } = verdict;
    adapter.expose(decision, ...args);

    let { report } = verdict;
    if (headersMode === 'draft-10' && decision.storeError === undefined) report = { ...report, partitionKeys: yield* wait(partitionKeys(report.rules, keys)) };
    const reports = reportOn(requestOf(...args), report);

    if (verdict.kind === 'deny') return denial(args, decision, reports);
    const taken = refunds && decision.allowed && decision.storeError === undefined ? { keys, cost, rules, args } : undefined;
    const lease = decision.leaseId === undefined ? undefined : { keys, leaseId: decision.leaseId, rules };
    const outcome: Outcome = { kind: 'pass', decision, headers: rateLimitHeaders(reports, headersMode, undefined), reports, taken, lease };
    if (decision.allowed && decision.delayMs > 0) yield* wait(sleep(decision.delayMs));
    return outcome;
  }

  const denyListed = (args: Args): Outcome => {
    adapter.expose(DENY_LISTED, ...args);
    return { kind: 'deny', decision: DENY_LISTED, headers: [], reports: [], status: 403, custom: false, ...render(FORBIDDEN_MESSAGE) };
  };

  const denial = async (args: Args, decision: Decision, reports: readonly PolicyReport[]): Promise<Outcome> => {
    const storeDown = decision.storeError !== undefined && isUnmeasured(decision);
    const status = storeDown ? 503 : config.statusCode;
    const headers = rateLimitHeaders(reports, headersMode, status);
    const { message } = config;
    if (config.handler !== undefined) {
      const rules = reports[reports.length - 1]?.rules ?? limiter.rules;
      const windowMs = (rules.find((rule) => rule.name === decision.rule) ?? rules[0])?.windowMs ?? 0;
      const denial: Denial = { ...decision, statusCode: status, message: storeDown ? STORE_DOWN_MESSAGE : message, windowMs };
      return { kind: 'deny', decision: denial, headers, reports, status, custom: true, body: '', contentType: '' };
    }
    let rendered = config.staticBody;
    if (rendered === undefined) {
      const written = storeDown ? STORE_DOWN_MESSAGE : typeof message === 'function' ? await message(...args) : message;
      if (config.problemDetails) {
        const given =
          written === DEFAULT_MESSAGE || storeDown
            ? {}
            : typeof written === 'string'
              ? { detail: written }
              : { extensions: written as Record<string, unknown> };
        rendered = problemResponse(reports, status, written === undefined ? {} : given);
      } else rendered = render(written ?? DEFAULT_MESSAGE);
    } else if (storeDown) rendered = render(STORE_DOWN_MESSAGE);
    return { kind: 'deny', decision, headers, reports, status, custom: false, ...rendered };
  };

  const runNow = (args: Args): Later<Outcome> => drive(decide(args));

  return {
    limiter,
    handler: config.handler,
    runNow,

    run(args) {
      try {
        const outcome = runNow(args);
        return isPromise(outcome) ? outcome : Promise.resolve(outcome);
      } catch (error) {
        return Promise.reject(error);
      }
    },

    headersOf(outcome) {
      if (outcome.kind === 'skip') return [];
      return rateLimitHeaders(outcome.reports, headersMode, outcome.kind === 'deny' ? outcome.status : undefined);
    },

    mustSettle(outcome) {
      return outcome.kind === 'pass' && (outcome.lease !== undefined || outcome.taken !== undefined);
    },

    settle(outcome, status, ...after) {
      if (outcome.kind !== 'pass') return DONE;
      // release() and refund() report store failures through the limiter's 'error' event and never reject for them.
      const { lease, taken } = outcome;
      const released = lease === undefined ? DONE : releaseLease(limiter, lease.keys, lease.leaseId, lease.rules);
      if (taken === undefined) return released;
      const failed = status === undefined || status >= 400;
      let settled = DONE;
      // A request skipSuccessfulRequests or skipFailedRequests gives back costs nothing: there is nothing to settle.
      if ((failed && skipFailedRequests) || (!failed && skipSuccessfulRequests)) {
        settled = limiter.refund(taken.keys, taken.rules ? { cost: taken.cost, rules: taken.rules } : { cost: taken.cost }).catch(() => {});
      } else if (settle !== undefined) {
        const args = (after.length === 0 ? taken.args : [...taken.args, ...after]) as Args;
        settled = settleTaken(limiter, taken, () => settle(args));
      }
      return released === DONE ? settled : Promise.all([released, settled]).then(() => {});
    },
  };
}

/** The reports of a request so far, `report` added: on the request object itself (see REPORTS). */
function reportOn(request: unknown, report: PolicyReport): readonly PolicyReport[] {
  if (typeof request !== 'object' || request === null) return [report];
  const reported = request as Reported;
  let reports = reported[REPORTS];
  if (reports === undefined) {
    if (Object.isExtensible(request)) {
      reports = [];
      reported[REPORTS] = reports;
    } else {
      reports = reportsOfSealed.get(request) ?? [];
      reportsOfSealed.set(request, reports);
    }
  }
  reports.push(report);
  return reports;
}

/**
 * For adapters whose framework tells by a hook when a request's handler is
 * done (Fastify's `onSend`, a NestJS interceptor), rather than by the Node
 * response alone: the promise `settleWhenDone` takes as `handler`.
 */
export function handlerSignals(): {
  /** The status the request's handler answers with, once it is done; rejects when it failed. */
  wait(request: object): Promise<number>;
  /** Tells every limit of the request that waits (stacked ones too), once: the status, or `undefined` when the handler failed. */
  done(request: object, status: number | undefined): void;
  /** Whether a limit of the request waits. */
  waiting(request: object): boolean;
} {
  const waiting = new WeakMap<object, (status: number | undefined) => void>();
  return {
    wait: (request) =>
      new Promise<number>((resolve, reject) => {
        const earlier = waiting.get(request); // a stacked limit of the same request
        waiting.set(request, (status) => {
          earlier?.(status);
          if (status === undefined) reject(new Error('the handler failed'));
          else resolve(status);
        });
      }),
    done(request, status) {
      const tell = waiting.get(request);
      waiting.delete(request);
      tell?.(status);
    },
    waiting: (request) => waiting.has(request),
  };
}

/** The part of Node's ServerResponse that `settleWhenDone` needs (no import: core stays runtime-neutral). */
export interface NodeResponse {
  statusCode: number;
  readonly writableFinished: boolean;
  // biome-ignore lint/suspicious/noExplicitAny: Node's end() is overloaded; it is wrapped, never called with arguments of its own here.
  end: (...args: any[]) => unknown;
  once(event: 'finish' | 'close', listener: () => void): unknown;
}

/**
 * For adapters on Node's http server (Express, Koa, Hono on @hono/node-server):
 * calls `flow.settle` once the work of the request is over, that is once both
 *
 * - the handler is done: `handler` settled (frameworks that await their
 *   middleware chain: Koa, Hono), or, without it, the handler ended the
 *   response with `res.end()` (Express); and
 * - the response is done: sent (`finish`) or cut off (`close`).
 *
 * A client that goes away does not end the work: its handler keeps running,
 * so its lease holds until the handler is done, and its units are refunded
 * (skipSuccessfulRequests/skipFailedRequests) by the status the handler
 * answered with, or settled (`settle`) with what it reported, as if the
 * client had stayed. A handler that never ends its response keeps its lease
 * until the lease expires (the rule's windowMs) and is never refunded or
 * settled. `handler` resolves to the status the handler set, and rejects
 * when the handler failed (counted as a failed request).
 */
export function settleWhenDone<Args extends unknown[], Handler>(
  flow: RateLimitFlow<Args, Handler>,
  outcome: RateLimitFlow.Outcome,
  res: NodeResponse,
  handler?: Promise<number>,
): void {
  if (!flow.mustSettle(outcome)) return;
  /** The handler's status once it is done; `undefined` when it failed; `null` while it runs. */
  let handled: number | undefined | null = null;
  let finished = false;
  let closed = false;
  let settled = false;
  const settle = () => {
    if (settled || handled === null || !(finished || closed)) return;
    settled = true;
    flow.settle(outcome, handled === undefined ? undefined : finished ? res.statusCode : handled);
  };
  const handlerDone = (status: number | undefined) => {
    if (handled !== null) return;
    handled = status;
    settle();
  };
  res.once('finish', () => {
    finished = true;
    settle();
  });
  res.once('close', () => {
    closed = true;
    settle();
  });
  if (handler !== undefined) {
    handler.then(handlerDone, () => handlerDone(undefined));
    return;
  }
  // Express: the handler is done when it ends the response, whether or not the client is still there to read it.
  const end = res.end;
  res.end = function endAndSettle(this: unknown, ...args: unknown[]) {
    res.end = end;
    handlerDone(res.statusCode);
    return end.apply(this, args);
  };
}
