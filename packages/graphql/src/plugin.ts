/*
 * useRateLimit(): an Envelop plugin, which GraphQL Yoga 5 takes as it is.
 * Every operation is decided before it runs (onExecute for queries and
 * mutations, onSubscribe for subscriptions: once, when they start). Over
 * Yoga's HTTP, a denied operation's error carries `extensions.http` (Yoga
 * answers 429 or 503 from it and strips it), and onResponse writes the
 * rate-limit headers of every operation the response answers.
 */
import type { Limiter } from '@floodgate/core';
import type { ExecutionResult, GraphQLError } from 'graphql';
import { decide, type ExecutionArgsLike, errorOf, type OperationLimitOptions, operationOf, parseOptions, remember, type Verdict } from './gate.js';
import { addReport, headersOf } from './headers.js';

/** What Envelop hands `onExecute` and `onSubscribe`. */
export interface OperationHookPayload<TResult> {
  readonly args: ExecutionArgsLike;
  setResultAndStopExecution(result: TResult): void;
}

/** What Envelop hands `onExecuteDone` and `onSubscribeResult`. */
export interface OperationResultPayload {
  readonly result: ExecutionResult | AsyncIterable<ExecutionResult>;
  setResult(result: ExecutionResult | AsyncIterableIterator<ExecutionResult>): void;
}

/**
 * The plugin `useRateLimit()` returns: Envelop's `onExecute` and `onSubscribe`, and Yoga's
 * `onResponse` (ignored by servers that are not Yoga).
 */
export interface RateLimitPlugin {
  /** The limiter that decides operations: listen to its events here. */
  readonly limiter: Limiter;
  onExecute(payload: OperationHookPayload<ExecutionResult>): Promise<undefined | { onExecuteDone(payload: OperationResultPayload): void }>;
  onSubscribe(
    payload: OperationHookPayload<ExecutionResult | AsyncIterableIterator<ExecutionResult>>,
  ): Promise<undefined | { onSubscribeResult(payload: OperationResultPayload): void }>;
  onResponse(payload: { readonly request: Request; readonly response: Response }): void;
}

/** Yoga's fetch Request in the context: the operation came over HTTP, and its response is one per request. */
function requestOf(context: unknown): object | undefined {
  const request = typeof context === 'object' && context !== null ? (context as { request?: unknown }).request : undefined;
  const headers = typeof request === 'object' && request !== null ? (request as { headers?: { get?: unknown } }).headers : undefined;
  return typeof headers?.get === 'function' ? (request as object) : undefined;
}

const isAsyncIterable = (value: unknown): value is AsyncIterable<ExecutionResult> =>
  typeof value === 'object' && value !== null && typeof (value as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function';

/**
 * The stream of a subscription (or an incremental result), calling `release` once when it ends:
 * done, failed, or ended by the subscriber. An iterator of its own, not an async generator: a
 * generator waiting for the next event would queue return() until that event came, and hold
 * the lease (and the source) that long after the subscriber left.
 */
function releasing(stream: AsyncIterable<ExecutionResult>, release: () => void): AsyncIterableIterator<ExecutionResult> {
  const source = stream[Symbol.asyncIterator]();
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    release();
  };
  return {
    [Symbol.asyncIterator]() {
      return this;
    },
    async next() {
      try {
        const result = await source.next();
        if (result.done === true) end();
        return result;
      } catch (error) {
        end();
        throw error;
      }
    },
    async return(value?: unknown) {
      end();
      return (await source.return?.(value)) ?? { done: true, value: undefined };
    },
    async throw(error?: unknown) {
      end();
      if (source.throw !== undefined) return source.throw(error);
      throw error;
    },
  };
}

/**
 * A subscription refused before it started, for transports without an HTTP response to carry
 * a status (graphql-ws): a stream that fails at once, which graphql-ws sends as its `error`
 * message (with the error's extensions).
 */
// biome-ignore lint/correctness/useYield: it fails before it yields, which is the point
async function* refused(error: GraphQLError): AsyncGenerator<ExecutionResult, void> {
  throw error;
}

/**
 * Rate limiting for GraphQL operations: an Envelop plugin, for GraphQL Yoga 5 (`plugins`) or
 * `envelop()`. Each operation is keyed (the client address of `context.req` by default),
 * costed (1, a function, or `'complexity'`) and decided before it runs; subscriptions when
 * they start. A denied operation gets one error, `extensions: { code: 'RATE_LIMITED',
 * retryAfterMs, rule }`, and over Yoga's HTTP status 429 with `Retry-After` and the
 * rate-limit headers (every response that answers a limited operation carries those).
 *
 * @example
 * ```ts
 * import { createServer } from 'node:http';
 * import { createSchema, createYoga } from 'graphql-yoga';
 * import { useRateLimit } from '@floodgate/graphql';
 *
 * const schema = createSchema({ typeDefs: 'type Query { hello: String }', resolvers: { Query: { hello: () => 'world' } } });
 * const yoga = createYoga({ schema, plugins: [useRateLimit({ limit: 100, windowMs: 60_000, cost: 'complexity' })] });
 * createServer(yoga).listen(4000);
 * ```
 */
// biome-ignore lint/suspicious/noExplicitAny: the server's context type is the app's (see PerOperation)
export function useRateLimit<TContext = any>(options: OperationLimitOptions<TContext>): RateLimitPlugin {
  const { flow, messageOf } = parseOptions(options as OperationLimitOptions, "@floodgate/graphql's useRateLimit()");
  const { limiter } = flow;

  /** Decides; reports to the response when the operation came over HTTP; stops it when denied. undefined when it goes on. */
  async function gate(args: ExecutionArgsLike, stop: (error: GraphQLError, http: boolean) => void): Promise<Verdict | undefined> {
    const operation = operationOf(args);
    if (operation === undefined) return undefined; // execution refuses a document without that operation
    const verdict = await decide(flow, messageOf, operation);
    const request = requestOf(args.contextValue);
    if (verdict.kind === 'pass' || verdict.kind === 'deny') {
      if (request !== undefined) addReport(request, limiter, verdict.keys, verdict.report);
      remember(args.contextValue, verdict.decision);
    }
    if (verdict.kind === 'deny' || verdict.kind === 'fail') {
      stop(errorOf(verdict, request !== undefined), request !== undefined);
      return undefined;
    }
    return verdict;
  }

  /** Ends a concurrency lease, if the decision took one. */
  const releaser = (verdict: Verdict | undefined): (() => void) | undefined =>
    verdict?.kind === 'pass' && verdict.decision.leaseId !== undefined ? () => void flow.settle(verdict) : undefined;

  const untilDone = (release: () => void) => (payload: OperationResultPayload) => {
    if (isAsyncIterable(payload.result)) payload.setResult(releasing(payload.result, release));
    else release();
  };

  return {
    limiter,
    async onExecute({ args, setResultAndStopExecution }) {
      const release = releaser(await gate(args, (error) => setResultAndStopExecution({ errors: [error] })));
      if (release !== undefined) return { onExecuteDone: untilDone(release) };
    },
    async onSubscribe({ args, setResultAndStopExecution }) {
      const stop = (error: GraphQLError, http: boolean) => setResultAndStopExecution(http ? { errors: [error] } : refused(error));
      const release = releaser(await gate(args, stop));
      if (release !== undefined) return { onSubscribeResult: untilDone(release) };
    },
    onResponse({ request, response }) {
      for (const [name, value] of headersOf(request)) response.headers.set(name, value);
    },
  };
}
