/*
 * Options turned once into what an operation needs (a limiter, how to key,
 * cost and skip it), and the decision on one operation: what useRateLimit()
 * and apolloRateLimit() share. They differ only in how they stop an
 * operation and answer over HTTP.
 */
import { createLimiter, type Decision, ErrorCodes, FloodgateError, isFloodgateError, type Keys, type Limiter, type LimiterOptions } from '@floodgate/core';
import type { HeadersMode, PolicyReport } from '@floodgate/core/adapter';
import { type DocumentNode, type GraphQLError, type GraphQLSchema, getOperationAST } from 'graphql';
import { type ComplexityOptions, operationComplexity, weighingOf } from './complexity.js';
import { DEFAULT_MESSAGE, denialError, failureError, statusOf } from './errors.js';
import { defaultKey, type OperationArgs, type OperationType } from './keys.js';

/** A function of the operation. */
// biome-ignore lint/suspicious/noExplicitAny: the server's context type is the app's; `any` lets callbacks read it without a cast (give TContext to type it)
export type PerOperation<T, TContext = any> = (operation: OperationArgs<TContext>) => T | Promise<T>;

/**
 * The key(s) an operation is limited under: a function (scope `key`; it may also return an
 * object of keys by scope), or one key function per scope the rules use:
 * `{ ip: keyBy.ip(), user: ({ context }) => context.user.id }`.
 */
// biome-ignore lint/suspicious/noExplicitAny: see PerOperation
export type KeyOption<TContext = any> = PerOperation<Keys, TContext> | Readonly<Record<string, PerOperation<string, TContext>>>;

/** Options of `useRateLimit()` and `apolloRateLimit()`: everything `createLimiter` takes (or `limiter`), and how operations are keyed and costed. */
// biome-ignore lint/suspicious/noExplicitAny: see PerOperation
export interface OperationLimitOptions<TContext = any> extends LimiterOptions {
  /** A limiter to use instead of creating one from these options (share one between servers or with other code). */
  limiter?: Limiter;
  /**
   * The key(s) an operation is limited under. @defaultValue the client address of `context.req`
   * (`keyBy.ip()`); a context without one is an `ERR_FG_OPTION` error saying a key is needed.
   */
  key?: KeyOption<TContext>;
  /**
   * Units an operation takes: a positive integer, a function of the operation, or
   * `'complexity'`: `operationComplexity()` of its document, weighed by `complexity`. @defaultValue 1
   */
  cost?: number | 'complexity' | PerOperation<number, TContext>;
  /** How `cost: 'complexity'` weighs an operation (field weights, list arguments, bounds). */
  complexity?: ComplexityOptions;
  /** Operations for which this returns true are not limited. */
  skip?: PerOperation<boolean, TContext>;
  /** Decide, set headers and emit events, but never deny: a dark launch. @defaultValue false */
  shadow?: boolean;
  /**
   * The rate-limit headers of HTTP responses: `'legacy'` (`X-RateLimit-*`), `'draft-6'`,
   * `'draft-7'`, `'draft-8'`, `'draft-10'`, `'both'` (legacy and draft-8), or `false`.
   * `Retry-After` comes with every 429 and 503. @defaultValue 'legacy'
   */
  headers?: HeadersMode;
  /** The message of a denial's error. @defaultValue 'Too many requests, please try again later.' */
  message?: string | PerOperation<string, TContext>;
}

const ADAPTER_OPTIONS = new Set(['limiter', 'key', 'cost', 'complexity', 'skip', 'shadow', 'headers', 'message']);
const HEADERS_MODES: readonly HeadersMode[] = ['legacy', 'draft-6', 'draft-7', 'draft-8', 'draft-10', 'both', false];
/** Options of the HTTP adapters that mean nothing here, with what to do instead. */
const HTTP_ONLY: Readonly<Record<string, string>> = {
  statusCode: 'a denial is a GraphQL error RATE_LIMITED, answered with HTTP 429',
  handler: "read extensions.code in your server's error formatting",
  problemDetails: 'GraphQL answers with its own error shape',
  skipSuccessfulRequests: 'not supported by @floodgate/graphql',
  skipFailedRequests: 'not supported by @floodgate/graphql',
  allowList: 'use skip: ({ context }) => ...',
  denyList: 'refuse the request in a plugin of your own',
  validate: 'the setup warnings are for HTTP adapters',
};

/** Renders a value for an error message. */
export const describe = (value: unknown): string =>
  typeof value === 'string'
    ? JSON.stringify(value)
    : value === null
      ? 'null'
      : typeof value === 'function'
        ? 'a function'
        : typeof value === 'object'
          ? Array.isArray(value)
            ? 'an array'
            : 'an object'
          : String(value);

export function checkCost(cost: unknown): number {
  if (typeof cost === 'number' && Number.isSafeInteger(cost) && cost >= 1) return cost;
  throw new FloodgateError(ErrorCodes.COST, `cost must be a positive integer, got ${describe(cost)}.`);
}

function checkKey(key: unknown, scope?: string): Keys {
  if (typeof key === 'string' ? key.length > 0 : scope === undefined && typeof key === 'object' && key !== null && !Array.isArray(key)) return key as Keys;
  throw new FloodgateError(
    ErrorCodes.KEY,
    scope === undefined
      ? `The key function returned ${describe(key)}; it must return a non-empty string (or an object of keys by scope).`
      : `The key function of scope '${scope}' returned ${describe(key)}; it must return a non-empty string.`,
  );
}

export function checkFunction(value: unknown, name: string): void {
  if (value !== undefined && typeof value !== 'function') throw new FloodgateError(ErrorCodes.OPTION, `${name} must be a function, got ${describe(value)}.`);
}

/** Runs a callback of the user's; what it throws becomes a FloodgateError of `code` that keeps it as `cause`. */
export async function guarded<A, T>(fn: (arg: A) => T | Promise<T>, arg: A, code: 'ERR_FG_KEY' | 'ERR_FG_COST', what: string): Promise<T> {
  try {
    return await fn(arg);
  } catch (error) {
    if (isFloodgateError(error)) throw error;
    const reason = error instanceof Error ? error.message : String(error);
    throw new FloodgateError(code, `The ${what} function threw: ${reason}`, { cause: error });
  }
}

/** The key option checked once: a function of `A` that gives the call's keys. */
export function compileKey<A>(key: unknown, fallback: (arg: A) => string | Promise<string>): (arg: A) => Promise<Keys> {
  if (key === undefined) return async (arg) => checkKey(await fallback(arg));
  if (typeof key === 'function') return async (arg) => checkKey(await guarded(key as (arg: A) => Keys, arg, ErrorCodes.KEY, 'key'));
  const scopes = typeof key === 'object' && key !== null && !Array.isArray(key) ? Object.entries(key) : [];
  if (scopes.length === 0 || scopes.some(([, fn]) => typeof fn !== 'function')) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `key must be a function of the operation, or an object of key functions by scope like { ip: keyBy.ip(), user: ({ context }) => context.user.id }, got ${describe(key)}.`,
    );
  }
  return async (arg) => {
    const keys: Record<string, string> = {};
    for (const [scope, fn] of scopes) keys[scope] = checkKey(await guarded(fn as (arg: A) => string, arg, ErrorCodes.KEY, `key.${scope}`), scope) as string;
    return keys;
  };
}

/** The scopes the default key cannot give: a key option is needed for them, which is known at construction. */
export function checkScopes(limiter: Limiter, key: unknown, where: string): void {
  if (key !== undefined) return;
  const scopes = [...new Set(limiter.rules.map((rule) => rule.scope))].filter((scope) => scope !== 'key' && scope !== 'global');
  if (scopes.length > 0) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `${where}: rules of scope ${scopes.map((s) => `'${s}'`).join(', ')} need a key option that names their keys, like key: { ${scopes[0]}: ({ context }) => ... }; without one, operations are keyed by client address (scope 'key') only.`,
    );
  }
}

/** The limiter of the options: the one given, or one made of the limiter options (never both). */
export function limiterOf(options: Readonly<Record<string, unknown>>, adapterOptions: ReadonlySet<string>, where: string): Limiter {
  const limiterOptions: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(options)) if (!adapterOptions.has(name) && value !== undefined) limiterOptions[name] = value;
  const given = options.limiter as Limiter | undefined;
  if (given === undefined) return createLimiter(limiterOptions as LimiterOptions); // it checks every option it takes, and names the others
  const also = Object.keys(limiterOptions);
  if (also.length > 0) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `${where} got both 'limiter' and ${also.map((n) => `'${n}'`).join(', ')}; set those on the shared limiter instead.`,
    );
  }
  if (typeof given !== 'object' || given === null || typeof given.consume !== 'function') {
    throw new FloodgateError(ErrorCodes.OPTION, `limiter must be a limiter from createLimiter(), got ${describe(given)}.`);
  }
  return given;
}

/** Options turned once into what an operation needs, every default filled in and every value checked. */
export interface Configuration {
  readonly limiter: Limiter;
  readonly keysOf: (operation: OperationArgs) => Promise<Keys>;
  readonly costOf: (operation: OperationArgs) => Promise<number>;
  readonly skip: ((operation: OperationArgs) => boolean | Promise<boolean>) | undefined;
  readonly messageOf: (operation: OperationArgs) => Promise<string>;
  readonly headers: HeadersMode;
  readonly shadow: boolean;
}

export function parseOptions(options: OperationLimitOptions, where: string): Configuration {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new FloodgateError(ErrorCodes.OPTION, `${where} takes an options object like { limit: 100, windowMs: 60_000 }, got ${describe(options)}.`);
  }
  const httpOnly = Object.keys(options).filter((name) => Object.hasOwn(HTTP_ONLY, name));
  if (httpOnly.length > 0) {
    throw new FloodgateError(ErrorCodes.UNKNOWN_OPTION, `${where} has no ${httpOnly.map((name) => `option '${name}' (${HTTP_ONLY[name]})`).join(', no ')}.`);
  }
  const limiter = limiterOf(options as Record<string, unknown>, ADAPTER_OPTIONS, where);
  checkScopes(limiter, options.key, where);
  const { cost, skip, message, headers = 'legacy', shadow = false } = options;

  let costOf: Configuration['costOf'];
  if (cost === 'complexity') {
    const weighing = options.complexity ?? {};
    weighingOf(weighing); // checked now
    costOf = (operation) => Promise.resolve(operationComplexity(operation, weighing));
  } else {
    if (options.complexity !== undefined)
      throw new FloodgateError(ErrorCodes.OPTION, "complexity weighs operations for cost: 'complexity'; set that cost too.");
    if (typeof cost === 'function') costOf = async (operation) => checkCost(await guarded(cost, operation, ErrorCodes.COST, 'cost'));
    else {
      const units = cost === undefined ? 1 : checkCost(cost);
      costOf = () => Promise.resolve(units);
    }
  }
  checkFunction(skip, 'skip');
  if (message !== undefined && typeof message !== 'string' && typeof message !== 'function') {
    throw new FloodgateError(ErrorCodes.OPTION, `message must be a string or a function of the operation, got ${describe(message)}.`);
  }
  const messageOf: Configuration['messageOf'] =
    typeof message === 'function' ? async (operation) => (await message(operation)) ?? DEFAULT_MESSAGE : () => Promise.resolve(message ?? DEFAULT_MESSAGE);
  if (!HEADERS_MODES.includes(headers)) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `headers must be one of ${HEADERS_MODES.map((m) => (m === false ? 'false' : `'${m}'`)).join(', ')}, got ${describe(headers)}.`,
    );
  }
  if (typeof shadow !== 'boolean') throw new FloodgateError(ErrorCodes.OPTION, `shadow must be true or false, got ${describe(shadow)}.`);
  return { limiter, keysOf: compileKey(options.key, defaultKey), costOf, skip, messageOf, headers, shadow };
}

/** What a server hands a plugin about an operation: graphql-js's execution arguments. */
export interface ExecutionArgsLike {
  readonly schema: GraphQLSchema;
  readonly document: DocumentNode;
  readonly contextValue?: unknown;
  readonly variableValues?: { readonly [name: string]: unknown } | null | undefined;
  readonly operationName?: string | null | undefined;
}

/** The operation of execution arguments, or undefined when the document names none that runs (execution refuses it). */
export function operationOf(args: ExecutionArgsLike): OperationArgs | undefined {
  const operation = getOperationAST(args.document, args.operationName);
  if (operation === null || operation === undefined) return undefined;
  return {
    context: args.contextValue,
    operationName: operation.name?.value,
    operationType: operation.operation as OperationType,
    document: args.document,
    variables: args.variableValues ?? {},
    schema: args.schema,
  };
}

/** What was decided about an operation. */
export type Verdict =
  | { readonly kind: 'skip' }
  | { readonly kind: 'pass'; readonly decision: Decision; readonly keys: Keys; readonly report: PolicyReport }
  | {
      readonly kind: 'deny';
      readonly decision: Decision;
      readonly keys: Keys;
      readonly report: PolicyReport;
      readonly status: 429 | 503;
      readonly message: string;
    }
  | { readonly kind: 'fail'; readonly error: FloodgateError };

/** Skip, key, cost, consume: the verdict on one operation. A bad key or cost is a `fail`, never a throw. */
export async function decide(config: Configuration, operation: OperationArgs): Promise<Verdict> {
  const { limiter } = config;
  let keys: Keys;
  let decision: Decision;
  let decidedAt: number;
  try {
    if (config.skip !== undefined && (await config.skip(operation))) return { kind: 'skip' };
    keys = await config.keysOf(operation);
    const cost = await config.costOf(operation);
    // The time the decision is about: X-RateLimit-Reset is this plus resetMs.
    decidedAt = limiter.now();
    decision = await limiter.consume(keys, cost === 1 ? undefined : { cost });
  } catch (error) {
    if (isFloodgateError(error)) return { kind: 'fail', error };
    throw error; // the skip function's, or a bug: the server's to report
  }
  const report: PolicyReport = { decision, rules: limiter.rules, decidedAt, headers: config.headers, shadow: config.shadow };
  if (decision.allowed || config.shadow) return { kind: 'pass', decision, keys, report };
  let message = DEFAULT_MESSAGE;
  try {
    message = await config.messageOf(operation);
  } catch {
    // A message function that fails still leaves a denial to send: with the default text.
  }
  return { kind: 'deny', decision, keys, report, status: statusOf(decision), message };
}

/**
 * The error of a verdict that stops the operation, with `http` (status 429, 503 or 500) for
 * servers that answer over HTTP from it.
 */
export const errorOf = (verdict: Extract<Verdict, { kind: 'deny' | 'fail' }>, http: boolean): GraphQLError =>
  verdict.kind === 'deny'
    ? denialError(verdict.decision, verdict.message, http ? { status: verdict.status } : undefined)
    : failureError(verdict.error, http ? { status: 500 } : undefined);

/** The decision, under a key no context of the app's can clash with; works across copies of this package (its ESM and CJS builds). */
const RATE_LIMIT: unique symbol = Symbol.for('@floodgate/graphql: decision') as never;

/** Keeps the decision on the operation's context, for getRateLimit(). */
export function remember(context: unknown, decision: Decision): void {
  if (typeof context !== 'object' || context === null || Object.isFrozen(context)) return;
  Object.defineProperty(context, RATE_LIMIT, { value: decision, configurable: true, enumerable: false, writable: true });
}

/**
 * The decision `useRateLimit()` (or `apolloRateLimit()`) took about the operation running with
 * this context, for resolvers (undefined when none decided it: skipped, or not rate limited).
 *
 * @example
 * ```ts
 * const resolvers = { Query: { quota: (_: unknown, __: unknown, context: object) => getRateLimit(context)?.remaining } };
 * ```
 */
export function getRateLimit(context: unknown): Decision | undefined {
  return typeof context === 'object' && context !== null ? (context as { [RATE_LIMIT]?: Decision })[RATE_LIMIT] : undefined;
}

/** Waits out a shaping delay (leaky-bucket, mode 'shape'), in steps setTimeout can hold. */
export async function sleep(ms: number): Promise<void> {
  for (let left = ms; left > 0; left -= 2_147_483_647) await new Promise((resolve) => setTimeout(resolve, Math.min(left, 2_147_483_647)));
}
