/**
 * @packageDocumentation
 * Floodgate core: rate-limiting algorithms, stores, the limiter, and the
 * framework-neutral HTTP flow that the Express, Koa and Hono adapters share.
 */
export {
  concurrency,
  createLog,
  fixedWindow,
  gcra,
  type LeaseState,
  type LogState,
  leakyBucket,
  leaseCost,
  type RuleState,
  refundStep,
  type StateVector,
  slidingLog,
  slidingWindow,
  step,
  tokenBucket,
  type VectorAlgorithm,
  type Verdict,
  vectorAlgorithms,
} from './algorithms/index.js';
export { combine, type Decision } from './decision.js';
export { type ErrorCode, ErrorCodes, FloodgateError, isFloodgateError } from './errors.js';
export { draft8Headers, type Header, type HeadersMode, legacyHeaders, rateLimitHeaders, retryAfterSeconds } from './http/headers.js';
export {
  createKeyBy,
  type ForwardedForOptions,
  forwardedAddress,
  type HeaderKeyOptions,
  type IpKeyOptions,
  joinHeader,
  type KeyBy,
  type KeyFunction,
  normalizeIp,
  type RequestReader,
} from './http/keys.js';
export { type AccessList, compileAccessList } from './http/lists.js';
export {
  createRateLimitFlow,
  type FinishingResponse,
  type Message,
  type Outcome,
  type RateLimitFlow,
  type RateLimitOptions,
  settleWhenFinished,
} from './http/middleware.js';
export { type ConsumeOptions, createLimiter, isUnmeasured, type Limiter, type LimiterEvents, MAX_KEY_BYTES, type StoreOperation } from './limiter.js';
export type { InsuranceLimiter, LimiterOptions, StoreErrorPolicy } from './options.js';
export {
  RedisRuleSource,
  type RedisRuleSourceOptions,
  type RuleSourceClient,
  type RuleSourceSubscriber,
} from './rule-source.js';
export { type AlgorithmName, algorithms, type CompiledRule, compileRule, compileRules, type RuleOptions } from './rules.js';
export { type LuaScript, SCRIPTS as REDIS_SCRIPTS } from './stores/lua.generated.js';
export { MemoryStore, type MemoryStoreOptions } from './stores/memory-store.js';
export {
  type IoRedisLike,
  type NodeRedisLike,
  type RedisClient,
  type RedisEvaluation,
  type RedisOperation,
  RedisStore,
  type RedisStoreOptions,
  ruleHorizon,
} from './stores/redis-store.js';
export type { Awaitable, RuleDecision, RuleSet, Store } from './stores/types.js';
