import { countInWindow } from '../algorithms/fixed-window.js';
import { decideLevel } from '../algorithms/meter.js';
import { slidingWindow } from '../algorithms/sliding-window.js';
import { createVerdict, type Verdict } from '../algorithms/types.js';
import { describe, ErrorCodes, FloodgateError } from '../errors.js';
import type { CompiledRule } from '../rules.js';
import { type LuaScript, SCRIPTS } from './lua.generated.js';
import type { RuleDecision, RuleSet, Store } from './types.js';

/**
 * A Redis client Floodgate can run its script with. ioredis (`Redis` or
 * `Cluster`) is the first-class, tested client; node-redis v4+ works too.
 */
export type RedisClient = IoRedisLike | NodeRedisLike;

/** ioredis `Redis` and `Cluster`. */
export interface IoRedisLike {
  evalsha(sha: string, numKeys: number, ...keysAndArgs: (string | number)[]): Promise<unknown>;
  eval(script: string, numKeys: number, ...keysAndArgs: (string | number)[]): Promise<unknown>;
}

/** node-redis v4+ (`createClient()`, `createCluster()`). */
export interface NodeRedisLike {
  evalSha(sha: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
}

export interface RedisStoreOptions {
  /** An ioredis client or Cluster, or a node-redis v4+ client. */
  client: RedisClient;
  /** Prepended to every key, before the limiter's own prefix. @defaultValue '' */
  prefix?: string;
  /**
   * Whose clock decides. `'server'` (default): the script reads Redis `TIME`,
   * so app servers' clocks never matter. `'client'`: the limiter's `now()`,
   * for tests and parity runs; keys then live for their rule's whole horizon.
   * Every instance sharing keys must use the same clock.
   * @defaultValue 'server'
   */
  clock?: 'server' | 'client';
}

/** What one script call does. */
export type RedisOperation = 'consume' | 'peek' | 'refund' | 'reset' | 'release';

/** What one script call returns: the decisions and the time they were made at. */
export interface RedisEvaluation {
  decisions: RuleDecision[];
  /** The time (ms) the script decided at: Redis TIME, or the limiter's clock with clock: 'client'. */
  now: number;
}

/** How long a rule's state can matter at most, in ms: the key lifetime under the client clock. */
export function ruleHorizon(rule: CompiledRule): number {
  switch (rule.algorithm) {
    case 'sliding-window':
      return rule.windowMs + rule.segmentMs;
    case 'fixed-window':
    case 'sliding-log':
    case 'concurrency':
      return rule.windowMs;
    default:
      return Math.ceil((rule.burst * rule.unitsPerToken) / rule.unitsPerMs);
  }
}

/** A rule's arguments to the script: the fields its algorithm's `rule` function in lua/<algorithm>.lua reads. */
export function ruleArguments(rule: CompiledRule): string[] {
  switch (rule.algorithm) {
    case 'fixed-window':
    case 'sliding-log':
    case 'concurrency':
      return [String(rule.limit), String(rule.windowMs)];
    case 'sliding-window':
      return [String(rule.limit), String(rule.windowMs), String(rule.segments)];
    default:
      return [String(rule.burst), String(rule.unitsPerToken), String(rule.unitsPerMs), rule.mode];
  }
}

/**
 * `{` and `}` in a user key would change its Cluster hash tag (and `{}` empties
 * it, splitting one key's rules over slots): escape them, and `%`, so that
 * distinct keys stay distinct.
 */
function escapeKey(key: string): string {
  return /[{}%]/.test(key) ? key.replace(/[{}%]/g, (c) => (c === '{' ? '%7B' : c === '}' ? '%7D' : '%25')) : key;
}

interface Prepared {
  /** The script that serves these rules: their algorithm's, or the one for every algorithm when they mix. */
  script: LuaScript;
  /** Per rule: the part of the Redis key after the user key. */
  suffixes: string[];
  /** The script arguments after op, now and cost. */
  ruleArgs: string[];
  /** How consume runs when it can take a flat script of lua/consume/. */
  flat: FlatConsume | undefined;
}

/**
 * A consume of one rule under the server clock by the flat script of its
 * algorithm: fewer arguments, a reply of one to three numbers, and the rest of
 * the decision worked out here by the algorithm's own TypeScript.
 */
export interface FlatConsume {
  script: LuaScript;
  /** The script arguments after the cost. */
  args: string[];
  /** Fills `out` from the script's reply to a call of `cost`. */
  verdict(reply: unknown, rule: CompiledRule, cost: number, out: Verdict): void;
}

/**
 * The count in a flat script's reply count * (max + 1) + ms (ms <= max, the
 * whole below 2^53; max is windowMs for fixed-window and 2 * windowMs for
 * sliding-window): for integers that size the rounded quotient never reaches
 * the next integer, so floor() is exact.
 */
export function unpackCount(packed: number, max: number): number {
  return Math.floor(packed / (max + 1));
}

/** A numeric reply as a number (NaN if it is none): clients may hand integers over as strings (ioredis `stringNumbers`) or bigints. */
function numberReply(reply: unknown): number {
  if (typeof reply === 'number') return reply;
  return (typeof reply === 'string' && reply !== '') || typeof reply === 'bigint' ? Number(reply) : Number.NaN;
}

/** An integer reply below 2^53 as a number. */
function integerReply(reply: unknown): number {
  const value = numberReply(reply);
  if (!Number.isSafeInteger(value)) throw badReply(reply);
  return value;
}

/**
 * gcra, token-bucket and leaky-bucket reply with the level before the call:
 * the meter decides the rest. A gcra TAT left by a much slower rule can stand
 * for a level past 2^53 under a faster one: Redis then sends the script's
 * double as an integer, which reads back as that same double, so the decision
 * is the general script's.
 */
function levelVerdict(reply: unknown, rule: CompiledRule, cost: number, out: Verdict): void {
  const level = numberReply(reply);
  if (!Number.isInteger(level) || level < 0) throw badReply(reply);
  decideLevel(rule, level, cost, out);
}

/** A rule's arguments to consume/gcra.lua and consume/bucket.lua, after the cost. */
const meterArgs = (rule: CompiledRule): string[] => [String(rule.burst * rule.unitsPerToken), String(rule.unitsPerToken), String(rule.unitsPerMs)];

/** Scratch for reading consume/sliding-window.lua's denials: a state vector, and the next state decide() writes. */
const slidingState = [0, 0, 0, 0];
const slidingNext = [0, 0, 0, 0];

/**
 * The algorithms with a flat consume script: its script, whether it takes a
 * rule (else the general script does), a rule's arguments to it, and its reply read.
 */
const flatConsumes: Partial<
  Record<CompiledRule['algorithm'], Omit<FlatConsume, 'args'> & { takes?(rule: CompiledRule): boolean; args(rule: CompiledRule): string[] }>
> = {
  'fixed-window': {
    script: SCRIPTS['consume:fixed-window'],
    args: (rule) => [String(rule.limit), String(rule.windowMs)],
    verdict(reply, rule, cost, out) {
      let count: number;
      let msToEnd: number;
      if (Array.isArray(reply)) {
        if (reply.length !== 2) throw badReply(reply);
        count = integerReply(reply[0]);
        msToEnd = integerReply(reply[1]);
      } else {
        const packed = integerReply(reply);
        count = unpackCount(packed, rule.windowMs);
        msToEnd = packed - count * (rule.windowMs + 1);
      }
      countInWindow(rule, count, msToEnd, cost, out);
    },
  },
  'sliding-window': {
    script: SCRIPTS['consume:sliding-window'],
    takes: (rule) => rule.segments === 1,
    args: (rule) => [String(rule.limit), String(rule.windowMs)],
    verdict(reply, rule, cost, out) {
      if (Array.isArray(reply)) {
        // Denied: decide from the counts as seen from the current window, `phase` ms into it.
        if (reply.length !== 3) throw badReply(reply);
        slidingState[0] = rule.segmentMs;
        slidingState[1] = 0;
        slidingState[2] = integerReply(reply[0]);
        slidingState[3] = integerReply(reply[1]);
        slidingWindow.decide(rule, slidingState, 0, integerReply(reply[2]), cost, out, slidingNext);
        if (out.allowed) throw badReply(reply); // the script recorded nothing
        return;
      }
      // Admitted: remaining * (2 * windowMs + 1) + resetMs.
      const packed = integerReply(reply);
      const remaining = unpackCount(packed, 2 * rule.windowMs);
      out.allowed = true;
      out.retryAfterMs = 0;
      out.delayMs = 0;
      out.remaining = remaining;
      out.resetMs = packed - remaining * (2 * rule.windowMs + 1);
    },
  },
  gcra: { script: SCRIPTS['consume:gcra'], args: meterArgs, verdict: levelVerdict },
  'token-bucket': { script: SCRIPTS['consume:bucket'], args: (rule) => [...meterArgs(rule), 'tokens'], verdict: levelVerdict },
  'leaky-bucket': { script: SCRIPTS['consume:bucket'], args: (rule) => [...meterArgs(rule), 'level'], verdict: levelVerdict },
};

/** How a consume of `rule` alone, under the server clock, runs flat; undefined when its algorithm (or its segments) has no flat script. */
export function flatConsume(rule: CompiledRule): FlatConsume | undefined {
  const flat = flatConsumes[rule.algorithm];
  if (flat === undefined || (flat.takes !== undefined && !flat.takes(rule))) return undefined;
  return { script: flat.script, args: flat.args(rule), verdict: flat.verdict };
}

const isNoScript = (error: unknown) => error instanceof Error && /^NOSCRIPT/.test(error.message);

/** ioredis client states in which a command would only wait in the offline queue for a connection that is down. */
const disconnected = new Set(['reconnecting', 'close', 'end']);

/**
 * Limiter state in Redis, shared by every process that uses the same Redis.
 * Every algorithm runs as a Lua script, all rules of a call in one EVALSHA
 * (one round trip) and all-or-nothing. Keys are
 * `${prefix}${limiterPrefix}{${key}}:${rule}`: the user key is a hash tag, so
 * all rules of a key live in one Cluster slot; every key expires when its
 * state would read as empty.
 *
 * @example
 * ```ts
 * import Redis from 'ioredis';
 * // Keep the offline queue on: the store sends nothing while the client reconnects (it fails fast instead).
 * const redis = new Redis({ maxRetriesPerRequest: 1 });
 * const limiter = createLimiter({ limit: 100, windowMs: 60_000, store: new RedisStore({ client: redis }) });
 * ```
 */
export class RedisStore implements Store {
  private readonly run: (script: LuaScript, sha: boolean, keys: string[], args: string[]) => Promise<unknown>;
  private readonly client: RedisClient;
  private readonly prefix: string;
  private readonly serverClock: boolean;
  private readonly prepared = new WeakMap<RuleSet, Prepared>();
  /** Scratch for the flat consume scripts' verdicts (filled and read within one synchronous step). */
  private readonly verdict = createVerdict();

  constructor(options: RedisStoreOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new FloodgateError(ErrorCodes.OPTION, `RedisStore takes { client }, got ${describe(options)}.`);
    }
    for (const key of Object.keys(options)) {
      if (key !== 'client' && key !== 'prefix' && key !== 'clock') {
        throw new FloodgateError(ErrorCodes.UNKNOWN_OPTION, `RedisStore has no option '${key}'; it takes client, prefix and clock.`);
      }
    }
    const { client, prefix = '', clock = 'server' } = options;
    if (typeof prefix !== 'string') throw new FloodgateError(ErrorCodes.OPTION, `RedisStore prefix must be a string, got ${describe(prefix)}.`);
    if (clock !== 'server' && clock !== 'client') {
      throw new FloodgateError(ErrorCodes.OPTION, `RedisStore clock must be 'server' or 'client', got ${describe(clock)}.`);
    }
    this.prefix = prefix;
    this.serverClock = clock === 'server';
    this.client = client;

    const io = client as Partial<IoRedisLike>;
    const node = client as Partial<NodeRedisLike>;
    if (typeof io?.evalsha === 'function' && typeof io.eval === 'function') {
      this.run = (script, sha, keys, args) =>
        sha ? (io as IoRedisLike).evalsha(script.sha1, keys.length, ...keys, ...args) : (io as IoRedisLike).eval(script.source, keys.length, ...keys, ...args);
    } else if (typeof node?.evalSha === 'function' && typeof node.eval === 'function') {
      this.run = (script, sha, keys, args) =>
        sha ? (node as NodeRedisLike).evalSha(script.sha1, { keys, arguments: args }) : (node as NodeRedisLike).eval(script.source, { keys, arguments: args });
    } else {
      throw new FloodgateError(
        ErrorCodes.OPTION,
        `RedisStore client must be an ioredis client or Cluster, or a node-redis v4+ client (something with evalsha/eval or evalSha/eval), got ${describe(client)}.`,
      );
    }
  }

  async consume(key: string, ruleSet: RuleSet, cost: number, now: number, leaseId = ''): Promise<RuleDecision[]> {
    const prepared = this.prepare(ruleSet);
    const flat = prepared.flat;
    if (flat === undefined) return (await this.evaluate('consume', key, ruleSet, cost, now, leaseId)).decisions;
    const rule = ruleSet.rules[0] as CompiledRule;
    const reply = await this.call(flat.script, this.keysFor(key, ruleSet, prepared), [String(cost), ...flat.args]);
    const v = this.verdict;
    flat.verdict(reply, rule, cost, v);
    return [
      {
        name: rule.name,
        allowed: v.allowed,
        limit: rule.limit,
        remaining: v.remaining,
        resetMs: v.resetMs,
        retryAfterMs: v.retryAfterMs,
        delayMs: v.allowed ? v.delayMs : 0,
      },
    ];
  }

  async release(key: string, ruleSet: RuleSet, leaseId: string, now: number): Promise<void> {
    await this.evaluate('release', key, ruleSet, 1, now, leaseId);
  }

  async peek(key: string, ruleSet: RuleSet, now: number): Promise<RuleDecision[]> {
    return (await this.evaluate('peek', key, ruleSet, 1, now)).decisions;
  }

  async refund(key: string, ruleSet: RuleSet, cost: number, now: number): Promise<void> {
    await this.evaluate('refund', key, ruleSet, cost, now);
  }

  async reset(key: string, ruleSet: RuleSet): Promise<void> {
    // DEL through the script too: one round trip, and no client-specific command names.
    await this.evaluate('reset', key, ruleSet, 1, 0);
  }

  /** The Redis keys of a user key under a limiter's rules (for inspection and tests). */
  keysOf(key: string, ruleSet: RuleSet): string[] {
    return this.keysFor(key, ruleSet, this.prepare(ruleSet));
  }

  private keysFor(key: string, ruleSet: RuleSet, prepared: Prepared): string[] {
    const head = `${this.prefix}${ruleSet.prefix}{${escapeKey(key)}`;
    return prepared.suffixes.map((suffix) => head + suffix);
  }

  /** Runs the script once: the decisions and the time they were made at. */
  async evaluate(operation: RedisOperation, key: string, ruleSet: RuleSet, cost: number, now: number, leaseId = ''): Promise<RedisEvaluation> {
    const prepared = this.prepare(ruleSet);
    const args = [operation, this.serverClock ? '' : String(now), String(cost), ...prepared.ruleArgs];
    if (leaseId !== '') args.push(leaseId);
    const reply = await this.call(prepared.script, this.keysFor(key, ruleSet, prepared), args);
    return parseReply(reply, ruleSet.rules, operation);
  }

  private async call(script: LuaScript, keys: string[], args: string[]): Promise<unknown> {
    // Fail fast while the client is between connections: a command sent now would wait in
    // its offline queue, and run late (counting a request already decided) when Redis returns.
    const client = this.client as { status?: unknown; isReady?: unknown };
    if (typeof client.status === 'string' && disconnected.has(client.status)) {
      throw new FloodgateError(ErrorCodes.STORE_UNAVAILABLE, `The Redis client is not connected (status '${client.status}').`);
    }
    // node-redis has no status; isReady is false while it is closed or reconnecting.
    if (client.isReady === false) throw new FloodgateError(ErrorCodes.STORE_UNAVAILABLE, 'The Redis client is not connected (isReady is false).');
    try {
      return await this.run(script, true, keys, args);
    } catch (error) {
      if (!isNoScript(error)) throw error;
      // Redis restarted or its script cache was flushed: EVAL loads the script again.
      return this.run(script, false, keys, args);
    }
  }

  private prepare(ruleSet: RuleSet): Prepared {
    let prepared = this.prepared.get(ruleSet);
    if (prepared === undefined) {
      const rules = ruleSet.rules;
      const algorithm = (rules[0] as CompiledRule).algorithm;
      const single = rules.every((rule) => rule.algorithm === algorithm);
      prepared = {
        flat: rules.length === 1 && this.serverClock ? flatConsume(rules[0] as CompiledRule) : undefined,
        script: single ? SCRIPTS[algorithm] : SCRIPTS.all,
        suffixes: rules.map((rule) => `}:${rule.name}`),
        // The script for every algorithm reads each rule's algorithm first.
        ruleArgs: rules.flatMap((rule) => (single ? ruleArguments(rule) : [rule.algorithm, ...ruleArguments(rule)])),
      };
      this.prepared.set(ruleSet, prepared);
    }
    return prepared;
  }
}

function badReply(reply: unknown): FloodgateError {
  const shown = JSON.stringify(reply)?.slice(0, 120);
  return new FloodgateError(ErrorCodes.STORE_REPLY, `The Redis script answered ${shown}; is something else writing to Floodgate's keys?`);
}

function parseReply(reply: unknown, rules: readonly CompiledRule[], operation: RedisOperation): RedisEvaluation {
  if (!Array.isArray(reply)) throw badReply(reply);
  if (operation === 'refund' || operation === 'reset' || operation === 'release') return { decisions: [], now: Number(reply[0]) };
  if (reply.length !== rules.length * 5 + 1) throw badReply(reply);
  const decisions = new Array<RuleDecision>(rules.length);
  for (let i = 0; i < rules.length; i++) {
    const rule = rules[i] as CompiledRule;
    const at = i * 5;
    const retry = Number(reply[at + 3]);
    decisions[i] = {
      name: rule.name,
      allowed: Number(reply[at]) === 1,
      limit: rule.limit,
      remaining: Number(reply[at + 1]),
      resetMs: Number(reply[at + 2]),
      retryAfterMs: retry < 0 ? Number.POSITIVE_INFINITY : retry,
      delayMs: Number(reply[at + 4]),
    };
  }
  return { decisions, now: Number(reply[reply.length - 1]) };
}
