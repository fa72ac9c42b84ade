/**
 * @packageDocumentation
 * Floodgate core: rate-limiting algorithms behind one limiter, the memory and
 * Redis stores, and the errors and types users meet. What framework adapters
 * need is in `@floodgate/core/adapter`; building blocks for tests, tools and
 * other stores are in `@floodgate/core/internal` (no stability promise).
 */
export type { Decision } from './decision.js';
export { type RateLimitedCallOptions, type RateLimitedDecorator, type RateLimitedOptions, rateLimited } from './decorators.js';
export { type ErrorCode, ErrorCodes, FloodgateError, isFloodgateError } from './errors.js';
export type { HeadersMode } from './http/headers.js';
export type { ForwardedForOptions, HeaderKeyOptions, IpKeyOptions, KeyBy, KeyFunction } from './http/keys.js';
export { FloodgateWarning, type ValidateOptions, type ValidationName, type WarningCode, WarningCodes } from './http/validate.js';
export { type Keys, MAX_KEY_BYTES } from './keys.js';
export { type ConsumeOptions, createLimiter, type Limiter, type LimiterEvents, type PeekOptions, type StoreOperation } from './limiter.js';
export type { InsuranceLimiter, LimiterOptions, StoreErrorPolicy } from './options.js';
export { RateLimitedError } from './rate-limited-error.js';
export {
  RedisRuleSource,
  type RedisRuleSourceOptions,
  type RuleSourceClient,
  type RuleSourceSubscriber,
} from './rule-source.js';
export { type AlgorithmName, algorithms, type CompiledRule, type RuleOptions } from './rules.js';
export { MemoryStore, type MemoryStoreOptions } from './stores/memory-store.js';
export type { Reply } from './stores/redis/connection.js';
export {
  type IoRedisLike,
  type IoRedisPipeline,
  type NodeRedisLike,
  type RedisClient,
  RedisStore,
  type RedisStoreOptions,
  type UpstashLike,
} from './stores/redis-store.js';
export type { Awaitable, BlockedInfo, RuleDecision, RuleSet, Store, StoreKeys } from './stores/types.js';
export type { WaitOptions } from './wait.js';
export type { PerCall, RateLimitedFunction, WrapOptions } from './wrap.js';
