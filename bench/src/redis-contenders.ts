/*
 * The Redis-backed limiters compared in redis.ts, redis-memory.ts and
 * accuracy.ts, each reduced to its per-request call on one ioredis
 * connection, with its own default key naming.
 */
import { type AlgorithmName, createLimiter, type Decision, type Limiter, RedisStore, type RuleOptions } from '@floodgate/core';
import type { Options as ExpressRateLimitOptions } from 'express-rate-limit';
import type { Redis } from 'ioredis';
import { RedisStore as RateLimitRedisStore, type RedisReply } from 'rate-limit-redis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { type Contender, SCOPED_RULES, userOf } from './memory-contenders.js';

/** The six rate algorithms of the design (core may know more kinds of rule; these are the ones compared). */
export const rateAlgorithms = [
  'fixed-window',
  'sliding-window',
  'sliding-log',
  'token-bucket',
  'leaky-bucket',
  'gcra',
] as const satisfies readonly AlgorithmName[];
export type RateAlgorithm = (typeof rateAlgorithms)[number];

export type FloodgateRedisId = `floodgate-${RateAlgorithm}`;
/** Floodgate on Redis with per-call plans (issue 15), 3 scopes in one call, and 3 stacked limiters (issue 14). */
export type FloodgateVariantId = 'floodgate-fixed-window-plans' | 'floodgate-3-scopes' | 'floodgate-3-stacked';
export type RedisContenderId = 'floor' | 'rate-limit-redis' | 'rate-limiter-flexible' | FloodgateRedisId | FloodgateVariantId;

export interface RedisContenderInfo {
  id: RedisContenderId;
  label: string;
  floodgate: boolean;
}

const floodgate = (algorithm: RateAlgorithm): RedisContenderInfo => ({
  id: `floodgate-${algorithm}`,
  label: `Floodgate RedisStore, ${algorithm}`,
  floodgate: true,
});

export const redisContenderInfo: Record<RedisContenderId, RedisContenderInfo> = {
  floor: { id: 'floor', label: 'raw EVALSHA, INCR + PEXPIRE (floor)', floodgate: false },
  'rate-limit-redis': { id: 'rate-limit-redis', label: 'rate-limit-redis (express-rate-limit store)', floodgate: false },
  'rate-limiter-flexible': { id: 'rate-limiter-flexible', label: 'rate-limiter-flexible RateLimiterRedis', floodgate: false },
  'floodgate-fixed-window': floodgate('fixed-window'),
  'floodgate-sliding-window': floodgate('sliding-window'),
  'floodgate-sliding-log': floodgate('sliding-log'),
  'floodgate-token-bucket': floodgate('token-bucket'),
  'floodgate-leaky-bucket': floodgate('leaky-bucket'),
  'floodgate-gcra': floodgate('gcra'),
  'floodgate-fixed-window-plans': {
    id: 'floodgate-fixed-window-plans',
    label: 'Floodgate RedisStore, fixed-window, one of 3 plans per call',
    floodgate: true,
  },
  'floodgate-3-scopes': { id: 'floodgate-3-scopes', label: 'Floodgate RedisStore, 3 scopes in one call (global + per-IP + per-user)', floodgate: true },
  'floodgate-3-stacked': { id: 'floodgate-3-stacked', label: 'Floodgate RedisStore, 3 stacked limiters, awaited in turn', floodgate: true },
};

/**
 * The floor: the least a Redis fixed window can do per call, one EVALSHA of
 * an INCR that sets the expiry on the first hit.
 */
export const FLOOR_SCRIPT = `local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return count`;

/** The 3-scope rule set of issue 14 (see memory-contenders.ts), at this rule's limit and window. */
function scopedRules(limit: number, windowMs: number): RuleOptions[] {
  return SCOPED_RULES.map((rule) => ({ ...rule, limit, windowMs }));
}

export interface RedisRule {
  limit: number;
  windowMs: number;
}

export async function createRedisContender(id: RedisContenderId, redis: Redis, { limit, windowMs }: RedisRule): Promise<Contender> {
  switch (id) {
    case 'floor': {
      const sha = (await redis.script('LOAD', FLOOR_SCRIPT)) as string;
      const window = String(windowMs);
      return { call: (key) => redis.evalsha(sha, 1, `floor:${key}`, window), admits: (count) => (count as number) <= limit };
    }
    case 'rate-limit-redis': {
      const store = new RateLimitRedisStore({ sendCommand: (command: string, ...args: string[]) => redis.call(command, ...args) as Promise<RedisReply> });
      await store.init({ windowMs } as ExpressRateLimitOptions);
      return { call: (key) => store.increment(key), admits: (info) => (info as { totalHits: number }).totalHits <= limit };
    }
    case 'rate-limiter-flexible': {
      const limiter = new RateLimiterRedis({ storeClient: redis, points: limit, duration: Math.ceil(windowMs / 1000) });
      return { call: (key) => limiter.consume(key), admits: () => true }; // consume() rejects when it denies
    }
    case 'floodgate-fixed-window-plans': {
      const limiter = createLimiter({ algorithm: 'fixed-window', limit, windowMs, store: new RedisStore({ client: redis }) });
      const options = [1, 2, 3].map((tier) => ({ rules: [{ name: 'plan', algorithm: 'fixed-window', limit: tier * limit, windowMs }] as RuleOptions[] }));
      let plan = 0;
      return {
        call: (key) => {
          plan = plan === 2 ? 0 : plan + 1;
          return limiter.consume(key, options[plan]);
        },
        admits: (decision) => (decision as Decision).allowed,
        failure: (decision) => (decision as Decision).storeError,
      };
    }
    case 'floodgate-3-scopes': {
      const rules = scopedRules(limit, windowMs);
      const limiter = createLimiter({ rules, store: new RedisStore({ client: redis }) });
      return {
        call: (key) => limiter.consume({ ip: key, user: userOf(key) }),
        admits: (decision) => (decision as Decision).allowed,
        failure: (decision) => (decision as Decision).storeError,
      };
    }
    case 'floodgate-3-stacked': {
      // One limiter per scope, each with a prefix of its own (one store), called in turn.
      const store = new RedisStore({ client: redis });
      const [all, perIp, perUser] = scopedRules(limit, windowMs).map(({ scope: _scope, ...rule }) =>
        createLimiter({ ...rule, store, prefix: `fg:${rule.name}:` }),
      ) as [Limiter, Limiter, Limiter];
      return {
        call: async (key) => {
          const first = await all.consume('all');
          if (!first.allowed || first.storeError) return first;
          const second = await perIp.consume(key);
          if (!second.allowed || second.storeError) return second;
          return perUser.consume(userOf(key));
        },
        admits: (decision) => (decision as Decision).allowed,
        failure: (decision) => (decision as Decision).storeError,
      };
    }
    default: {
      const algorithm = id.slice('floodgate-'.length) as RateAlgorithm;
      // A sliding window weighs counts by ms: its size bound (4 × limit × windowMs ≤ 2^50) caps an hour's limit
      // at 7.8 × 10^7, still far above what a throughput run sends one key.
      const ruleLimit = algorithm === 'sliding-window' ? Math.min(limit, Math.floor(2 ** 50 / (4 * windowMs))) : limit;
      const limiter = createLimiter({ algorithm, limit: ruleLimit, windowMs, store: new RedisStore({ client: redis }) });
      return {
        call: (key) => limiter.consume(key),
        admits: (decision) => (decision as Decision).allowed,
        // onStoreError 'allow' would admit a call the store never saw: count it as a failure, so it shows.
        failure: (decision) => (decision as Decision).storeError,
      };
    }
  }
}

export interface RunOutcome {
  admitted: number;
  /** Calls that failed with an Error (not a library's denial). */
  errors: number;
  firstError?: string;
}

/** Runs `ops` calls over `keys`, `inFlight` at a time (1 = each awaited in turn). */
export async function runCalls(contender: Contender, keys: readonly string[], ops: number, inFlight: number): Promise<RunOutcome> {
  const outcome: RunOutcome = { admitted: 0, errors: 0 };
  let next = 0;
  const lane = async () => {
    while (next < ops) {
      const key = keys[next++ % keys.length] as string;
      try {
        const result = await contender.call(key);
        const failure = contender.failure?.(result);
        if (failure !== undefined) {
          outcome.errors++;
          outcome.firstError ??= failure.message;
        } else if (contender.admits(result)) {
          outcome.admitted++;
        }
      } catch (error) {
        // rate-limiter-flexible denies by rejecting with a result object; anything that is an Error is a failure.
        if (error instanceof Error) {
          outcome.errors++;
          outcome.firstError ??= error.message;
        }
      }
    }
  };
  await Promise.all(Array.from({ length: inFlight }, lane));
  return outcome;
}
