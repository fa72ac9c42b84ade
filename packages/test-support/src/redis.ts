/*
 * Private redis-server processes for tests: each on a free port, on loopback,
 * with nothing persisted, stopped by PID. Tests never touch a Redis they did
 * not start (the machine's own 6379 included).
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';

const run = promisify(execFile);

/** A port nobody listens on right now. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export interface RedisServer {
  port: number;
  pid: number;
  /** Stops the server (SIGKILL unless told otherwise) and waits for the process to end. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Freezes the process (SIGSTOP): connections stay open, nothing answers. */
  pause(): void;
  /** Thaws a frozen process (SIGCONT). */
  resume(): void;
  /** A new ioredis client to this server. */
  client(options?: RedisOptions): Redis;
}

async function waitForPing(port: number, deadline: number): Promise<void> {
  for (;;) {
    try {
      const { stdout } = await run('redis-cli', ['-p', String(port), 'ping'], { timeout: 2000 });
      if (stdout.trim() === 'PONG') return;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not start`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((resolve) => child.once('exit', () => resolve()));
}

/** Starts a private redis-server; `extra` adds config arguments (e.g. cluster mode); `configFile` comes first if given. */
export async function startRedis(extra: string[] = [], port?: number, configFile?: string): Promise<RedisServer> {
  for (let attempt = 0; ; attempt++) {
    const chosen = port ?? (await freePort());
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-redis-'));
    const base = ['--port', String(chosen), '--bind', '127.0.0.1', '--protected-mode', 'no'];
    const args = configFile ? [configFile, ...base, ...extra] : [...base, '--save', '', '--appendonly', 'no', '--dir', dir, ...extra];
    const child = spawn('redis-server', args, { stdio: 'ignore' });
    const died = exited(child).then(() => 'died' as const);
    try {
      const outcome = await Promise.race([waitForPing(chosen, Date.now() + 10_000).then(() => 'up' as const), died]);
      if (outcome === 'died') throw new Error(`redis-server exited while starting on port ${chosen}`);
    } catch (error) {
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
      if (attempt < 3 && port === undefined) continue; // the port was taken in between: try another
      throw error;
    }
    const clients: Redis[] = [];
    return {
      port: chosen,
      pid: child.pid as number,
      async stop(signal = 'SIGKILL') {
        for (const c of clients) c.disconnect();
        child.kill(signal);
        await exited(child);
        rmSync(dir, { recursive: true, force: true });
      },
      pause() {
        child.kill('SIGSTOP');
      },
      resume() {
        child.kill('SIGCONT');
      },
      client(options) {
        const c = new Redis({ port: chosen, host: '127.0.0.1', lazyConnect: false, ...options });
        clients.push(c);
        return c;
      },
    };
  }
}

export interface RedisSentinelSetup {
  master: RedisServer;
  replica: RedisServer;
  sentinel: RedisServer;
  /** The name the sentinel monitors the master under. */
  name: string;
  /** An ioredis client that follows the sentinel to whichever server is master. */
  client(options?: RedisOptions): Redis;
  stop(): Promise<void>;
}

/**
 * A master, a replica and one sentinel (quorum 1) that promotes the replica
 * within about a second of the master going down.
 */
export async function startSentinelSetup(): Promise<RedisSentinelSetup> {
  const name = 'floodgate';
  const master = await startRedis();
  const replica = await startRedis(['--replicaof', '127.0.0.1', String(master.port)]);
  // Wait until the replica has synced: a failover before that would lose everything.
  const deadline = Date.now() + 15_000;
  for (;;) {
    const { stdout } = await run('redis-cli', ['-p', String(master.port), 'info', 'replication']);
    if (/slave0:.*state=online/.test(stdout)) break;
    if (Date.now() > deadline) throw new Error('the replica did not sync');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const sentinelPort = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-sentinel-'));
  const config = join(dir, 'sentinel.conf');
  writeFileSync(
    config,
    [
      `port ${sentinelPort}`,
      'bind 127.0.0.1',
      `dir ${dir}`,
      `sentinel monitor ${name} 127.0.0.1 ${master.port} 1`,
      `sentinel down-after-milliseconds ${name} 500`,
      `sentinel failover-timeout ${name} 3000`,
      `sentinel parallel-syncs ${name} 1`,
      '',
    ].join('\n'),
  );
  const sentinel = await startRedis(['--sentinel'], sentinelPort, config);
  const clients: Redis[] = [];
  return {
    master,
    replica,
    sentinel,
    name,
    client(options) {
      const c = new Redis({ sentinels: [{ host: '127.0.0.1', port: sentinelPort }], name, ...options });
      clients.push(c);
      return c;
    },
    async stop() {
      for (const c of clients) c.disconnect();
      await Promise.all([master.stop(), replica.stop(), sentinel.stop()]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface RedisClusterServers {
  ports: number[];
  /** Every node: masters first, then replicas. */
  nodes: RedisServer[];
  client(): Cluster;
  /** A new, empty master joined to the cluster (no slots yet). */
  addMaster(): Promise<RedisServer>;
  /** Moves `count` slots from every other master to `to` (redis-cli --cluster reshard), keys included. */
  moveSlotsTo(to: RedisServer, count: number): Promise<void>;
  /** Waits until every live node says cluster_state:ok. */
  ready(): Promise<void>;
  stop(): Promise<void>;
}

const clusterNode = (extra: string[] = []) =>
  startRedis(['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '1000', ...extra]);

async function alive(port: number): Promise<boolean> {
  return run('redis-cli', ['-p', String(port), 'ping'], { timeout: 2000 }).then(
    ({ stdout }) => stdout.trim() === 'PONG',
    () => false,
  );
}

async function nodeId(port: number): Promise<string> {
  const { stdout } = await run('redis-cli', ['-p', String(port), 'cluster', 'myid']);
  return stdout.trim();
}

/** Three masters joined with `redis-cli --cluster create`; `replicas` replicas each (default none). */
export async function startCluster(options: { replicas?: number } = {}): Promise<RedisClusterServers> {
  const replicas = options.replicas ?? 0;
  const nodes: RedisServer[] = [];
  for (let i = 0; i < 3 * (1 + replicas); i++) nodes.push(await clusterNode());
  const ports = nodes.map((n) => n.port);
  await run('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', String(replicas), '--cluster-yes'], {
    timeout: 60_000,
  });
  const ready = async () => {
    const deadline = Date.now() + 30_000;
    for (const node of nodes) {
      for (;;) {
        if (!(await alive(node.port))) break; // stopped on purpose
        const { stdout } = await run('redis-cli', ['-p', String(node.port), 'cluster', 'info']).catch(() => ({ stdout: '' }));
        if (stdout.includes('cluster_state:ok')) break;
        if (Date.now() > deadline) throw new Error('the cluster did not become ready');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  };
  await ready();
  const clients: Cluster[] = [];
  return {
    ports,
    nodes,
    client() {
      const c = new Cluster(
        ports.map((port) => ({ host: '127.0.0.1', port })),
        { redisOptions: { maxRetriesPerRequest: 2 } },
      );
      c.on('error', () => {}); // a node killed on purpose; the calls report it
      clients.push(c);
      return c;
    },
    async addMaster() {
      const node = await clusterNode();
      nodes.push(node);
      await run('redis-cli', ['--cluster', 'add-node', `127.0.0.1:${node.port}`, `127.0.0.1:${ports[0]}`], { timeout: 30_000 });
      await ready();
      return node;
    },
    async moveSlotsTo(to, count) {
      const target = await nodeId(to.port);
      for (const node of nodes.slice(0, 3)) {
        if (!(await alive(node.port))) continue;
        const source = await nodeId(node.port);
        await run(
          'redis-cli',
          ['--cluster', 'reshard', `127.0.0.1:${to.port}`, '--cluster-from', source, '--cluster-to', target, '--cluster-slots', String(count), '--cluster-yes'],
          { timeout: 60_000 },
        );
      }
      await ready();
    },
    ready,
    async stop() {
      for (const c of clients) c.disconnect();
      await Promise.all(nodes.map((n) => n.stop()));
    },
  };
}

/**
 * A private redis-server for the test file that calls this: started before
 * its tests, stopped (by PID) after them.
 *
 * @example
 * ```ts
 * const redis = useRedisServer();
 * it('...', async () => { await redis.client.ping(); });
 * ```
 */
export function useRedisServer(): { readonly server: RedisServer; readonly client: Redis } {
  let server: RedisServer | undefined;
  let client: Redis | undefined;
  beforeAll(async () => {
    server = await startRedis();
    client = server.client();
  });
  afterAll(async () => {
    await server?.stop();
  });
  return {
    get server() {
      if (server === undefined) throw new Error('useRedisServer(): the server starts in beforeAll');
      return server;
    },
    get client() {
      if (client === undefined) throw new Error('useRedisServer(): the client exists from beforeAll on');
      return client;
    },
  };
}
