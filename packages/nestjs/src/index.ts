/**
 * @packageDocumentation
 * Floodgate for NestJS 10+ on Express and Fastify: `FloodgateModule.forRoot()`
 * installs a global guard; `@RateLimit()` and `@SkipRateLimit()` adjust it per
 * controller or route; a denial is a `RateLimitedException` that your
 * exception filters see.
 */
export { createLimiter, type Decision, FloodgateError, type Limiter, MemoryStore, type RuleOptions } from '@floodgate/core';
export { RateLimitedException } from './guard.js';
export { type FloodgateAsyncOptions, FloodgateModule, RateLimit, SkipRateLimit } from './module.js';
export { keyBy, type NestArgs, type NestHandler, type NestRateLimitOptions, type NestRequest } from './options.js';
