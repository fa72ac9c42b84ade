import keySlot from 'cluster-key-slot';
import { startBlock } from '../algorithms/block.js';
import { createVerdict } from '../algorithms/types.js';
import { describe, ErrorCodes, FloodgateError } from '../errors.js';
import type { CompiledRule } from '../rules.js';
import { BatchError, type Connection, connect, crossSlot, type RedisClient } from './redis/connection.js';
import { LIBRARY } from './redis/library.generated.js';
import { type RuleView, viewOf } from './redis/views.js';
import { admittedDecision, unchangedDecision } from './rule-decisions.js';
import { keyOfRule, type RuleDecision, type RuleSet, type Store, type StoreKeys, type StoreRecords } from './types.js';

export type { IoRedisLike, IoRedisPipeline, NodeRedisLike, RedisClient, UpstashLike } from './redis/connection.js';

export interface RedisStoreOptions {
  /**
   * An ioredis client or Cluster, a node-redis v4+ client or cluster, or an
   * @upstash/redis client (Redis over HTTP: Cloudflare Workers, Vercel Edge,
   * Deno Deploy).
   */
  client: RedisClient;
  /** Prepended to every key, before the limiter's own prefix. @defaultValue '' */
  prefix?: string;
  /**
   * Whose clock decides. `'server'` (default): Redis's own, so app servers'
   * clocks never matter. `'client'`: the limiter's `now()`, at any epoch
   * (tests, replays, a frozen clock), deciding as the memory store does with
   * the same values: each key's value says when its state ends on that
   * clock, and its expiry in Redis only frees memory, as many ms after the
   * call as the state needs. Every instance sharing keys must use the same clock.
   * @defaultValue 'server'
   */
  clock?: 'server' | 'client';
  /**
   * How the library runs: `'functions'` (loaded once with FUNCTION LOAD, each
   * call one FCALL; Redis 7) or `'scripts'` (each call one EVALSHA of the
   * whole library, for servers where Functions are unavailable or forbidden).
   * By default functions, switching to scripts for good on the first reply
   * that says FCALL or FUNCTION is unknown or not permitted. An
   * @upstash/redis client without a functions API (before 1.36) runs
   * scripts from the first call.
   */
  mode?: 'functions' | 'scripts';
}

/**
 * The layout of the library's values, named in every key: a build that lays them out differently
 * bumps it, so that builds sharing a Redis never read, or overwrite, each other's state: during a
 * rolling deploy each counts under its own keys, until the older build is gone. 1: keys without a
 * version (up to 2026-11); 2: on the caller's clock, a string key's value says when its state ends.
 */
const FORMAT = 2;

/** The library's functions (and scripts): see RedisLibrary. */
type Entry = 'write' | 'readOnly' | 'fast';

/** The operations of the library (lua/calls.lua). */
type Operation = 'consume' | 'peek' | 'deny' | 'refund' | 'release' | 'reset' | 'undo' | 'block' | 'unblock';

/** Per rule set: the parts of its Redis keys and how its rules speak with the library. */
interface Prepared {
  /** Per rule: the part of its Redis key after the store key (`}:<rule name>:v<FORMAT>`). */
  readonly suffixes: readonly string[];
  readonly views: readonly RuleView[];
  /**
   * Whether a consume takes the fast path (lua/fast-prelude.lua, each algorithm's fast.lua): plain rules only, on
   * Redis's own clock. It then sends the keys, the rules' specs and the cost (none when 1),
   * and the library leaves out each rule's block numbers, all 0 (see consumeFast).
   */
  readonly fast: boolean;
  /** How many numbers the library answers a consume with: every rule's view, block numbers included, after the admitted flag. */
  readonly replySize: number;
}

/** One call of the library: some rules of a call (all of them, unless a Cluster splits them by slot) and their keys. */
interface Batch {
  /** Indexes of the rules in the rule set. */
  readonly rules: readonly number[];
  readonly keys: string[];
  /** The rules' specs, after op, now, cost and lease id. */
  readonly specs: string[];
}

function badReply(reply: unknown, why: string): FloodgateError {
  let shown: string | undefined;
  try {
    shown = JSON.stringify(reply, (_key, value: unknown) => (typeof value === 'bigint' ? String(value) : value))?.slice(0, 120);
  } catch {
    shown = describe(reply);
  }
  return new FloodgateError(ErrorCodes.STORE_REPLY, `The Redis library answered ${shown} (${why}); is something else writing to Floodgate's keys?`);
}

/** A reply number as a number: clients may hand integers over as strings (ioredis `stringNumbers`) or bigints. */
function replyNumber(value: unknown): number {
  if (typeof value === 'number') return value;
  return (typeof value === 'string' && value !== '') || typeof value === 'bigint' ? Number(value) : Number.NaN;
}

/** A consume or peek reply, checked: the right length, and integers from 0 to 2^53. */
function readReply(reply: unknown, size: number): number[] {
  if (!Array.isArray(reply)) throw badReply(reply, 'not a list');
  if (reply.length !== size) throw badReply(reply, `${reply.length} numbers where ${size} were due`);
  const numbers = new Array<number>(size);
  for (let i = 0; i < size; i++) {
    const n = replyNumber(reply[i]);
    if (!Number.isSafeInteger(n) || n < 0) throw badReply(reply, `${String(reply[i])} is not a count or a time`);
    numbers[i] = n;
  }
  if (numbers[0] !== 0 && numbers[0] !== 1) throw badReply(reply, 'the admitted flag is neither 0 nor 1');
  return numbers;
}

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));
/** The function is not loaded on that server: after a restart, FUNCTION FLUSH, or on a node new to the Cluster. */
const functionMissing = (error: unknown) => /Function not found/i.test(messageOf(error));
/**
 * Functions are not available there: a server before Redis 7, a proxy that does not pass them, or an
 * ACL. Only a reply that names FCALL or FUNCTION and refuses it says so: a transient refusal of any
 * command (`OOM command not allowed ...`, LOADING, BUSY) must not move the store off Functions.
 */
const functionsUnavailable = (error: unknown) => {
  const message = messageOf(error);
  return /\b(?:fcall|fcall_ro|function)\b/i.test(message) && /unknown command|unsupported|not allowed|no permissions|NOPERM|disabled/i.test(message);
};
/** How long a store that moved to scripts runs them before it tries Functions again (an ACL or a proxy may change). */
const FUNCTIONS_RECHECK_MS = 60_000;
const scriptMissing = (error: unknown) => /^NOSCRIPT/.test(messageOf(error));

const rethrowLibraryError = (error: unknown): never => {
  throw libraryError(error);
};

/**
 * What the library raised itself (`FG_*`, see lua/prelude.lua), or a Lua
 * error while reading a key's state, as a FloodgateError. A state the library
 * cannot read is that key's problem, not the store's: ERR_FG_STORE_REPLY.
 */
function libraryError(error: unknown): unknown {
  if (error instanceof BatchError) return error; // the whole batch failed, not a key's state
  const message = messageOf(error);
  if (/user_function|user_script|Error running script/.test(message)) {
    // Where Redis raised it ("script: fg_..., on @user_function:311.") says nothing to the reader: the error keeps it as its cause.
    const said = message.replace(/\s*script: \S+, on @user_(?:function|script):\d+\.?\s*$/, '');
    return new FloodgateError(ErrorCodes.STORE_REPLY, `The Redis library failed on a key's state: ${said}`, { cause: error });
  }
  return error;
}

/**
 * Limiter state in Redis, shared by every process that uses the same Redis.
 * Every algorithm runs in Floodgate's Redis library (packages/core/lua),
 * loaded once as Redis 7 Functions: all rules of a call are decided in one
 * FCALL (one round trip), all or nothing. Keys are
 * `${prefix}${limiterPrefix}{${key}}:${rule}:v2`: the key is a Cluster hash tag,
 * so the rules of one key live in one slot; every key expires when its state
 * would read as empty.
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis';
 * // Keep the offline queue on: the store sends nothing while the client reconnects (it fails fast instead).
 * const redis = new Redis({ maxRetriesPerRequest: 1 });
 * const limiter = createLimiter({ limit: 100, windowMs: 60_000, store: new RedisStore({ client: redis }) });
 * ```
 */
export class RedisStore implements Store {
  private readonly connection: Connection;
  private readonly prefix: string;
  private readonly serverClock: boolean;
  private readonly pinned: boolean;
  private mode: 'functions' | 'scripts';
  /** When a store that moved to scripts tries Functions again (Date.now()). */
  private functionsAgainAt = 0;
  /**
   * Whether a call's keys go to one library call per Cluster slot: on a Cluster client, and on a
   * plain client once Redis refused keys of several slots in one command (a server in cluster mode,
   * or a proxy that keeps each command to one slot).
   */
  private splitsBySlot: boolean;
  /** A FUNCTION LOAD under way, shared by the calls that found the library missing meanwhile. */
  private loading: Promise<void> | undefined;
  private readonly prepared = new WeakMap<RuleSet, Prepared>();

  constructor(options: RedisStoreOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new FloodgateError(ErrorCodes.OPTION, `RedisStore takes { client }, got ${describe(options)}.`);
    }
    for (const key of Object.keys(options)) {
      if (key !== 'client' && key !== 'prefix' && key !== 'clock' && key !== 'mode') {
        throw new FloodgateError(ErrorCodes.UNKNOWN_OPTION, `RedisStore has no option '${key}'; it takes client, prefix, clock and mode.`);
      }
    }
    const { client, prefix = '', clock = 'server', mode } = options;
    if (typeof prefix !== 'string' || /[{}]/.test(prefix)) {
      throw new FloodgateError(ErrorCodes.OPTION, `RedisStore prefix must be a string without '{' or '}', got ${describe(prefix)}.`);
    }
    if (clock !== 'server' && clock !== 'client') {
      throw new FloodgateError(ErrorCodes.OPTION, `RedisStore clock must be 'server' or 'client', got ${describe(clock)}.`);
    }
    if (mode !== undefined && mode !== 'functions' && mode !== 'scripts') {
      throw new FloodgateError(ErrorCodes.OPTION, `RedisStore mode must be 'functions' or 'scripts', got ${describe(mode)}.`);
    }
    this.connection = connect(client);
    if (mode === 'functions' && !this.connection.functions) {
      throw new FloodgateError(
        ErrorCodes.OPTION,
        "RedisStore mode 'functions' needs a client that can call Redis Functions, and this @upstash/redis client has no functions API (it came in 1.36): upgrade it, or leave mode unset to run the library as a script.",
      );
    }
    this.prefix = prefix;
    this.serverClock = clock === 'server';
    this.mode = mode ?? (this.connection.functions ? 'functions' : 'scripts');
    this.pinned = mode !== undefined;
    this.splitsBySlot = this.connection.cluster;
  }

  /** How the library runs now: 'scripts' once a server said Functions are unavailable (or when chosen). */
  get runsAs(): 'functions' | 'scripts' {
    return this.mode;
  }

  consume(keys: StoreKeys, ruleSet: RuleSet, cost: number, now: number, leaseId = ''): Promise<RuleDecision[]> {
    return this.slotted(keys, () => this.consumeOnce(keys, ruleSet, cost, now, leaseId));
  }

  /**
   * Runs a call, and runs it again split by slot when Redis refused its keys of several slots in
   * one command (nothing ran then): from then on every call of this store is split so.
   */
  private slotted<T>(keys: StoreKeys, call: () => Promise<T>): Promise<T> {
    if (this.splitsBySlot || typeof keys === 'string') return call();
    return call().catch((error: unknown) => {
      if (!crossSlot(error)) throw error;
      this.splitsBySlot = true;
      return call();
    });
  }

  private consumeOnce(keys: StoreKeys, ruleSet: RuleSet, cost: number, now: number, leaseId: string): Promise<RuleDecision[]> {
    // Not an async function: the common call (one batch) is one promise chain, without the frames of awaits.
    try {
      const prepared = this.prepare(ruleSet);
      const batches = this.batches(keys, ruleSet, prepared);
      if (batches.length > 1) return this.consumeBySlot(batches, ruleSet, prepared, cost, now, leaseId);
      const batch = batches[0] as Batch;
      const reply = prepared.fast ? this.consumeFast(batch, cost, prepared) : this.decide(batch, 'consume', cost, now, leaseId, prepared);
      return reply.then((numbers) => this.merged(batches, [numbers], ruleSet, prepared, cost, 'consume'));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  private async consumeBySlot(batches: Batch[], ruleSet: RuleSet, prepared: Prepared, cost: number, now: number, leaseId: string): Promise<RuleDecision[]> {
    // A Cluster, and the keys of the call in several slots: one call per slot, in turn, the
    // slot of `global` rules (shared by every client) last. When one denies, the slots that
    // admitted give back what they took before this call returns, and the slots not asked
    // yet are told the call was denied: they record nothing, but start their rules' blocks,
    // as one call on one node would.
    const replies: number[][] = [];
    for (const batch of batches) {
      const reply = await this.decide(batch, 'consume', cost, now, leaseId, prepared);
      replies.push(reply);
      if (reply[0] === 0) break;
    }
    const denied = replies.length < batches.length || replies[replies.length - 1]?.[0] === 0;
    if (denied) {
      const taken = batches.slice(0, replies.length - 1);
      await Promise.all(taken.map((batch) => this.send(batch, 'undo', cost, now, leaseId, false)));
      for (const batch of batches.slice(replies.length)) replies.push(await this.decide(batch, 'deny', cost, now, '', prepared));
    }
    return this.merged(batches, replies, ruleSet, prepared, cost, denied ? 'denied' : 'consume');
  }

  peek(keys: StoreKeys, ruleSet: RuleSet, now: number): Promise<RuleDecision[]> {
    return this.slotted(keys, async () => {
      const prepared = this.prepare(ruleSet);
      const batches = this.batches(keys, ruleSet, prepared);
      const replies = await Promise.all(batches.map((batch) => this.decide(batch, 'peek', 1, now, '', prepared)));
      return this.merged(batches, replies, ruleSet, prepared, 1, 'peek');
    });
  }

  async refund(keys: StoreKeys, ruleSet: RuleSet, cost: number, now: number): Promise<void> {
    await this.everyBatch(keys, ruleSet, 'refund', cost, now, '');
  }

  async release(keys: StoreKeys, ruleSet: RuleSet, leaseId: string, now: number): Promise<void> {
    await this.everyBatch(keys, ruleSet, 'release', 1, now, leaseId);
  }

  /**
   * Records (blocks by hand and their reasons), in two keys of one slot
   * beside the states: `<prefix>{floodgate:records}:index` and `:values`
   * (see the library's records).
   */
  readonly records: StoreRecords = {
    set: async (name, value, ttlMs) => {
      await this.recordCall('rset', [name, String(Math.max(1, Math.ceil(ttlMs))), value]);
    },
    get: async (names) => {
      if (names.length === 0) return [];
      const reply = await this.recordCall('rget', names);
      if (!Array.isArray(reply) || reply.length !== names.length) throw badReply(reply, 'records the store could not have written');
      return reply.map((value) => (typeof value === 'string' ? value : null));
    },
    delete: async (names) => {
      if (names.length > 0) await this.recordCall('rdel', names);
    },
    list: async (prefix, after, count) => {
      const reply = await this.recordCall('rlist', [prefix, after, String(count)]);
      if (!Array.isArray(reply) || reply.length % 2 !== 1 || !reply.every((item) => typeof item === 'string')) {
        throw badReply(reply, 'a list the store could not have written');
      }
      const [next, ...flat] = reply as string[];
      const records: [string, string][] = [];
      for (let i = 0; i < flat.length; i += 2) records.push([flat[i] as string, flat[i + 1] as string]);
      return { records, next: next as string };
    },
  };

  private recordCall(op: 'rset' | 'rget' | 'rdel' | 'rlist', args: readonly string[]): Promise<unknown> {
    const keys = [`${this.prefix}{floodgate:records}:index`, `${this.prefix}{floodgate:records}:values`];
    return this.invoke(keys, [op, '', '1', '', ...args], 'write');
  }

  async block(keys: StoreKeys, ruleSet: RuleSet, ms: number, now: number): Promise<void> {
    await this.everyBatch(keys, ruleSet, 'block', ms, now, '');
  }

  async unblock(keys: StoreKeys, ruleSet: RuleSet, now: number): Promise<void> {
    await this.everyBatch(keys, ruleSet, 'unblock', 1, now, '');
  }

  async reset(keys: StoreKeys, ruleSet: RuleSet): Promise<void> {
    // DEL through the library too: one round trip, and no client-specific command names.
    await this.everyBatch(keys, ruleSet, 'reset', 1, 0, '');
  }

  /** The Redis keys of a call under a limiter's rules, in rule order (for inspection and tests). */
  keysOf(keys: StoreKeys, ruleSet: RuleSet): string[] {
    const prepared = this.prepare(ruleSet);
    return ruleSet.rules.map((_, i) => this.redisKey(keys, ruleSet, prepared, i));
  }

  private redisKey(keys: StoreKeys, ruleSet: RuleSet, prepared: Prepared, i: number): string {
    return `${this.prefix}${ruleSet.prefix}{${keyOfRule(keys, i)}${prepared.suffixes[i]}`;
  }

  private everyBatch(keys: StoreKeys, ruleSet: RuleSet, op: Operation, cost: number, now: number, leaseId: string): Promise<void> {
    return this.slotted(keys, async () => {
      const batches = this.batches(keys, ruleSet, this.prepare(ruleSet));
      await Promise.all(batches.map((batch) => this.send(batch, op, cost, now, leaseId, false)));
    });
  }

  /**
   * The rules of a call in as few library calls as can be atomic: one, unless
   * calls are split by slot (a Cluster) and the call's keys lie in several
   * slots; then one per slot, in rule order, but the slot of global rules last.
   */
  private batches(keys: StoreKeys, ruleSet: RuleSet, prepared: Prepared): Batch[] {
    const rules = ruleSet.rules;
    const all = (): Batch => ({
      rules: rules.map((_, i) => i),
      keys: rules.map((_, i) => this.redisKey(keys, ruleSet, prepared, i)),
      specs: prepared.views.map((view) => view.spec),
    });
    if (typeof keys === 'string' || !this.splitsBySlot) return [all()];
    const bySlot = new Map<number, { rules: number[]; keys: string[]; specs: string[]; global: boolean }>();
    rules.forEach((rule, i) => {
      const storeKey = keyOfRule(keys, i);
      const slot = keySlot(storeKey);
      let batch = bySlot.get(slot);
      if (batch === undefined) {
        batch = { rules: [], keys: [], specs: [], global: false };
        bySlot.set(slot, batch);
      }
      batch.rules.push(i);
      batch.keys.push(this.redisKey(keys, ruleSet, prepared, i));
      batch.specs.push((prepared.views[i] as RuleView).spec);
      if (rule.scope === 'global') batch.global = true;
    });
    if (bySlot.size === 1) return [all()];
    return [...bySlot.values()].sort((a, b) => Number(a.global) - Number(b.global));
  }

  /** One consume, peek or deny of a batch: the reply, checked. */
  private decide(batch: Batch, op: 'consume' | 'peek' | 'deny', cost: number, now: number, leaseId: string, prepared: Prepared): Promise<number[]> {
    const size = 1 + batch.rules.reduce((sum, i) => sum + (prepared.views[i] as RuleView).size, 0);
    return this.send(batch, op, cost, now, leaseId, op === 'peek').then((reply) => readReply(reply, size));
  }

  /**
   * A consume of one plain rule on the fast path: the reply, checked, with the
   * block's numbers (all 0) put back. Where fast.lua cannot decide (a key
   * holding a block, or another rule's state), the function answers as the
   * write function does, and the script answers nil, having written nothing:
   * the call then runs the write script.
   */
  private consumeFast(batch: Batch, cost: number, prepared: Prepared): Promise<number[]> {
    return this.invoke(batch.keys, cost === 1 ? batch.specs : [...batch.specs, String(cost)], 'fast').then((reply) => {
      if (reply === null) return this.decide(batch, 'consume', cost, 0, '', prepared);
      const { views, replySize } = prepared;
      const numbers = readReply(reply, Array.isArray(reply) && reply.length === replySize ? replySize : replySize - 3 * views.length);
      if (numbers.length === replySize) return numbers;
      // Each rule's block numbers, all 0, after its view: from the last rule back, so that the places before stay.
      for (let i = views.length - 1, at = numbers.length; i >= 0; at -= (views[i] as RuleView).size - 3, i--) numbers.splice(at, 0, 0, 0, 0);
      return numbers;
    });
  }

  /**
   * Every rule's decision from the batches' replies, worked out from the
   * views with the memory store's arithmetic. Rules of a peek, and of a call
   * denied in another slot (`denied`), report what they hold now; the rules
   * of a denied call whose own numbers deny it report the blocks the library
   * started for them. The library's admitted flag must agree with what the
   * views say, or the reply is not to be trusted.
   */
  private merged(
    batches: Batch[],
    replies: number[][],
    ruleSet: RuleSet,
    prepared: Prepared,
    cost: number,
    how: 'consume' | 'denied' | 'peek',
  ): RuleDecision[] {
    const decisions = new Array<RuleDecision>(ruleSet.rules.length);
    batches.forEach((batch, b) => {
      const reply = replies[b] as number[];
      const recorded = how === 'consume' && reply[0] === 1;
      const denied = how === 'denied' || (how === 'consume' && reply[0] === 0);
      let at = 1;
      let admits = true;
      for (const i of batch.rules) {
        const rule = ruleSet.rules[i] as CompiledRule;
        const view = prepared.views[i] as RuleView;
        const v = createVerdict();
        view.verdict(reply, at, cost, v);
        at += view.size;
        // A block remembered has a strike, or is one by hand (strike 0) that still holds (it is forgotten as it ends).
        if (v.blockLeftMs > v.blockMs || v.blockMs > 0 !== (v.strike > 0 || v.blockLeftMs > 0)) throw badReply(reply, 'a block that cannot be');
        if (!v.allowed) admits = false;
        if (denied && rule.blockMs > 0) startBlock(rule, v);
        decisions[i] = recorded ? admittedDecision(rule, v) : unchangedDecision(rule, v, how === 'peek');
      }
      if (admits !== (reply[0] === 1))
        throw badReply(reply, `the library ${reply[0] === 1 ? 'admitted' : 'denied'} what its numbers ${admits ? 'admit' : 'deny'}`);
    });
    return decisions;
  }

  private prepare(ruleSet: RuleSet): Prepared {
    let prepared = this.prepared.get(ruleSet);
    if (prepared === undefined) {
      const views = ruleSet.rules.map(viewOf);
      const fast = this.serverClock && views.every((view) => view.fast);
      const replySize = 1 + views.reduce((sum, view) => sum + view.size, 0);
      prepared = { suffixes: ruleSet.rules.map((rule) => `}:${rule.name}:v${FORMAT}`), views, fast, replySize };
      this.prepared.set(ruleSet, prepared);
    }
    return prepared;
  }

  /** Runs one operation of the library on a batch. */
  private send(batch: Batch, op: Operation, cost: number, now: number, leaseId: string, readOnly: boolean): Promise<unknown> {
    return this.invoke(batch.keys, [op, this.serverClock ? '' : String(now), String(cost), leaseId, ...batch.specs], readOnly ? 'readOnly' : 'write');
  }

  /** Runs one function of the library: FCALL, or EVALSHA in scripts mode. */
  private invoke(keys: string[], args: string[], entry: Entry): Promise<unknown> {
    // Fail fast while the client is between connections: a command sent now would wait in
    // its offline queue, and run late (counting a request already decided) when Redis returns.
    const offline = this.connection.offline();
    if (offline !== undefined) return Promise.reject(new FloodgateError(ErrorCodes.STORE_UNAVAILABLE, `The Redis client is not connected (${offline}).`));
    return this.run(keys, args, entry);
  }

  /**
   * One call of the library; its failures as libraryError() reads them. Not an async function:
   * a call that succeeds at once (FCALL, Redis 7) costs one promise more than the client's.
   */
  private run(keys: string[], args: string[], entry: Entry): Promise<unknown> {
    if (this.mode !== 'functions') {
      if (this.pinned || !this.connection.functions || Date.now() < this.functionsAgainAt) return this.runScript(keys, args, entry).catch(rethrowLibraryError);
      this.mode = 'functions'; // a minute on scripts: Functions may be allowed again
    }
    let called: Promise<unknown>;
    try {
      called = this.connection.fcall(LIBRARY[entry], entry === 'readOnly', keys, args);
    } catch (error) {
      called = Promise.reject(error);
    }
    return called.catch((error: unknown) => this.fcallFailed(error, keys, args, entry).catch(rethrowLibraryError));
  }

  private async fcallFailed(error: unknown, keys: string[], args: string[], entry: Entry): Promise<unknown> {
    if (functionMissing(error)) {
      // Redis restarted, its functions were flushed, or a node joined the Cluster: load, and call again.
      try {
        await this.load();
      } catch (loadError) {
        if (this.pinned || !functionsUnavailable(loadError)) throw loadError;
        return this.toScripts(keys, args, entry);
      }
      return this.connection.fcall(LIBRARY[entry], entry === 'readOnly', keys, args);
    }
    if (this.pinned || !functionsUnavailable(error)) throw error;
    return this.toScripts(keys, args, entry);
  }

  /** Runs the library as scripts from now on (Functions are unavailable there), trying Functions again a minute later. */
  private toScripts(keys: string[], args: string[], entry: Entry): Promise<unknown> {
    this.mode = 'scripts';
    this.functionsAgainAt = Date.now() + FUNCTIONS_RECHECK_MS;
    return this.runScript(keys, args, entry);
  }

  private async runScript(keys: string[], args: string[], entry: Entry): Promise<unknown> {
    const script = LIBRARY.scripts[entry];
    const readOnly = entry === 'readOnly';
    try {
      return await this.connection.evaluate(script, true, readOnly, keys, args);
    } catch (error) {
      if (!scriptMissing(error)) throw error;
      // Redis restarted or its script cache was flushed: EVAL loads the script again.
      return this.connection.evaluate(script, false, readOnly, keys, args);
    }
  }

  private load(): Promise<void> {
    this.loading ??= this.connection.loadLibrary(LIBRARY.functions).finally(() => {
      this.loading = undefined;
    });
    return this.loading;
  }
}
