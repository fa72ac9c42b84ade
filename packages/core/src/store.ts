/**
 * @packageDocumentation
 * The store API: what a store implements, and what it may use. A store over
 * a transactional key-value system (SQL, Durable Objects, DynamoDB, Deno KV)
 * extends `KeyValueStore` with a backend of one method, `transact`, and the
 * engine does the rest; a store that runs code of its own where the data is
 * (Redis and its Lua library) implements `Store` itself and may use the
 * engine and the state encoding. Stable: see docs/writing-a-store.md, and
 * prove a store with `storeContract()` from `@floodgate/core/testing`.
 * Here too: the shapes of the Redis clients `RedisStore` and
 * `RedisRuleSource` take (ioredis, node-redis, @upstash/redis), for code that
 * wraps or fakes one.
 */
export type { Block } from './algorithms/block.js';
export { type LeaseState, type LogState, type RuleState, stateSizeOf, type Verdict } from './algorithms/index.js';
export { decodeEntry, encodeEntry, STATE_VERSION } from './codec.js';
export { type Call, decisionsOf, type Entry, endOf, evaluate, type Operation, type Outcome } from './engine.js';
export type { RuleSourceClient, RuleSourceSubscriber } from './rule-source.js';
export { type CompiledRule, compileRule, optionsOf } from './rules.js';
export {
  type KeyValueBackend,
  KeyValueStore,
  type KeyValueStoreOptions,
  type StateChange,
  type StateWrite,
} from './stores/key-value-store.js';
export { byCodePoints } from './stores/memory-records.js';
export type { IoRedisLike, IoRedisPipeline, NodeRedisLike, UpstashLike } from './stores/redis-store.js';
export type { Awaitable, BlockedInfo, RuleDecision, RuleSet, Store, StoreKeys, StoreRecords } from './stores/types.js';
export { VersionedBackend, type VersionedDatabase, type VersionedRead, type VersionedWrite } from './stores/versioned-backend.js';
