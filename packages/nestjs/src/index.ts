/**
 * @packageDocumentation
 * Floodgate for NestJS 10+ on Express and Fastify: `FloodgateModule.forRoot()`
 * installs a global guard; `@RateLimit()` and `@SkipRateLimit()` adjust it per
 * controller or route, gateway or resolver; a denial is a `RateLimitedException`
 * on HTTP routes, a `WsException` in gateways and a `GraphQLError` in resolvers.
 */
export { createLimiter, type Decision, FloodgateError, type Limiter, MemoryStore, type RuleOptions } from '@floodgate/core';
export type { RateLimitDenial, WsRateLimitDenial } from './answers.js';
export { type CallType, callOf, type NestCall } from './contexts.js';
export { RateLimitedException } from './guard.js';
export { type FloodgateAsyncOptions, FloodgateModule, RateLimit, SkipRateLimit } from './module.js';
export {
  keyBy,
  type NestArgs,
  type NestHandler,
  type NestKeyBy,
  type NestRateLimitOptions,
  type NestRequest,
  type UserKeyOptions,
} from './options.js';
