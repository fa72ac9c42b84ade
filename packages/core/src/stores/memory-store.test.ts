import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLimiter } from '../limiter.js';
import { algorithms } from '../rules.js';
import { MemoryStore } from './memory-store.js';

afterEach(() => {
  vi.useRealTimers();
});

/** The limiters' clock: it stands still, so no window ends while a test runs. */
const frozenClock = () => 1_700_000_000_000;

describe('MemoryStore', () => {
  it('forgets the least recently used key when a new key arrives at maxKeys', async () => {
    const store = new MemoryStore({ maxKeys: 3 });
    const limiter = createLimiter({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000, store, now: frozenClock });
    for (const key of ['a', 'b', 'c']) await limiter.consume(key);
    await limiter.peek('a'); // a is now more recent than b
    await limiter.consume('d'); // evicts b
    expect(store.size('fg:', 'default')).toBe(3);
    expect((await limiter.consume('a')).allowed).toBe(false);
    expect((await limiter.consume('c')).allowed).toBe(false);
    expect((await limiter.consume('d')).allowed).toBe(false);
    expect((await limiter.consume('b')).allowed).toBe(true); // b was forgotten: it starts over
  });

  it('never holds more than maxKeys keys per rule, whatever the traffic', async () => {
    const store = new MemoryStore({ maxKeys: 100 });
    const limiter = createLimiter({ algorithm: 'sliding-log', limit: 5, windowMs: 60_000, store });
    for (let i = 0; i < 5000; i++) await limiter.consume(`key-${i % 777}-${i}`);
    expect(store.size('fg:', 'default')).toBe(100);
  });

  it('sweeps expired state with one timer that does not keep the process alive', async () => {
    vi.useFakeTimers();
    let now = 0;
    const store = new MemoryStore({ sweepIntervalMs: 1000 });
    const limiter = createLimiter({ algorithm: 'fixed-window', limit: 5, windowMs: 10_000, store, now: () => now });
    for (let i = 0; i < 50; i++) await limiter.consume(`k${i}`);
    expect(store.size('fg:', 'default')).toBe(50);
    expect(vi.getTimerCount()).toBe(1);
    now = 9_999;
    await limiter.consume('fresh');
    vi.advanceTimersByTime(1000);
    expect(store.size('fg:', 'default')).toBe(51); // nothing expired yet
    now = 10_000;
    await limiter.consume('late'); // the store learns the time from its callers
    vi.advanceTimersByTime(1000);
    expect(store.size('fg:', 'default')).toBe(1); // only 'late', in the new window
    store.close();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('unrefs its sweeper', async () => {
    const store = new MemoryStore();
    const limiter = createLimiter({ limit: 1, windowMs: 1000, store });
    await limiter.consume('k');
    const timer = (store as unknown as { timer: NodeJS.Timeout }).timer;
    expect(timer.hasRef()).toBe(false);
    store.close();
  });

  it('forgets a key whose refunds bring it back to full capacity', async () => {
    const store = new MemoryStore();
    for (const algorithm of algorithms.filter((a) => a !== 'concurrency')) {
      const limiter = createLimiter({ algorithm, limit: 3, windowMs: 1000, store, prefix: `${algorithm}:`, now: frozenClock });
      await limiter.consume('k', { cost: 2 });
      await limiter.refund('k', { cost: 2 });
      expect(store.size(`${algorithm}:`, 'default')).toBe(0);
      expect((await limiter.peek('k')).remaining).toBe(3);
    }
  });

  it('forgets a key whose concurrency leases are all released', async () => {
    const store = new MemoryStore();
    const limiter = createLimiter({ algorithm: 'concurrency', limit: 3, windowMs: 1000, store, now: frozenClock });
    const a = await limiter.consume('k', { cost: 2 });
    const b = await limiter.consume('k');
    expect((await limiter.consume('k')).allowed).toBe(false);
    await limiter.release('k', a.leaseId as string);
    expect(store.size('fg:', 'default')).toBe(1);
    await limiter.release('k', b.leaseId as string);
    expect(store.size('fg:', 'default')).toBe(0);
    expect((await limiter.peek('k')).remaining).toBe(3);
  });

  it('keeps limiters with different prefixes apart in one store', async () => {
    const store = new MemoryStore();
    const a = createLimiter({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000, store, prefix: 'a:', now: frozenClock });
    const b = createLimiter({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000, store, prefix: 'b:', now: frozenClock });
    expect((await a.consume('k')).allowed).toBe(true);
    expect((await b.consume('k')).allowed).toBe(true);
    expect((await a.consume('k')).allowed).toBe(false);
  });

  it('answers synchronously', () => {
    const store = new MemoryStore();
    const limiter = createLimiter({ limit: 2, windowMs: 1000, store });
    const result = store.consume('k', { prefix: 'fg:', rules: limiter.rules }, 1, 0);
    expect(Array.isArray(result)).toBe(true);
    expect(result[0]).toMatchObject({ allowed: true, remaining: 1 });
  });

  it.each([
    [{ maxKeys: 0 }, 'ERR_FG_OPTION'],
    [{ maxKeys: 1.5 }, 'ERR_FG_OPTION'],
    [{ sweepIntervalMs: -1 }, 'ERR_FG_OPTION'],
    [{ maxkeys: 10 }, 'ERR_FG_UNKNOWN_OPTION'],
  ])('rejects %o with %s', (options, code) => {
    expect(() => new MemoryStore(options as never)).toThrow(expect.objectContaining({ code }));
  });
});
