import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLimiter } from '../limiter.js';
import { algorithms } from '../rules.js';
import { storeContract } from '../testing/store-contract.js';
import { MemoryStore } from './memory-store.js';

setFlagsFromString('--expose-gc'); // the collection test asks V8 to collect

afterEach(() => {
  vi.useRealTimers();
});

/** The limiters' clock: it stands still, so no window ends while a test runs. */
const frozenClock = () => 1_700_000_000_000;

storeContract('MemoryStore', () => new MemoryStore(), { numRuns: 1000 });

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

  it('evicts the oldest key not used since the hand last passed it, over any sequence of calls (against a model)', () => {
    // The CLOCK (second-chance) approximation of least-recently-used: keys in the order they came, each with
    // a mark set by a use; at the bound, the oldest unmarked key goes, and a marked one is cleared and moved young.
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f'), fc.boolean()), { maxLength: 200 }), (calls) => {
        const store = new MemoryStore({ maxKeys: 3 });
        const ruleSet = { prefix: 'fg:', rules: createLimiter({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000 }).rules, now: () => 0 };
        const model: { key: string; used: boolean }[] = []; // oldest first
        for (const [key, peek] of calls) {
          const held = model.find((entry) => entry.key === key);
          const [decision] = peek ? store.peek(key, ruleSet, 0) : store.consume(key, ruleSet, 1, 0);
          expect(decision?.allowed).toBe(held === undefined);
          if (held !== undefined) held.used = true;
          else if (!peek) {
            if (model.length === 3) {
              for (;;) {
                const oldest = model.shift() as { key: string; used: boolean };
                if (!oldest.used) break;
                model.push({ key: oldest.key, used: false });
              }
            }
            model.push({ key, used: false });
          }
          expect(store.size('fg:', 'default')).toBe(model.length);
        }
        store.close();
      }),
      { numRuns: 300 },
    );
  });

  it('evicts in O(1): a new key at the bound costs about what it costs below it, however many keys went before', () => {
    // A Map keeps deleted entries' places until it rehashes: finding its oldest entry with a new
    // iterator walked over all of them, so each eviction cost O(evictions so far) and rotating keys
    // made every call 10-100x dearer. A cost ratio with a wide margin, in CPU time (the machine is shared).
    const maxKeys = 50_000;
    const store = new MemoryStore({ maxKeys });
    const ruleSet = { prefix: 'fg:', rules: createLimiter({ algorithm: 'fixed-window', limit: 10, windowMs: 60_000 }).rules, now: () => 0 };
    let next = 0;
    const cpuPerCall = (calls: number) => {
      const started = process.cpuUsage();
      for (let i = 0; i < calls; i++) store.consume(`key-${next++}`, ruleSet, 1, 0);
      const used = process.cpuUsage(started);
      return (used.user + used.system) / calls;
    };
    cpuPerCall(maxKeys / 2); // warm up
    const filling = cpuPerCall(maxKeys / 2);
    const evicting = cpuPerCall(3 * maxKeys);
    expect(store.size('fg:', 'default')).toBe(maxKeys);
    expect(evicting).toBeLessThan(4 * filling);
    store.close();
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

  it('sweeps by the current clock: a clock that ran a day ahead and came back forgets nothing alive', async () => {
    vi.useFakeTimers();
    for (const algorithm of algorithms) {
      let now = 1_700_000_000_000;
      const store = new MemoryStore({ sweepIntervalMs: 1000 });
      const limiter = createLimiter({ algorithm, limit: 5, windowMs: 3_600_000, store, now: () => now });
      for (let i = 0; i < 3; i++) await limiter.consume(`k${i}`); // state that lives for an hour
      now += 86_400_000; // one call with the clock a day ahead ...
      await limiter.consume('ahead');
      now -= 86_400_000; // ... then back
      vi.advanceTimersByTime(1000); // the sweeper runs by the clock as it is now
      let admitted = 0;
      for (let i = 0; i < 40; i++) if ((await limiter.consume('k0')).allowed) admitted++;
      expect(admitted, algorithm).toBe(4); // 5 an hour, one taken before
      store.close();
    }
  });

  it('drops the keys of rules no limiter uses any more once their state has expired', async () => {
    vi.useFakeTimers();
    let now = 1_700_000_000_000;
    const store = new MemoryStore({ sweepIntervalMs: 1000 });
    const limiter = createLimiter({ algorithm: 'fixed-window', limit: 5, windowMs: 10_000, store, now: () => now });
    for (let i = 0; i < 1000; i++) {
      limiter.updateRules([{ name: `rule-${i}`, algorithm: 'fixed-window', limit: 5, windowMs: 10_000 }]);
      await limiter.consume('k');
    }
    expect(store.tableCount).toBe(1000);
    now += 10_000; // every state has expired
    vi.advanceTimersByTime(1000); // swept: each table is empty; the one in use was used since the last sweep
    vi.advanceTimersByTime(1000); // empty and unused since: dropped
    expect(store.tableCount).toBe(0);
    expect((await limiter.consume('k')).remaining).toBe(4); // the rule in force gets a table again
    expect(store.tableCount).toBe(1);
    store.close();
  });

  it('drops the tables of rules given per call once their keys have expired: distinct rule names cost memory for a window, not for good (issue #29.10)', async () => {
    vi.useFakeTimers();
    let now = 1_700_000_000_000;
    const store = new MemoryStore({ sweepIntervalMs: 1000 });
    const limiter = createLimiter({ algorithm: 'fixed-window', limit: 5, windowMs: 10_000, store, now: () => now });
    for (let i = 0; i < 1000; i++) await limiter.consume('k', { rules: [{ name: `user-${i}`, algorithm: 'fixed-window', limit: 5, windowMs: 10_000 }] });
    expect(store.tableCount).toBe(1000);
    now += 10_000;
    vi.advanceTimersByTime(2000); // two sweeps: emptied, then dropped
    expect(store.tableCount).toBe(0);
    store.close();
  });

  it('can be collected once nobody holds it: its sweeper holds it weakly', async () => {
    const collected = new Set<number>();
    const registry = new FinalizationRegistry<number>((id) => collected.add(id));
    for (let i = 0; i < 200; i++) {
      const limiter = createLimiter({ limit: 5, windowMs: 60_000 }); // a MemoryStore of its own, with a sweeper once used
      await limiter.consume('k');
      registry.register(limiter.store, i);
    }
    const gc = runInNewContext('gc') as () => void;
    for (let attempt = 0; attempt < 20 && collected.size < 150; attempt++) {
      gc();
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(collected.size).toBeGreaterThan(150);
  });

  it('is closed by the limiter that created it, and left open by a limiter it was given to', async () => {
    const timerOf = (store: unknown) => (store as { timer: NodeJS.Timeout | undefined }).timer;
    const own = createLimiter({ limit: 1, windowMs: 60_000 });
    await own.consume('k');
    const created = own.store as MemoryStore;
    expect(timerOf(created)).toBeDefined();
    await own.close();
    expect(timerOf(created)).toBeUndefined();
    expect(created.tableCount).toBe(0);

    const shared = new MemoryStore();
    const given = createLimiter({ limit: 1, windowMs: 60_000, store: shared });
    await given.consume('k');
    await given.close();
    expect(timerOf(shared)).toBeDefined();
    expect(shared.tableCount).toBe(1);
    shared.close();
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

  it('keeps a blocked key while its block is remembered, then sweeps it; blocked keys count against maxKeys', async () => {
    vi.useFakeTimers();
    let now = 0;
    const store = new MemoryStore({ maxKeys: 10, sweepIntervalMs: 1000 });
    const limiter = createLimiter({ algorithm: 'gcra', limit: 1, windowMs: 1000, blockMs: 60_000, maxBlockMs: 120_000, store, now: () => now });
    for (let i = 0; i < 10; i++) {
      await limiter.consume(`k${i}`);
      expect((await limiter.consume(`k${i}`)).blocked?.started).toBe(true);
      await limiter.refund(`k${i}`); // nothing counted any more: the key stays for its block alone
    }
    expect(store.size('fg:', 'default')).toBe(10);
    now = 179_999; // the blocks ended at 60 s; escalation remembers them until 180 s
    vi.advanceTimersByTime(1000);
    expect(store.size('fg:', 'default')).toBe(10);
    expect((await limiter.consume('k0')).allowed).toBe(true);
    expect((await limiter.consume('k0')).blocked).toMatchObject({ blockMs: 120_000, strike: 2 });
    now = 180_000;
    vi.advanceTimersByTime(1000);
    expect(store.size('fg:', 'default')).toBe(1); // k0, blocked again
    for (let i = 0; i < 20; i++) await limiter.consume(`new${i}`, { cost: 2 }); // denied with no block (above the capacity), nothing kept
    expect(store.size('fg:', 'default')).toBe(1);
    for (let i = 0; i < 20; i++) {
      await limiter.consume(`new${i}`);
      await limiter.consume(`new${i}`); // a block each
    }
    expect(store.size('fg:', 'default')).toBe(10);
    store.close();
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
    const result = store.consume('k', { prefix: 'fg:', rules: limiter.rules, now: () => 0 }, 1, 0);
    expect(Array.isArray(result)).toBe(true);
    expect(result[0]).toMatchObject({ allowed: true, remaining: 1 });
  });

  it.each([
    [{ maxKeys: 0 }, 'ERR_FG_OPTION'],
    [{ maxKeys: 1.5 }, 'ERR_FG_OPTION'],
    [{ sweepIntervalMs: -1 }, 'ERR_FG_OPTION'],
    [{ sweepIntervalMs: 2 ** 31 }, 'ERR_FG_OPTION'], // setInterval would sweep every millisecond
    [{ maxkeys: 10 }, 'ERR_FG_UNKNOWN_OPTION'],
  ])('rejects %o with %s', (options, code) => {
    expect(() => new MemoryStore(options as never)).toThrow(expect.objectContaining({ code }));
  });
});
