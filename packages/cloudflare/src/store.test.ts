/*
 * DurableObjectStore's options and the rules as they travel to an object,
 * checked in Node (what the store decides is checked in workerd:
 * workers.test.ts here, and the store conformance suite of @floodgate/core).
 */
import { algorithms } from '@floodgate/core';
import { compileRule } from '@floodgate/core/internal';
import { describe, expect, it } from 'vitest';
import { ruleOptionsOf } from './protocol.js';
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
});
