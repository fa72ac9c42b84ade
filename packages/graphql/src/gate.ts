/*
 * Options turned once into what an operation needs (core's call flow: the
 * limiter, how to key, cost and skip it; the message of a denial), and the
 * verdict on one operation: what useRateLimit() and apolloRateLimit() share.
 * They differ only in how they stop an operation and answer over HTTP.
 */
import { type Decision, ErrorCodes, FloodgateError, isFloodgateError, type Keys, type Limiter, type LimiterOptions } from '@floodgate/core';
import { type CallFlow, createCallFlow, type HeadersMode } from '@floodgate/core/adapter';
import { type DocumentNode, type GraphQLError, type GraphQLSchema, getOperationAST } from 'graphql';
import { type ComplexityOptions, operationComplexity, weighingOf } from './complexity.js';
import { DEFAULT_MESSAGE, denialError, failureError, statusOf } from './errors.js';
import { defaultKey, type GraphQLArgs, type OperationArgs, type OperationType } from './keys.js';

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

/** The message option checked once: the message of a denial, the default text when the function gives none or fails. */
export function compileMessage<A>(message: unknown, of: string): (arg: A) => Promise<string> {
  if (message !== undefined && typeof message !== 'string' && typeof message !== 'function') {
    throw new FloodgateError(ErrorCodes.OPTION, `message must be a string or a function of the ${of}, got ${typeof message}.`);
  }
  if (typeof message !== 'function') return () => Promise.resolve(message ?? DEFAULT_MESSAGE);
  return async (arg) => {
    try {
      return (await (message as (arg: A) => string | Promise<string>)(arg)) ?? DEFAULT_MESSAGE;
    } catch {
      return DEFAULT_MESSAGE; // a message function that fails still leaves a denial to send
    }
  };
}

/** Options turned once into what an operation needs. */
export interface Configuration {
  /** Skip, key, cost and the limiter: the verdict on an operation. */
  readonly flow: CallFlow<GraphQLArgs>;
  readonly messageOf: (operation: OperationArgs) => Promise<string>;
}

export function parseOptions(options: OperationLimitOptions, where: string): Configuration {
  const { cost, complexity, message } = (options ?? {}) as OperationLimitOptions;
  let costOption = cost;
  if (cost === 'complexity') {
    const weighing = complexity ?? {};
    weighingOf(weighing); // checked now
    costOption = (operation) => operationComplexity(operation, weighing);
  } else if (complexity !== undefined) {
    throw new FloodgateError(ErrorCodes.OPTION, "complexity weighs operations for cost: 'complexity'; set that cost too.");
  }
  const messageOf = compileMessage<OperationArgs>(message, 'operation');
  const flow = createCallFlow<GraphQLArgs>({ ...options, cost: costOption } as CallFlow.Options<GraphQLArgs>, {
    where,
    defaultKey: () => defaultKey,
    extraKeys: ['complexity', 'message'],
    unsupported: HTTP_ONLY,
  });
  checkScopes(flow.limiter, options.key, where);
  return { flow, messageOf };
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

/** What was decided about an operation: the call flow's verdict (a denial with its message), or a failure (a bad key or cost). */
export type Verdict =
  | { readonly kind: 'skip' }
  | ({ readonly kind: 'pass' } & CallFlow.Decided)
  | ({ readonly kind: 'deny'; readonly message: string } & CallFlow.Decided)
  | { readonly kind: 'fail'; readonly error: FloodgateError };

/** The verdict on one operation (or field), a shaping delay waited out. A bad key or cost is a `fail`, never a throw. */
export async function decide<A>(flow: CallFlow<[A]>, messageOf: (arg: A) => Promise<string>, arg: A): Promise<Verdict> {
  let verdict: CallFlow.Verdict;
  try {
    verdict = await flow.decide([arg]);
  } catch (error) {
    if (isFloodgateError(error)) return { kind: 'fail', error };
    throw error; // the skip function's, or a bug: the server's to report
  }
  return verdict.kind === 'deny' ? { ...verdict, message: await messageOf(arg) } : verdict;
}

/**
 * The error of a verdict that stops the operation, with `http` (status 429, 503 or 500) for
 * servers that answer over HTTP from it.
 */
export const errorOf = (verdict: Extract<Verdict, { kind: 'deny' | 'fail' }>, http: boolean): GraphQLError =>
  verdict.kind === 'fail'
    ? failureError(verdict.error, http ? { status: 500 } : undefined)
    : denialError(verdict.decision, verdict.message, http ? { status: statusOf(verdict.decision) } : undefined);

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
