/*
 * The keys every contender is called with: IPv4-like strings (what a default
 * key function produces), generated once per process from a fixed seed so
 * that every library sees exactly the same keys in the same order.
 */

/** mulberry32: a small deterministic PRNG (the sequence must not depend on Math.random). */
export function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/**
 * The i-th IPv4-like key, `10.a.b.c`. Built with join() so the string is flat
 * (a template literal may leave a rope that a store would flatten, and pay for, later).
 */
export const ipKey = (i: number): string => [10, (i >> 16) & 255, (i >> 8) & 255, i & 255].join('.');

/** `count` distinct keys; their hashes are computed here, so that no store pays for that during a measurement. */
export function keyPool(count: number): string[] {
  const keys = new Array<string>(count);
  for (let i = 0; i < count; i++) keys[i] = ipKey(i);
  new Set(keys); // hashes are cached in the strings themselves
  return keys;
}

/** `length` keys drawn uniformly at random from `pool` (pre-drawn, so no PRNG runs inside a timed loop). */
export function randomSequence(pool: readonly string[], length: number, seed = 7): string[] {
  const random = prng(seed);
  const sequence = new Array<string>(length);
  for (let i = 0; i < length; i++) sequence[i] = pool[Math.floor(random() * pool.length)] as string;
  return sequence;
}

/** The one key of the hot-key scenarios. */
export const HOT_KEY = '203.0.113.9';
