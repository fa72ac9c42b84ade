/*
 * One shape over the Redis clients Floodgate drives: what the store needs to
 * call its library and load it, and nothing else. ioredis (`Redis`,
 * `Cluster`) is the first-class client; node-redis v4+ (`createClient()`,
 * `createCluster()`) works too. Clients are read by shape, not imported:
 * they are peer dependencies, and core runs where neither is installed.
 */
import { describe, ErrorCodes, FloodgateError } from '../../errors.js';
import type { LuaScript } from './library.js';

/** What a client answers a command with. */
export type Reply = Promise<unknown>;

/** ioredis `Redis` and `Cluster`. */
export interface IoRedisLike {
  fcall(name: string, numKeys: number, ...keysAndArgs: string[]): Reply;
  fcall_ro(name: string, numKeys: number, ...keysAndArgs: string[]): Reply;
  evalsha(sha: string, numKeys: number, ...keysAndArgs: string[]): Reply;
  evalsha_ro(sha: string, numKeys: number, ...keysAndArgs: string[]): Reply;
  eval(script: string, numKeys: number, ...keysAndArgs: string[]): Reply;
  eval_ro(script: string, numKeys: number, ...keysAndArgs: string[]): Reply;
  function(subcommand: 'LOAD', replace: 'REPLACE', code: string): Reply;
  /** Set on a connection: 'ready', 'reconnecting', ... */
  status?: string;
  /** ioredis' Cluster: true. */
  isCluster?: boolean;
  /** ioredis' Cluster: its nodes. */
  nodes?(role: 'master'): IoRedisLike[];
}

/** node-redis v4+ (`createClient()`, `createCluster()`). */
export interface NodeRedisLike {
  fCall(name: string, options: { keys: string[]; arguments: string[] }): Reply;
  fCallRo(name: string, options: { keys: string[]; arguments: string[] }): Reply;
  evalSha(sha: string, options: { keys: string[]; arguments: string[] }): Reply;
  evalShaRo(sha: string, options: { keys: string[]; arguments: string[] }): Reply;
  eval(script: string, options: { keys: string[]; arguments: string[] }): Reply;
  evalRo(script: string, options: { keys: string[]; arguments: string[] }): Reply;
  functionLoad(code: string, options: { REPLACE: true }): Reply;
  /** False while the client is closed or reconnecting. */
  isReady?: boolean;
  /** node-redis' cluster: its primaries, and a client for each. */
  masters?: unknown[];
  nodeClient?(node: unknown): NodeRedisLike | Promise<NodeRedisLike>;
}

/** A Redis client Floodgate can run its library with. */
export type RedisClient = IoRedisLike | NodeRedisLike;

/** What RedisStore needs from a client. */
export interface Connection {
  /** Whether keys of different Cluster slots must go to separate calls. */
  readonly cluster: boolean;
  /** Why nothing should be sent now (the client is between connections), or undefined. */
  offline(): string | undefined;
  fcall(name: string, readOnly: boolean, keys: string[], args: string[]): Reply;
  /** EVALSHA, or EVAL when `sha` is false (the script is not loaded). */
  evaluate(script: LuaScript, sha: boolean, readOnly: boolean, keys: string[], args: string[]): Reply;
  /** FUNCTION LOAD REPLACE on every node that serves keys: the server, or every primary of a Cluster. */
  loadLibrary(code: string): Promise<void>;
}

/** ioredis client states in which a command would only wait in the offline queue for a connection that is down. */
const disconnected = new Set(['reconnecting', 'close', 'end']);

function ioredis(client: IoRedisLike): Connection {
  return {
    cluster: client.isCluster === true,
    offline: () => (typeof client.status === 'string' && disconnected.has(client.status) ? `status '${client.status}'` : undefined),
    fcall: (name, readOnly, keys, args) =>
      readOnly ? client.fcall_ro(name, keys.length, ...keys, ...args) : client.fcall(name, keys.length, ...keys, ...args),
    evaluate(script, sha, readOnly, keys, args) {
      if (sha) return readOnly ? client.evalsha_ro(script.sha1, keys.length, ...keys, ...args) : client.evalsha(script.sha1, keys.length, ...keys, ...args);
      return readOnly ? client.eval_ro(script.source, keys.length, ...keys, ...args) : client.eval(script.source, keys.length, ...keys, ...args);
    },
    async loadLibrary(code) {
      const nodes = client.isCluster === true && typeof client.nodes === 'function' ? client.nodes('master') : [client];
      await Promise.all(nodes.map((node) => node.function('LOAD', 'REPLACE', code)));
    },
  };
}

function nodeRedis(client: NodeRedisLike): Connection {
  return {
    cluster: Array.isArray(client.masters),
    offline: () => (client.isReady === false ? 'isReady is false' : undefined),
    fcall: (name, readOnly, keys, args) => (readOnly ? client.fCallRo(name, { keys, arguments: args }) : client.fCall(name, { keys, arguments: args })),
    evaluate(script, sha, readOnly, keys, args) {
      const options = { keys, arguments: args };
      if (sha) return readOnly ? client.evalShaRo(script.sha1, options) : client.evalSha(script.sha1, options);
      return readOnly ? client.evalRo(script.source, options) : client.eval(script.source, options);
    },
    async loadLibrary(code) {
      const masters = client.masters;
      if (!Array.isArray(masters) || typeof client.nodeClient !== 'function') {
        await client.functionLoad(code, { REPLACE: true });
        return;
      }
      const nodeClient = client.nodeClient.bind(client);
      await Promise.all(masters.map(async (master) => (await nodeClient(master)).functionLoad(code, { REPLACE: true })));
    },
  };
}

/** The connection over a user's client, or ERR_FG_OPTION when it is not a client Floodgate can drive. */
export function connect(client: unknown): Connection {
  const io = client as Partial<IoRedisLike> | null;
  if (typeof io?.fcall === 'function' && typeof io.evalsha === 'function' && typeof io.function === 'function') return ioredis(io as IoRedisLike);
  const node = client as Partial<NodeRedisLike> | null;
  if (typeof node?.fCall === 'function' && typeof node.evalSha === 'function' && typeof node.functionLoad === 'function')
    return nodeRedis(node as NodeRedisLike);
  throw new FloodgateError(
    ErrorCodes.OPTION,
    `RedisStore client must be an ioredis client or Cluster, or a node-redis v4+ client or cluster, got ${describe(client)}.`,
  );
}
