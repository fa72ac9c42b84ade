import { isPromise } from '../awaitable.js';
import type { Decision } from '../decision.js';
import { describe, ErrorCodes, FloodgateError, orDefault } from '../errors.js';
import { createLimiter, isUnmeasured, type Limiter } from '../limiter.js';
import { adapterOptionNames, type LimiterOptions, limiterOptionNames, rejectUnknownKeys } from '../options.js';
import { type Header, type HeadersMode, headersModes, rateLimitHeaders } from './headers.js';
import type { KeyFunction } from './keys.js';
import { type AccessList, compileAccessList } from './lists.js';
import { createValidations, type ValidateOptions, type ValidationFacts } from './validate.js';

/** A denial body: a string (sent as text), an object (sent as JSON), or a function of the request. */
export type Message<Args extends unknown[]> = string | object | ((...args: Args) => string | object | Promise<string | object>);

/**
 * The options every adapter's `rateLimit()` takes: everything `createLimiter`
 * takes (or `limiter`, to share one), plus how to read and answer requests.
 * `Args` is what the framework hands a middleware (`[req, res]`, `[ctx]`,
 * `[c]`); `Handler` is the adapter's denial handler type.
 */
export interface RateLimitOptions<Args extends unknown[], Handler> extends LimiterOptions {
  /** A limiter to use instead of creating one: share it between routes. Not together with limiter options. */
  limiter?: Limiter;
  /** The key a request is limited under. @defaultValue keyBy.ip() */
  key?: KeyFunction<Args>;
  /** Units a request takes: a positive integer, or a function of the request. @defaultValue 1 */
  cost?: number | ((...args: Args) => number | Promise<number>);
  /** Requests for which this returns true are not limited at all. */
  skip?: (...args: Args) => boolean | Promise<boolean>;
  /** Status of a denial. @defaultValue 429 */
  statusCode?: number;
  /** Body of a denial. @defaultValue 'Too many requests, please try again later.' */
  message?: Message<Args>;
  /** Full control of the denial response (headers are already set). */
  handler?: Handler;
  /** Which rate-limit headers to send. @defaultValue 'legacy' */
  headers?: HeadersMode;
  /** Give the units back when the response status is < 400. */
  skipSuccessfulRequests?: boolean;
  /** Give the units back when the response status is >= 400 or the response failed. */
  skipFailedRequests?: boolean;
  /** Decide, set headers and emit events, but never deny: a dark launch. */
  shadow?: boolean;
  /** Requests from these IP addresses/CIDR ranges (or for which the function is true) are never limited. */
  allowList?: AccessList<Args>;
  /** Requests from these IP addresses/CIDR ranges (or for which the function is true) get 403 without a store call. */
  denyList?: AccessList<Args>;
  /**
   * Warnings about the setup, each at most once: X-Forwarded-For while no proxy is trusted,
   * every proxy trusted, one key for most requests, a proxy header entry that is no address.
   * `false` turns them off, `{ singleKey: false }` one of them. @defaultValue true
   */
  validate?: ValidateOptions;
}

/** What the flow decided about a request; the adapter turns it into a response. */
export type Outcome =
  | { readonly kind: 'skip' }
  | {
      readonly kind: 'pass';
      readonly decision: Decision;
      readonly headers: Header[];
      /** Set when units were taken, so that `settle` can give them back. */
      readonly taken: { readonly key: string; readonly cost: number } | undefined;
      /** Set when a concurrency rule leased units: `settle` ends the lease. */
      readonly lease: { readonly key: string; readonly leaseId: string } | undefined;
    }
  | {
      readonly kind: 'deny';
      readonly decision: Decision;
      readonly headers: Header[];
      readonly status: number;
      /** Whether the adapter answers with the custom `handler` (rate-limit denials when one is set), else with body and contentType. */
      readonly custom: boolean;
      readonly body: string;
      readonly contentType: string;
    };

/** The framework-neutral request flow behind every adapter. */
export interface RateLimitFlow<Args extends unknown[], Handler> {
  readonly limiter: Limiter;
  /** The custom denial handler, if any. */
  readonly handler: Handler | undefined;
  /** Whether `settle` has work to do for this outcome: a refund to decide or a lease to end. */
  mustSettle(outcome: Outcome): boolean;
  /**
   * Runs skip, key, cost and the limiter, and waits out a shaping delay.
   * Rejects with a FloodgateError (status 500) for a bad key or cost, which
   * the adapter passes to the framework's error path.
   */
  run(args: Args): Promise<Outcome>;
  /** Tells the flow how the response ended (`undefined`: it failed or was cut off): ends leases, refunds as configured. */
  settle(outcome: Outcome, status: number | undefined): void;
}

const DEFAULT_MESSAGE = 'Too many requests, please try again later.';
const SKIP: Outcome = Object.freeze({ kind: 'skip' });
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

function checkFunction(value: unknown, name: string): void {
  if (value !== undefined && typeof value !== 'function') {
    throw new FloodgateError(ErrorCodes.OPTION, `${name} must be a function, got ${describe(value)}.`);
  }
}

function checkBoolean(value: unknown, name: string): void {
  if (value !== undefined && typeof value !== 'boolean') {
    throw new FloodgateError(ErrorCodes.OPTION, `${name} must be true or false, got ${describe(value)}.`);
  }
}

function checkCost(cost: unknown): number {
  if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 1) {
    throw new FloodgateError(ErrorCodes.COST, `cost must be a positive integer, got ${describe(cost)}.`);
  }
  return cost;
}

function checkKey(key: unknown): string {
  if (typeof key !== 'string' || key.length === 0) {
    throw new FloodgateError(ErrorCodes.KEY, `The key function returned ${describe(key)}; it must return a non-empty string.`);
  }
  return key;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function render(message: string | object): { body: string; contentType: string } {
  return typeof message === 'string'
    ? { body: message, contentType: 'text/plain; charset=utf-8' }
    : { body: JSON.stringify(message), contentType: 'application/json; charset=utf-8' };
}

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
    extraKeys?: readonly string[];
  } & ValidationFacts<Args>,
): RateLimitFlow<Args, Handler> {
  const where = `${adapter.name}'s rateLimit()`;
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new FloodgateError(ErrorCodes.OPTION, `${where} takes an options object like { limit: 100, windowMs: 60_000 }, got ${describe(options)}.`);
  }
  rejectUnknownKeys(options, new Set<string>([...adapterOptionNames, ...limiterOptionNames, ...(adapter.extraKeys ?? [])]), where);

  const limiterOptions: Record<string, unknown> = {};
  for (const name of Object.keys(options)) {
    if (limiterOptionNames.has(name)) limiterOptions[name] = options[name as keyof typeof options];
  }
  let limiter: Limiter;
  if (options.limiter !== undefined) {
    const given = Object.keys(limiterOptions);
    if (given.length > 0) {
      throw new FloodgateError(
        ErrorCodes.OPTION,
        `${where} got both 'limiter' and ${given.map((k) => `'${k}'`).join(', ')}; set those on the shared limiter instead.`,
      );
    }
    if (typeof options.limiter !== 'object' || options.limiter === null || typeof options.limiter.consume !== 'function') {
      throw new FloodgateError(ErrorCodes.OPTION, `limiter must be a limiter from createLimiter(), got ${describe(options.limiter)}.`);
    }
    limiter = options.limiter;
  } else {
    limiter = createLimiter(limiterOptions as LimiterOptions);
  }

  checkFunction(options.key, 'key');
  checkFunction(options.skip, 'skip');
  checkFunction(options.handler, 'handler');
  checkBoolean(options.skipSuccessfulRequests, 'skipSuccessfulRequests');
  checkBoolean(options.skipFailedRequests, 'skipFailedRequests');
  checkBoolean(options.shadow, 'shadow');
  if (typeof options.cost !== 'function' && options.cost !== undefined) checkCost(options.cost);
  const statusCode = orDefault(options.statusCode, 429);
  if (!Number.isInteger(statusCode) || statusCode < 400 || statusCode > 599) {
    throw new FloodgateError(ErrorCodes.OPTION, `statusCode must be an HTTP error status (400-599), got ${describe(options.statusCode)}.`);
  }
  const headersMode = orDefault<HeadersMode>(options.headers, 'legacy');
  if (!headersModes.includes(headersMode)) {
    throw new FloodgateError(ErrorCodes.OPTION, `headers must be 'legacy', 'draft-8', 'both' or false, got ${describe(options.headers)}.`);
  }
  const message = orDefault<Message<Args>>(options.message, DEFAULT_MESSAGE);
  if (typeof message !== 'string' && typeof message !== 'function' && (typeof message !== 'object' || message === null)) {
    throw new FloodgateError(ErrorCodes.OPTION, `message must be a string, an object (sent as JSON) or a function, got ${describe(options.message)}.`);
  }

  const key = options.key === undefined ? adapter.defaultKey() : options.key;
  const cost = orDefault<NonNullable<typeof options.cost>>(options.cost, 1);
  const { skip, shadow = false, skipSuccessfulRequests = false, skipFailedRequests = false } = options;
  const staticBody = typeof message === 'function' ? undefined : render(message);
  const denied = compileAccessList<Args>(options.denyList, 'denyList');
  const allowed = compileAccessList<Args>(options.allowList, 'allowList');
  const validate = createValidations<Args>(options.validate, key, adapter);
  return {
    limiter,
    handler: options.handler,

    // Callbacks usually answer synchronously: each is awaited only when it returned a promise,
    // so that a request does not pay a microtask turn per option it does not use.
    async run(args) {
      if (skip !== undefined) {
        const skipped = skip(...args);
        if (isPromise(skipped) ? await skipped : skipped) return SKIP;
      }
      if (denied !== undefined) {
        const listed = denied(adapter.clientIp(...args), args);
        if (isPromise(listed) ? await listed : listed) {
          adapter.expose(DENY_LISTED, ...args);
          return { kind: 'deny', decision: DENY_LISTED, headers: [], status: 403, custom: false, ...render(FORBIDDEN_MESSAGE) };
        }
      }
      if (allowed !== undefined) {
        const listed = allowed(adapter.clientIp(...args), args);
        if (isPromise(listed) ? await listed : listed) return SKIP;
      }
      const keyed = key(...args);
      const id = checkKey(isPromise(keyed) ? await keyed : keyed);
      if (validate !== undefined) validate(args, id);
      let units = 1;
      if (typeof cost === 'number') units = cost;
      else {
        const costed = cost(...args);
        units = checkCost(isPromise(costed) ? await costed : costed);
      }
      // The time the decision is about: X-RateLimit-Reset is this plus resetMs, whatever happens after.
      const decidedAt = limiter.now();
      const decision = await limiter.consume(id, units === 1 ? undefined : { cost: units });
      adapter.expose(decision, ...args);

      if (decision.allowed || shadow) {
        if (decision.allowed && decision.delayMs > 0) await sleep(decision.delayMs);
        const taken = decision.allowed && decision.storeError === undefined ? { key: id, cost: units } : undefined;
        const lease = decision.leaseId === undefined ? undefined : { key: id, leaseId: decision.leaseId };
        return { kind: 'pass', decision, headers: rateLimitHeaders(decision, headersMode, limiter.rules, decidedAt, undefined), taken, lease };
      }

      const storeDown = decision.storeError !== undefined && isUnmeasured(decision);
      const status = storeDown ? 503 : statusCode;
      const headers = rateLimitHeaders(decision, headersMode, limiter.rules, decidedAt, status);
      if (options.handler !== undefined) return { kind: 'deny', decision, headers, status, custom: true, body: '', contentType: '' };
      const rendered = storeDown ? render(STORE_DOWN_MESSAGE) : (staticBody ?? render(await (message as (...a: Args) => string | object)(...args)));
      return { kind: 'deny', decision, headers, status, custom: false, ...rendered };
    },

    mustSettle(outcome) {
      return outcome.kind === 'pass' && (outcome.lease !== undefined || (outcome.taken !== undefined && (skipSuccessfulRequests || skipFailedRequests)));
    },

    settle(outcome, status) {
      if (outcome.kind !== 'pass') return;
      // release() and refund() report store failures through the limiter's 'error' event and never reject for them.
      if (outcome.lease !== undefined) limiter.release(outcome.lease.key, outcome.lease.leaseId).catch(() => {});
      if (outcome.taken === undefined) return;
      const failed = status === undefined || status >= 400;
      if ((failed && skipFailedRequests) || (!failed && skipSuccessfulRequests)) {
        limiter.refund(outcome.taken.key, { cost: outcome.taken.cost }).catch(() => {});
      }
    },
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
 * answered with, as if the client had stayed. A handler that never ends its
 * response keeps its lease until the lease expires (the rule's windowMs) and
 * is never refunded. `handler` resolves to the status the handler set, and
 * rejects when the handler failed (counted as a failed request).
 */
export function settleWhenDone<Args extends unknown[], Handler>(
  flow: RateLimitFlow<Args, Handler>,
  outcome: Outcome,
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
