/*
 * A private redis-server for one benchmark (test-support's startRedis: a free
 * loopback port, nothing persisted), which is killed with the harness if the
 * benchmark never gets to stop it (deadline, Ctrl-C).
 */
import { type RedisServer, startRedis } from '@floodgate/test-support';
import { adopt } from './child.js';

export type BenchRedis = Pick<RedisServer, 'port' | 'pid' | 'client' | 'stop'>;

export async function startBenchRedis(): Promise<BenchRedis> {
  const server = await startRedis();
  const release = adopt(server.pid);
  return {
    port: server.port,
    pid: server.pid,
    client: (options) => server.client(options),
    async stop(signal) {
      await server.stop(signal);
      release();
    },
  };
}
