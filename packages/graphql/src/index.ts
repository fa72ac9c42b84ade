/**
 * @packageDocumentation
 * Floodgate rate limiting for GraphQL: `useRateLimit(options)`, an Envelop plugin for GraphQL
 * Yoga 5 that limits whole operations (by count or by query complexity, subscriptions when
 * they start), and `rateLimitDirective()`, a `@rateLimit` schema directive that limits fields
 * one by one. Denials are GraphQL errors with `extensions.code: 'RATE_LIMITED'` and
 * `extensions.retryAfterMs`. Apollo Server 4: `@floodgate/graphql/apollo`.
 */
export {
  createLimiter,
  type Decision,
  FloodgateError,
  type Keys,
  type Limiter,
  MemoryStore,
  RedisStore,
  type RuleOptions,
} from '@floodgate/core';
export { type ComplexityInput, type ComplexityOptions, operationComplexity } from './complexity.js';
export { type FieldArgs, type PerField, type RateLimitDirective, type RateLimitDirectiveOptions, rateLimitDirective } from './directive.js';
export type { RateLimitExtensions } from './errors.js';
export { type ExecutionArgsLike, getRateLimit, type KeyOption, type OperationLimitOptions, type PerOperation } from './gate.js';
export { type GraphQLArgs, keyBy, type OperationArgs, type OperationType } from './keys.js';
export { type OperationHookPayload, type OperationResultPayload, type RateLimitPlugin, useRateLimit } from './plugin.js';
