/*
 * One shape over the Redis clients Floodgate drives: what the store needs to
 * call its library and load it, and nothing else. ioredis (`Redis`,
 * `Cluster`) is the first-class client; node-redis v4+ (`createClient()`,
 * `createCluster()`) works too, and so does @upstash/redis (Redis over HTTP,
 * for runtimes that cannot keep a TCP connection). Clients are read by shape,
 * not imported: they are peer dependencies, and core runs where none is
 * installed.
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
  /** Commands sent in one write, their replies in order as [error, reply] (absent on a Cluster's older versions: no batching). */
  pipeline?(): IoRedisPipeline;
  /** Set on a connection: 'ready', 'reconnecting', ... */
  status?: string;
  /** ioredis' Cluster: true. */
  isCluster?: boolean;
  /** ioredis' Cluster: its nodes. */
  nodes?(role: 'master'): IoRedisLike[];
}

/** An ioredis pipeline: the commands the store batches. */
export interface IoRedisPipeline {
  fcall(name: string, numKeys: number, ...keysAndArgs: string[]): unknown;
  fcall_ro(name: string, numKeys: number, ...keysAndArgs: string[]): unknown;
  exec(): Promise<[Error | null, unknown][] | null>;
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

/**
 * @upstash/redis (`new Redis({ url, token })`): every command is one HTTP
 * request to the REST API (or several commands one request, when the client
 * pipelines them automatically, its default).
 */
export interface UpstashLike {
  evalsha(sha: string, keys: string[], args: string[]): Reply;
  eval(script: string, keys: string[], args: string[]): Reply;
  scriptLoad(script: string): Reply;
  evalshaRo?(sha: string, keys: string[], args: string[]): Reply;
  evalRo?(script: string, keys: string[], args: string[]): Reply;
  /** Redis Functions, from @upstash/redis 1.36 on; without them the store runs the library as a script. */
  readonly functions?: {
    call(name: string, keys: string[], args: string[]): Reply;
    callRo(name: string, keys: string[], args: string[]): Reply;
    load(args: { code: string; replace: boolean }): Reply;
  };
}

/** A Redis client Floodgate can run its library with. */
export type RedisClient = IoRedisLike | NodeRedisLike | UpstashLike;

/** What RedisStore needs from a client. */
export interface Connection {
  /** Whether keys of different Cluster slots must go to separate calls. */
  readonly cluster: boolean;
  /** Whether the client can call Redis Functions at all (false: the store runs the library as a script from the first call). */
  readonly functions: boolean;
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

/** A library call waiting for the end of the event loop's turn, to go out with the others of that turn. */
interface Queued {
  readonly name: string;
  readonly readOnly: boolean;
  readonly keys: string[];
  readonly args: string[];
  resolve(reply: unknown): void;
  reject(error: unknown): void;
}

/** Runs `run` once the I/O callbacks of the event loop's current turn are done (Node's check phase). */
const setImmediateOf = (globalThis as { setImmediate?: (run: () => void) => unknown }).setImmediate;
const afterThisTurn: (run: () => void) => void = typeof setImmediateOf === 'function' ? (run) => setImmediateOf(run) : (run) => setTimeout(run, 0); // ioredis runs on Node and Bun: the fallback is for types only

/** Settles queued calls from a pipeline's replies, in order. */
function settle(queued: readonly Queued[], results: [Error | null, unknown][] | null): void {
  for (let i = 0; i < queued.length; i++) {
    const q = queued[i] as Queued;
    const result = results?.[i];
    if (result === undefined) q.reject(new Error('ioredis answered the pipeline without this command'));
    else if (result[0] !== null) q.reject(result[0]);
    else q.resolve(result[1]);
  }
}

/**
 * Calls per pipeline: a full one goes out at once, so that Redis works on it while the
 * turn makes the next (64 calls in flight on loopback: 16 beat one pipeline per turn,
 * whose calls Redis only starts once the turn is over).
 */
const BATCH = 16;

/** FCALL or FCALL_RO on a client or a pipeline. */
function fcallOn<R>(
  target: { fcall(name: string, numKeys: number, ...keysAndArgs: string[]): R; fcall_ro(name: string, numKeys: number, ...keysAndArgs: string[]): R },
  name: string,
  readOnly: boolean,
  keys: string[],
  args: string[],
): R {
  return readOnly ? target.fcall_ro(name, keys.length, ...keys, ...args) : target.fcall(name, keys.length, ...keys, ...args);
}

function ioredis(client: IoRedisLike): Connection {
  const offline = () => (typeof client.status === 'string' && disconnected.has(client.status) ? `status '${client.status}'` : undefined);
  const send = (name: string, readOnly: boolean, keys: string[], args: string[]): Reply => fcallOn(client, name, readOnly, keys, args);
  // The calls of one turn of the event loop (the requests of every socket that was ready) share
  // writes: the first goes out at once, the others in pipelines of BATCH, the last when the turn's
  // I/O callbacks are done. ioredis writes each command on its own, and each write is a system
  // call that costs more than all the rest of a call, on both ends. A Cluster's pipeline must keep
  // to one slot: calls there go out one by one.
  const pipeline = client.isCluster !== true && typeof client.pipeline === 'function' ? client.pipeline.bind(client) : undefined;
  let turn: Queued[] | undefined;
  const sendQueued = (queued: Queued[]): void => {
    const failed = (error: unknown) => {
      for (const q of queued) q.reject(error);
    };
    // The client lost its connection since: sent now, the calls would wait in its offline queue.
    const why = offline();
    if (why !== undefined) {
      failed(new FloodgateError(ErrorCodes.STORE_UNAVAILABLE, `The Redis client is not connected (${why}).`));
      return;
    }
    // Run from setImmediate, a throw would reach no caller (and crash the process): every call is answered.
    try {
      if (queued.length === 1) {
        const only = queued[0] as Queued;
        send(only.name, only.readOnly, only.keys, only.args).then(only.resolve, only.reject);
        return;
      }
      const batch = (pipeline as () => IoRedisPipeline)();
      for (const q of queued) fcallOn(batch, q.name, q.readOnly, q.keys, q.args);
      batch.exec().then((results) => settle(queued, results), failed);
    } catch (error) {
      failed(error);
    }
  };
  const endTurn = (): void => {
    const queued = turn as Queued[];
    turn = undefined;
    if (queued.length > 0) sendQueued(queued);
  };
  return {
    cluster: client.isCluster === true,
    functions: true,
    offline,
    fcall(name, readOnly, keys, args) {
      if (pipeline === undefined) return send(name, readOnly, keys, args);
      if (turn === undefined) {
        turn = [];
        afterThisTurn(endTurn);
        return send(name, readOnly, keys, args);
      }
      const queued = turn;
      return new Promise((resolve, reject) => {
        queued.push({ name, readOnly, keys, args, resolve, reject });
        // A full batch goes out at once: Redis starts on it while this turn makes the next.
        if (queued.length === BATCH) {
          turn = [];
          sendQueued(queued);
        }
      });
    },
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
    functions: true,
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

/**
 * The server's own words in an @upstash/redis error: the client wraps them as
 * `<message>, command was: <the whole command>` (with `Command failed: ` in
 * front when it pipelined the command). The store reads replies by their
 * first words (NOSCRIPT, a missing function, the library's FG_ errors), and
 * an EVAL's command holds the whole library: the message is cut back to what
 * Redis said, the client's error kept as the cause.
 */
function serverError(error: unknown): unknown {
  if (!(error instanceof Error)) return error;
  const said = /^(?:Command failed: |Command \d+ \[ \S+ \] failed: )?([\s\S]*?)(?:, command was: [\s\S]*)?$/.exec(error.message)?.[1];
  if (said === undefined || said === error.message) return error;
  const plain = new Error(said, { cause: error });
  plain.name = error.name;
  return plain;
}

const plainly = (reply: Reply): Reply =>
  reply.catch((error: unknown) => {
    throw serverError(error);
  });

function upstash(client: UpstashLike): Connection {
  // A getter on the client (and a new proxy each time, when it pipelines): read once.
  const functions = client.functions;
  const callable = typeof functions?.call === 'function' && typeof functions.callRo === 'function' && typeof functions.load === 'function';
  return {
    cluster: false,
    functions: callable,
    // No connection to lose: every call is a request of its own, bounded by the limiter's timeoutMs.
    offline: () => undefined,
    fcall(name, readOnly, keys, args) {
      if (functions === undefined || !callable) return Promise.reject(new Error('ERR unknown command: this @upstash/redis client has no functions API'));
      return plainly(readOnly ? functions.callRo(name, keys, args) : functions.call(name, keys, args));
    },
    evaluate(script, sha, readOnly, keys, args) {
      if (sha) return plainly(readOnly && client.evalshaRo ? client.evalshaRo(script.sha1, keys, args) : client.evalsha(script.sha1, keys, args));
      return plainly(readOnly && client.evalRo ? client.evalRo(script.source, keys, args) : client.eval(script.source, keys, args));
    },
    async loadLibrary(code) {
      if (functions === undefined || !callable) throw new Error('ERR unknown command: this @upstash/redis client has no functions API');
      await plainly(functions.load({ code, replace: true }));
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
  const rest = client as Partial<UpstashLike> | null;
  if (typeof rest?.evalsha === 'function' && typeof rest.eval === 'function' && typeof rest.scriptLoad === 'function') return upstash(rest as UpstashLike);
  throw new FloodgateError(
    ErrorCodes.OPTION,
    `RedisStore client must be an ioredis client or Cluster, a node-redis v4+ client or cluster, or an @upstash/redis client, got ${describe(client)}.`,
  );
}
