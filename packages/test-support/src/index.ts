export { type AdapterUnderTest, adapterContract, held, type Options, type Route, type Running } from './adapter-contract.js';
export { serveHttp } from './http.js';
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
export { type CapturedWarning, captureWarnings } from './warnings.js';
