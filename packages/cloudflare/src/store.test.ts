/*
 * DurableObjectStore's options, the rules as they travel to an object and
 * the verdicts as they come back, checked in Node (what the store decides is checked in workerd:
 * workers.test.ts here, and the store conformance suite of @floodgate/core).
 */
import { algorithms } from '@floodgate/core';
import { compileRule, evaluate, type Verdict } from '@floodgate/core/store';
import { describe, expect, it } from 'vitest';
import { decodeVerdict, encodeVerdict, ruleOptionsOf } from './protocol.js';
import { type DurableObjectNamespaceLike, DurableObjectStore } from './store.js';

/** A namespace that is never called here: these tests stop before any call. */
const namespace: DurableObjectNamespaceLike = {
  idFromName: (name: string) => name,
  get() {
    throw new Error('not called');
  },
};

describe('DurableObjectStore', () => {
  it.each([
    ['no options', undefined, 'ERR_FG_OPTION', /takes \{ namespace \}/],
    ['no namespace', {}, 'ERR_FG_OPTION', /namespace must be a Durable Object namespace binding \(env\.FLOODGATE/],
    ['a KV namespace', { namespace: { get: () => 'value' } }, 'ERR_FG_OPTION', /namespace must be a Durable Object namespace binding/],
    ['shards 0', { namespace, shards: 0 }, 'ERR_FG_OPTION', /shards must be a positive integer \(or unset: one object per key\), got 0/],
    ['shards 1.5', { namespace, shards: 1.5 }, 'ERR_FG_OPTION', /shards must be a positive integer/],
    ['a prefix that is not a string', { namespace, prefix: 1 }, 'ERR_FG_OPTION', /prefix must be a string/],
    ['an unknown clock', { namespace, clock: 'local' }, 'ERR_FG_OPTION', /clock must be 'server' or 'client', got 'local'/],
    ['an option of RedisStore', { namespace, client: {} }, 'ERR_FG_UNKNOWN_OPTION', /has no option 'client'; it takes namespace, shards, prefix and clock/],
  ])('refuses %s, saying what to change', (_, options, code, message) => {
    expect(() => new DurableObjectStore(options as never)).toThrow(expect.objectContaining({ code, message: expect.stringMatching(message) }));
  });

  it('puts each key in an object of its own, or in one of `shards` objects by a hash that is the same everywhere', () => {
    const perKey = new DurableObjectStore({ namespace });
    expect(perKey.objectName('user:42', { prefix: 'fg:' })).toBe('key:fg:user:42');
    expect(new DurableObjectStore({ namespace, prefix: 'app1/' }).objectName('%global', { prefix: 'fg:' })).toBe('app1/key:fg:%global');
    const sharded = new DurableObjectStore({ namespace, shards: 8 });
    // FNV-1a (32 bits) of 'fg:user:42' is 0x4aeca09d, 5 mod 8: fixed, so the same key finds the same shard in every isolate.
    const names = Array.from({ length: 200 }, (_, i) => sharded.objectName(`user:${i}`, { prefix: 'fg:' }));
    expect(new Set(names).size).toBe(8);
    expect(names.every((name) => /^shard:[0-7]\/8$/.test(name))).toBe(true);
    expect(sharded.objectName('user:42', { prefix: 'fg:' })).toBe(sharded.objectName('user:42', { prefix: 'fg:' }));
    expect(sharded.objectName('user:42', { prefix: 'fg:' })).toBe('shard:5/8');
  });
});

describe('rules on their way to an object', () => {
  it.each(algorithms)('%s: the options sent compile to the very rule the limiter holds', (algorithm) => {
    const options =
      algorithm === 'sliding-window'
        ? { name: 'r', algorithm, limit: 10, windowMs: 60_000, segments: 6, scope: 'ip' }
        : algorithm === 'leaky-bucket'
          ? { name: 'r', algorithm, limit: 10, windowMs: 60_000, burst: 4, mode: 'shape' as const }
          : ['token-bucket', 'gcra'].includes(algorithm)
            ? { name: 'r', algorithm, limit: 10, windowMs: 60_000, burst: 4, scope: 'global' }
            : { name: 'r', algorithm, limit: 10, windowMs: 60_000 };
    const rule = compileRule(options, 'rule');
    expect(compileRule(JSON.parse(JSON.stringify(ruleOptionsOf(rule))), 'rule')).toEqual(rule);
  });

  it('sends blockMs and maxBlockMs with the rule, and leaves them out when the rule blocks nobody', () => {
    const blocking = compileRule({ name: 'login', algorithm: 'fixed-window', limit: 5, windowMs: 60_000, blockMs: 900_000, maxBlockMs: 86_400_000 }, 'rule');
    expect(ruleOptionsOf(blocking)).toMatchObject({ blockMs: 900_000, maxBlockMs: 86_400_000 });
    expect(compileRule(JSON.parse(JSON.stringify(ruleOptionsOf(blocking))), 'rule')).toEqual(blocking);
    const plain = compileRule({ name: 'r', limit: 5, windowMs: 60_000 }, 'rule');
    expect(Object.keys(ruleOptionsOf(plain))).not.toContain('blockMs');
    expect(compileRule(JSON.parse(JSON.stringify(ruleOptionsOf(plain))), 'rule')).toEqual(plain);
  });
});

describe('verdicts on their way back', () => {
  const rule = compileRule({ name: 'r', algorithm: 'fixed-window', limit: 1, windowMs: 60_000 }, 'rule');
  /** A verdict of a key blocked for 10 more seconds of a block of 15, its second strike. */
  /** The verdict of a first call: what the object sends back. */
  const first = () => evaluate({ op: 'consume', rules: [rule], now: 0, cost: 1, leaseId: '' }, [null]).verdicts[0] as Verdict;
  const blocked = () => {
    const verdict = first();
    return Object.assign(verdict, { allowed: false, retryAfterMs: 10_000, remaining: 0, remainingNow: 0, blockLeftMs: 10_000, blockMs: 15_000, strike: 2 });
  };

  it('carries the block fields: a verdict comes back as it left, but for its ttl (the object keeps that)', () => {
    for (const verdict of [first(), blocked(), { ...blocked(), blockLeftMs: 15_000, retryAfterMs: 15_000, blockStarted: true }]) {
      const { ttlMs: _, ...sent } = verdict;
      expect(decodeVerdict(JSON.parse(JSON.stringify(encodeVerdict(verdict))))).toEqual(sent);
    }
    expect(decodeVerdict(encodeVerdict({ ...blocked(), retryAfterMs: Number.POSITIVE_INFINITY }))?.retryAfterMs).toBe(Number.POSITIVE_INFINITY);
  });

  it.each([
    ['the 7 numbers of an object of an older version (no block fields)', encodeVerdict(blocked()).slice(0, 7)],
    ['more left of a block than its length', encodeVerdict({ ...blocked(), blockLeftMs: 20_000, retryAfterMs: 20_000 })],
    ['a strike without a block', encodeVerdict({ ...blocked(), blockLeftMs: 0, blockMs: 0 })],
    ['a block without a strike that no longer holds (one by hand is forgotten as it ends)', encodeVerdict({ ...blocked(), strike: 0, blockLeftMs: 0 })],
    ['a block that admits', encodeVerdict({ ...blocked(), allowed: true })],
    ['a wait shorter than the block', encodeVerdict({ ...blocked(), retryAfterMs: 9_999 })],
    ['a block started with less than its length left', encodeVerdict({ ...blocked(), blockStarted: true })],
    ['a started flag of 2', [...encodeVerdict(blocked()).slice(0, 10), 2]],
    ['a negative length', [...encodeVerdict(blocked()).slice(0, 8), -1, 2, 0]],
  ])('refuses %s', (_, numbers) => {
    expect(decodeVerdict(numbers)).toBeUndefined();
  });
});
