/**
 * @packageDocumentation
 * Floodgate core: rate-limiting algorithms behind one limiter, the memory and
 * Redis stores, and the errors and types users meet. What framework adapters
 * need is in `@floodgate/core/adapter`; what a store implements and may use,
 * and the shapes of the Redis clients the Redis store takes, in
 * `@floodgate/core/store`; the store contract in `@floodgate/core/testing`.
 */
export type { Decision } from './decision.js';
export { type RateLimitedDecorator, rateLimited } from './decorators.js';
export { type ErrorCode, ErrorCodes, FloodgateError, isFloodgateError } from './errors.js';
export type { KeyBy, KeyFunction } from './http/keys.js';
export { FloodgateWarning, type WarningCode, WarningCodes } from './http/validate.js';
export type { Keys } from './keys.js';
export { type ConsumeOptions, createLimiter, type Limiter, type LimiterEvents, type PeekOptions } from './limiter.js';
export type { LimiterOptions } from './options.js';
export { RateLimitedError } from './rate-limited-error.js';
export { RedisRuleSource, type RedisRuleSourceOptions } from './rule-source.js';
export { type AlgorithmName, algorithms, type RuleOptions } from './rules.js';
export { MemoryStore, type MemoryStoreOptions } from './stores/memory-store.js';
export { type RedisClient, RedisStore, type RedisStoreOptions } from './stores/redis-store.js';
export type { BlockedInfo, RuleDecision, Store } from './stores/types.js';
export type { WaitOptions } from './wait.js';
export type { WrapOptions } from './wrap.js';
