/**
 * @packageDocumentation
 * Floodgate's building blocks, for its own tests, bench and simulator, and
 * for people writing a store: the pure algorithms and blocks, rule
 * compilation, the decisions a store reports from verdicts, and the Redis
 * library. No stability promise: names here may change in any release.
 */

export { applyBlock, type Block, blockLeft, blockStartedAt, startBlock } from './algorithms/block.js';
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
  releaseStep,
  type StateVector,
  slidingLog,
  slidingWindow,
  stateSizeOf,
  step,
  tokenBucket,
  type VectorAlgorithm,
  type Verdict,
} from './algorithms/index.js';
export { combine } from './decision.js';
export { draft8Headers, legacyHeaders } from './http/headers.js';
export { type Keying, keyingOf, storeKeys } from './keys.js';
export { compileRule, compileRules } from './rules.js';
export { LIBRARY as REDIS_LIBRARY } from './stores/redis/library.generated.js';
export type { LuaScript, RedisLibrary } from './stores/redis/library.js';
export { type RuleView, viewOf } from './stores/redis/views.js';
export { admittedDecision, unchangedDecision } from './stores/rule-decisions.js';
