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
import { LIBRARY } from './library.generated.js';
import type { LuaScript } from './library.js';

/** What a client answers a command with. */
type Reply = Promise<unknown>;

/** ioredis `Redis` and `Cluster`. */
export interface IoRedisLike {
  fcall(name: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  fcall_ro(name: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  evalsha(sha: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  evalsha_ro(sha: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  eval(script: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  eval_ro(script: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  function(subcommand: 'LOAD', replace: 'REPLACE', code: string): Promise<unknown>;
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
  fCall(name: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  fCallRo(name: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  evalSha(sha: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  evalShaRo(sha: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  evalRo(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  functionLoad(code: string, options: { REPLACE: true }): Promise<unknown>;
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
  evalsha(sha: string, keys: string[], args: string[]): Promise<unknown>;
  eval(script: string, keys: string[], args: string[]): Promise<unknown>;
  scriptLoad(script: string): Promise<unknown>;
  evalshaRo?(sha: string, keys: string[], args: string[]): Promise<unknown>;
  evalRo?(script: string, keys: string[], args: string[]): Promise<unknown>;
  /** Redis Functions, from @upstash/redis 1.36 on; without them the store runs the library as a script. */
  readonly functions?: {
    call(name: string, keys: string[], args: string[]): Promise<unknown>;
    callRo(name: string, keys: string[], args: string[]): Promise<unknown>;
    load(args: { code: string; replace: boolean }): Promise<unknown>;
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
const afterThisTurn: (run: () => void) => void = typeof setImmediateOf === 'function' ? (run) => setImmediateOf(run) : (run) => setTimeout(run, 0); // runtimes without setImmediate: Workers, Deno

/**
 * Calls per command: a full batch goes out at once, so that Redis works on it while the turn
 * makes the next (64 calls in flight on loopback: 16 beat one batch per turn, whose calls Redis
 * only starts once the turn is over).
 */
const BATCH = 16;

/**
 * Calls per command over HTTP, where a burst's calls all go in one request (one command each would
 * cost a command's share of JSON and dispatch): bounded, since every call of a command waits for its last.
 */
const UPSTASH_BATCH = 64;

/** How the library's `many` function runs a call of the function `name` ('f' fast, 'w' write), if it runs it at all. */
function kindIn(name: string): 'f' | 'w' | undefined {
  return name === LIBRARY.fast ? 'f' : name === LIBRARY.write ? 'w' : undefined;
}

/**
 * A failure of a whole batch (the `many` command), not of one of its calls: a store failure for
 * each call in it, never a key's state error, even when Redis names the library's function.
 */
export class BatchError extends Error {
  constructor(cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
  }
}

/** Redis refuses keys of several Cluster slots in one command: a server in cluster mode reached by a plain client, or a proxy. */
export const crossSlot = (error: unknown) => error instanceof Error && error.message.startsWith('CROSSSLOT');

/** Whether `replies` holds, for each of `count` calls in turn, the label `<tag>:<n>` and a call's reply (an array, or an error's text). */
function labelled(replies: unknown, tag: string, count: number): replies is unknown[] {
  if (!Array.isArray(replies) || replies.length !== 2 * count) return false;
  for (let i = 0; i < count; i++) {
    const reply: unknown = replies[2 * i + 1];
    if (replies[2 * i] !== `${tag}:${i + 1}` || !(Array.isArray(reply) || typeof reply === 'string')) return false;
  }
  return true;
}

/**
 * Settles the calls sent together with `many` (tagged `tag`): one labelled reply each, an array, or a
 * string (the call failed, with that error).
 */
function settleMany(queued: readonly Queued[], replies: unknown, tag: string): void {
  if (!labelled(replies, tag, queued.length)) {
    // Not ERR_FG_STORE_REPLY, which blames the keys' state (and resets it): the server or a proxy
    // before it does not speak the library's protocol (or gave a call another's reply), a store
    // failure like any other.
    const error = new BatchError(
      `Redis answered ${queued.length} calls of the library's many function with ${describe(replies)}, not one reply per call, each labelled as it was sent.`,
    );
    for (const q of queued) q.reject(error);
    return;
  }
  for (let i = 0; i < queued.length; i++) {
    const reply: unknown = replies[2 * i + 1];
    const q = queued[i] as Queued;
    // Alone, the call's error would end with where Redis raised it, which the store reads as the
    // library failing on a key's state (see libraryError): said the same way here.
    if (typeof reply === 'string') q.reject(new Error(`${reply} script: ${q.name}, run by many, on @user_function.`));
    else q.resolve(reply);
  }
}

/**
 * How a connection sends a batch with `many` and settles its calls: from the reply, or from the
 * error of the whole batch. Where Redis refuses keys of several slots in one command, each call
 * goes again alone (nothing ran), and so do the calls of later turns on that connection.
 */
function batches(send: Connection['fcall']) {
  const state = {
    together: true,
    settle(together: readonly Queued[], tag: string, outcome: Reply): void {
      outcome.then(
        (replies) => settleMany(together, replies, tag),
        (error: unknown) => {
          if (!crossSlot(error)) return failed(together)(new BatchError(error));
          state.together = false;
          for (const q of together) send(q.name, q.readOnly, q.keys, q.args).then(q.resolve, q.reject);
        },
      );
    },
  };
  return state;
}

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

/** Rejects each of `calls` with the error it is given. */
const failed =
  (calls: readonly Queued[]) =>
  (error: unknown): void => {
    for (const q of calls) q.reject(error);
  };

/** Tags of batches: a count of this process's batches and a random part, so that no two batches (of any process) share one. */
let batchesSent = 0;
const processTag = Math.random().toString(36).slice(2, 8);

/**
 * The calls of a turn: those the library's `many` runs (`together`, with its keys and arguments,
 * the first argument the batch's tag, when there are two or more and `many` is on) and the others.
 */
function split(queued: readonly Queued[], many: boolean): { together: Queued[]; apart: Queued[]; keys: string[]; args: string[]; tag: string } {
  const together: Queued[] = [];
  const apart: Queued[] = [];
  const keys: string[] = [];
  const tag = `${processTag}.${(batchesSent++).toString(36)}`;
  const args: string[] = [tag];
  for (const q of queued) {
    const kind = q.readOnly || !many ? undefined : kindIn(q.name);
    if (kind === undefined) apart.push(q);
    else {
      together.push(q);
      keys.push(...q.keys);
      args.push(kind, String(q.keys.length), String(q.args.length), ...q.args);
    }
  }
  if (together.length === 1) apart.unshift(together.pop() as Queued);
  return { together, apart, keys, args, tag };
}

/**
 * An fcall that sends the calls of one turn of the event loop (the requests of every socket that
 * was ready) together: the first at once, the others `BATCH` at a time, the last when the turn's
 * I/O callbacks are done. A batch is one command, an FCALL of the library's `many` function, which
 * runs each call as if it were an FCALL of its own: each command costs both ends its parsing,
 * dispatch and reply, and more than the rest of a call for fast.lua's. `sendQueued` sends a batch,
 * and answers every call in it, whatever happens: it runs from setImmediate, where a throw would
 * reach no caller and crash the process.
 */
function byTurn(
  send: Connection['fcall'],
  sendQueued: (queued: Queued[]) => void,
  { firstAtOnce = true, batch = BATCH, later = afterThisTurn } = {},
): Connection['fcall'] {
  let turn: Queued[] | undefined;
  const endTurn = (): void => {
    const queued = turn as Queued[];
    turn = undefined;
    if (queued.length > 0) sendQueued(queued);
  };
  return (name, readOnly, keys, args) => {
    if (turn === undefined) {
      turn = [];
      later(endTurn);
      if (firstAtOnce) return send(name, readOnly, keys, args);
    }
    const queued = turn;
    return new Promise((resolve, reject) => {
      queued.push({ name, readOnly, keys, args, resolve, reject });
      // A full batch goes out at once: Redis starts on it while this turn makes the next.
      if (queued.length === batch) {
        turn = [];
        sendQueued(queued);
      }
    });
  };
}

function ioredis(client: IoRedisLike): Connection {
  const offline = () => (typeof client.status === 'string' && disconnected.has(client.status) ? `status '${client.status}'` : undefined);
  const send = (name: string, readOnly: boolean, keys: string[], args: string[]): Reply => fcallOn(client, name, readOnly, keys, args);
  // ioredis writes each command on its own, a system call that costs more than the rest of a
  // call, on both ends: a batch goes in one write, and peeks (FCALL_RO, which a replica runs) go
  // beside it in the same pipeline. A Cluster's calls must keep to one slot: they go out one by one.
  const batch = batches(send);
  const sendQueued = (queued: Queued[]): void => {
    // The client lost its connection since: sent now, the calls would wait in its offline queue.
    const why = offline();
    if (why !== undefined) {
      failed(queued)(new FloodgateError(ErrorCodes.STORE_UNAVAILABLE, `The Redis client is not connected (${why}).`));
      return;
    }
    try {
      const { together, apart, keys, args, tag } = split(queued, batch.together);
      if (apart.length === 0) {
        batch.settle(together, tag, client.fcall(LIBRARY.many, keys.length, ...keys, ...args));
        return;
      }
      if (together.length === 0 && apart.length === 1) {
        const only = apart[0] as Queued;
        send(only.name, only.readOnly, only.keys, only.args).then(only.resolve, only.reject);
        return;
      }
      const pipeline = (client.pipeline as () => IoRedisPipeline)();
      if (together.length > 0) pipeline.fcall(LIBRARY.many, keys.length, ...keys, ...args);
      for (const q of apart) fcallOn(pipeline, q.name, q.readOnly, q.keys, q.args);
      const results = pipeline.exec();
      // Each command's [error, reply], in order; the pipeline's own failure fails them all.
      const result = (i: number): Reply =>
        results.then((all) => {
          const [error, reply] = all?.[i] ?? [new Error('ioredis answered the pipeline without this command'), undefined];
          if (error !== null) throw error;
          return reply;
        });
      const first = together.length > 0 ? 1 : 0;
      if (first === 1) batch.settle(together, tag, result(0));
      for (let i = 0; i < apart.length; i++) result(first + i).then((apart[i] as Queued).resolve, (apart[i] as Queued).reject);
    } catch (error) {
      failed(queued)(error);
    }
  };
  return {
    cluster: client.isCluster === true,
    functions: true,
    offline,
    fcall: client.isCluster !== true && typeof client.pipeline === 'function' ? byTurn(send, sendQueued) : send,
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
  const send: Connection['fcall'] = (name, readOnly, keys, args) => {
    if (functions === undefined || !callable) return Promise.reject(new Error("ERR unknown command 'fcall': this @upstash/redis client has no functions API"));
    return plainly(readOnly ? functions.callRo(name, keys, args) : functions.call(name, keys, args));
  };
  // Each command costs a request's share of JSON on both ends and a command in the REST server:
  // a turn's calls go out as one (the client sends the commands of one tick in one request).
  const batch = batches(send);
  const fcall = callable
    ? byTurn(
        send,
        (queued) => {
          try {
            const { together, apart, keys, args, tag } = split(queued, batch.together);
            if (together.length > 0) batch.settle(together, tag, send(LIBRARY.many, false, keys, args));
            for (const q of apart) send(q.name, q.readOnly, q.keys, q.args).then(q.resolve, q.reject);
          } catch (error) {
            failed(queued)(error);
          }
        },
        // A full batch goes at once, the rest at the end of the burst: all in the client's one request.
        { firstAtOnce: false, batch: UPSTASH_BATCH, later: queueMicrotask },
      )
    : send;
  return {
    cluster: false,
    functions: callable,
    // No connection to lose: every call is a request of its own, bounded by the limiter's timeoutMs.
    offline: () => undefined,
    fcall,
    evaluate(script, sha, readOnly, keys, args) {
      if (sha) return plainly(readOnly && client.evalshaRo ? client.evalshaRo(script.sha1, keys, args) : client.evalsha(script.sha1, keys, args));
      return plainly(readOnly && client.evalRo ? client.evalRo(script.source, keys, args) : client.eval(script.source, keys, args));
    },
    async loadLibrary(code) {
      if (functions === undefined || !callable) throw new Error("ERR unknown command 'fcall': this @upstash/redis client has no functions API");
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
