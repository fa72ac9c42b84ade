export { type AdapterUnderTest, adapterContract, held, type Options, type Route, type Running } from './adapter-contract.js';
export {
  type DurableObjectStoreOptionsLike,
  type RemoteStore,
  type RuleDecisionLike,
  type RuleSetLike,
  remoteStore,
  useDurableObjectStores,
} from './durable-objects.js';
export { serveHttp } from './http.js';
export { type MariaDbServer, type MySqlDatabase, startMariaDb, useMySql } from './mysql.js';
export { node22 } from './node22.js';
export { type PostgresSchema, type PostgresServer, startPostgres, usePostgres } from './postgres.js';
export {
  freePort,
  type RedisClusterServers,
  type RedisSentinelSetup,
  type RedisServer,
  startCluster,
  startRedis,
  startSentinelSetup,
  useRedisServer,
} from './redis.js';
export { type BridgeRequest, type RestBridge, startRestBridge, useRestBridge } from './upstash.js';
export { type CapturedWarning, captureWarnings } from './warnings.js';
export { launch, startWorkerd, useWorkerd, type Workerd, type WorkerdOptions, waitFor } from './workerd.js';
