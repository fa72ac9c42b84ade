/**
 * @packageDocumentation
 * `apolloRateLimit(options)`: the same per-operation limits as `useRateLimit()`, as an Apollo
 * Server 4 plugin. `@floodgate/graphql/apollo` is a subpath of its own, so that Yoga users
 * never load Apollo's types.
 */
import type { ApolloServerPlugin, BaseContext, GraphQLRequestListener } from '@apollo/server';
import type { Limiter } from '@floodgate/core';
import { getOperationAST } from 'graphql';
import { decide, errorOf, type OperationLimitOptions, parseOptions, remember } from './gate.js';
import { addReport, headersOf } from './headers.js';
import type { OperationType } from './keys.js';

/** The plugin `apolloRateLimit()` returns, with the limiter that decides operations (listen to its events there). */
export type ApolloRateLimitPlugin<TContext extends BaseContext> = ApolloServerPlugin<TContext> & { readonly limiter: Limiter };

/**
 * Rate limiting for Apollo Server 4 operations: each operation is keyed, costed and decided
 * once Apollo knows which operation it is (`didResolveOperation`), before it runs. A denial
 * answers HTTP 429 (503 when the store failed closed) with `Retry-After` and one error,
 * `extensions: { code: 'RATE_LIMITED', retryAfterMs, rule }`; every response that answers a
 * limited operation carries the rate-limit headers. The default key, the client address,
 * reads `context.req`: return the request from your context function.
 *
 * @example
 * ```ts
 * import { ApolloServer } from '@apollo/server';
 * import { startStandaloneServer } from '@apollo/server/standalone';
 * import { apolloRateLimit } from '@floodgate/graphql/apollo';
 *
 * const server = new ApolloServer({
 *   typeDefs: 'type Query { hello: String }',
 *   resolvers: { Query: { hello: () => 'world' } },
 *   plugins: [apolloRateLimit({ limit: 100, windowMs: 60_000, cost: 'complexity' })],
 * });
 * await startStandaloneServer(server, { context: async ({ req }) => ({ req }) });
 * ```
 */
export function apolloRateLimit<TContext extends BaseContext = BaseContext>(options: OperationLimitOptions<TContext>): ApolloRateLimitPlugin<TContext> {
  const { flow, messageOf } = parseOptions(options as OperationLimitOptions, "@floodgate/graphql's apolloRateLimit()");
  const { limiter } = flow;
  return {
    limiter,
    async requestDidStart(): Promise<GraphQLRequestListener<TContext>> {
      let release: (() => void) | undefined;
      return {
        async didResolveOperation(request) {
          const operation = request.operation ?? getOperationAST(request.document, request.operationName);
          if (operation === null || operation === undefined) return;
          const verdict = await decide(flow, messageOf, {
            context: request.contextValue,
            operationName: operation.name?.value,
            operationType: operation.operation as OperationType,
            document: request.document,
            variables: request.request.variables ?? {},
            schema: request.schema,
          });
          if (verdict.kind === 'pass' || verdict.kind === 'deny') {
            addReport(request.response, limiter, verdict.keys, verdict.report);
            remember(request.contextValue, verdict.decision);
          }
          // Apollo answers with the status of the error's extensions.http, and strips it.
          if (verdict.kind === 'deny' || verdict.kind === 'fail') throw errorOf(verdict, true);
          if (verdict.kind === 'pass' && verdict.decision.leaseId !== undefined) release = () => void flow.settle(verdict);
        },
        async willSendResponse({ response }) {
          for (const [name, value] of headersOf(response)) response.http.headers.set(name.toLowerCase(), value);
          release?.();
        },
      };
    },
  };
}
