import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Decision } from './decision.js';
import { FloodgateError } from './errors.js';
import { createLimiter } from './limiter.js';
import { derivedPrefix, inheritOptions, type LimiterOptions, overlayLimiterOptions, parseLimiterOptions } from './options.js';
import { compileRule, type RuleOptions } from './rules.js';
import { MemoryStore } from './stores/memory-store.js';
import type { RuleSet, Store } from './stores/types.js';
import { algorithmNames, ruleOptions } from './test-support/arbitraries.js';
import { expectedDecision, referenceLimiter } from './testing/reference.js';

/** A clock the test moves by hand. */
function manualClock(start = 1_700_000_000_000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => (now += ms), set: (ms: number) => (now = ms) };
}

const operation = fc.oneof(
  {
    weight: 10,
    arbitrary: fc.record({ op: fc.constant('consume' as const), key: fc.constantFrom('a', 'b'), gap: fc.nat(150), cost: fc.integer({ min: 1, max: 6 }) }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('peek' as const), key: fc.constantFrom('a', 'b'), gap: fc.nat(150), cost: fc.constant(1) }) },
  {
    weight: 2,
    arbitrary: fc.record({ op: fc.constant('refund' as const), key: fc.constantFrom('a', 'b'), gap: fc.nat(150), cost: fc.integer({ min: 1, max: 4 }) }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('reset' as const), key: fc.constantFrom('a', 'b'), gap: fc.nat(150), cost: fc.constant(1) }) },
);

const ruleList = fc
  .array(fc.constantFrom(...algorithmNames), { minLength: 1, maxLength: 3 })
  .chain((names) => fc.tuple(...names.map((algorithm, i) => ruleOptions(algorithm, `rule-${i}`))));

describe('createLimiter on the memory store', () => {
  it('agrees with the rules composed from the pure algorithms: all-or-nothing, binding rule, peek, refund, reset', async () => {
    await fc.assert(
      fc.asyncProperty(ruleList, fc.array(operation, { minLength: 1, maxLength: 50 }), async (rules, operations) => {
        const clock = manualClock();
        const limiter = createLimiter({ rules, now: clock.now });
        const reference = referenceLimiter(rules.map((r, i) => compileRule(r, `rules[${i}]`)));
        for (const { op, key, gap, cost } of operations) {
          clock.advance(gap);
          const now = clock.now();
          if (op === 'consume') {
            const { leaseId, ...decision } = await limiter.consume(key, { cost });
            expect(decision).toEqual(expectedDecision(reference.consume(key, now, cost, leaseId)));
          } else if (op === 'peek') {
            expect(await limiter.peek(key)).toEqual(expectedDecision(reference.peek(key, now)));
          } else if (op === 'refund') {
            reference.refund(key, now, cost);
            await limiter.refund(key, { cost });
          } else {
            reference.reset(key);
            await limiter.reset(key);
          }
        }
      }),
      { numRuns: 200 },
    );
  });

  it('applies the SMS rules (1/minute, 5/hour, 10/day) and names the rule that bound each denial', async () => {
    const clock = manualClock(Date.UTC(2026, 0, 1));
    const limiter = createLimiter({
      now: clock.now,
      rules: [
        { name: 'per-minute', algorithm: 'fixed-window', limit: 1, windowMs: 60_000 },
        { name: 'per-hour', algorithm: 'fixed-window', limit: 5, windowMs: 3_600_000 },
        { name: 'per-day', algorithm: 'fixed-window', limit: 10, windowMs: 86_400_000 },
      ],
    });
    const outcomes: string[] = [];
    for (let minute = 0; minute < 60 * 3; minute++) {
      const first = await limiter.consume('+15550100');
      const second = await limiter.consume('+15550100');
      outcomes.push(`${first.allowed ? 'ok' : first.rule}/${second.allowed ? 'ok' : second.rule}`);
      clock.advance(60_000);
    }
    expect(outcomes.slice(0, 4)).toEqual(Array(4).fill('ok/per-minute'));
    // The 6th send of the hour breaks both per-minute and per-hour: per-hour binds, it waits longer.
    expect(outcomes[4]).toBe('ok/per-hour');
    expect(outcomes[5]).toBe('per-hour/per-hour');
    expect(outcomes.filter((o) => o.startsWith('ok'))).toHaveLength(10);
    expect(outcomes[60]).toBe('ok/per-minute'); // a new hour
    expect(outcomes[120]).toBe('per-day/per-day'); // the 11th send of the day
    const denied = await limiter.consume('+15550100');
    expect(denied.rule).toBe('per-day');
    expect(denied.retryAfterMs).toBe(86_400_000 - 3 * 3_600_000);
  });

  it('fills in the documented defaults', async () => {
    const limiter = createLimiter({ limit: 3, windowMs: 1000 });
    expect(limiter.rules).toEqual([
      expect.objectContaining({ name: 'default', algorithm: 'sliding-window', limit: 3, windowMs: 1000, segments: 1, mode: 'police' }),
    ]);
    const bucket = createLimiter({ algorithm: 'token-bucket', limit: 7, windowMs: 1000 });
    expect(bucket.rules[0]?.burst).toBe(7);
    const decision = await limiter.consume('k');
    expect(decision).toMatchObject({ allowed: true, limit: 3, remaining: 2, retryAfterMs: 0, delayMs: 0, rule: 'default' });
    expect(decision.storeError).toBeUndefined();
  });

  it('peek reports the state without consuming', async () => {
    const clock = manualClock();
    const limiter = createLimiter({ algorithm: 'fixed-window', limit: 2, windowMs: 1000, now: clock.now });
    expect(await limiter.peek('k')).toMatchObject({ allowed: true, remaining: 2, resetMs: 0 });
    await limiter.consume('k');
    await limiter.consume('k');
    const peeked = await limiter.peek('k');
    expect(peeked).toMatchObject({ allowed: false, remaining: 0 });
    expect(peeked.retryAfterMs).toBe(peeked.resetMs);
    expect(await limiter.peek('k')).toEqual(peeked);
  });

  it('denies a cost above the capacity with retryAfterMs = Infinity and takes nothing', async () => {
    const limiter = createLimiter({ algorithm: 'token-bucket', limit: 5, windowMs: 1000, burst: 8 });
    const decision = await limiter.consume('k', { cost: 9 });
    expect(decision).toMatchObject({ allowed: false, retryAfterMs: Number.POSITIVE_INFINITY, remaining: 8 });
    expect((await limiter.consume('k', { cost: 8 })).allowed).toBe(true);
  });

  it('rejects a bad key or cost at call time with ERR_FG_KEY / ERR_FG_COST and leaves other keys alone', async () => {
    const limiter = createLimiter({ limit: 1, windowMs: 1000 });
    for (const key of ['', undefined, 42, null]) {
      await expect(limiter.consume(key as string)).rejects.toMatchObject({ name: 'FloodgateError', code: 'ERR_FG_KEY' });
    }
    for (const cost of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '2']) {
      await expect(limiter.consume('k', { cost: cost as number })).rejects.toMatchObject({ code: 'ERR_FG_COST' });
    }
    expect((await limiter.peek('k')).remaining).toBe(1);
  });

  it('stores keys longer than 256 bytes as their SHA-256, in a namespace no raw key can reach', async () => {
    const seen: string[] = [];
    const memory = new MemoryStore();
    const recording: Store = {
      consume: (keys, ruleSet: RuleSet, cost, now) => {
        seen.push(keys as string);
        return memory.consume(keys, ruleSet, cost, now);
      },
      peek: (keys, ruleSet, now) => memory.peek(keys, ruleSet, now),
      refund: (keys, ruleSet, cost, now) => memory.refund(keys, ruleSet, cost, now),
      reset: (keys, ruleSet) => memory.reset(keys, ruleSet),
    };
    const limiter = createLimiter({ limit: 1, windowMs: 60_000, store: recording });
    const long = 'x'.repeat(300);
    await limiter.consume(`${long}a`);
    await limiter.consume(`${long}b`);
    await limiter.consume('é'.repeat(128)); // 256 bytes: kept
    await limiter.consume('é'.repeat(129)); // 258 bytes: hashed
    expect(seen[0]).toMatch(/^%sha256=[0-9a-f]{64}$/);
    expect(seen[1]).toMatch(/^%sha256=[0-9a-f]{64}$/);
    expect(seen[0]).not.toBe(seen[1]);
    expect(seen[2]).toBe('é'.repeat(128));
    expect(seen[3]).toMatch(/^%sha256=/);
    expect((await limiter.consume(`${long}a`)).allowed).toBe(false);
    // The hash of a long key, sent as a key of its own, is another key: it cannot spend the long key's budget.
    const hex = (seen[0] as string).slice('%sha256='.length);
    for (const raw of [`sha256:${hex}`, `%sha256=${hex}`]) expect((await limiter.consume(raw)).allowed).toBe(true);
  });

  it('reads a lone surrogate as U+FFFD, as it reaches Redis, so that both stores see the same key', async () => {
    const limiter = createLimiter({ limit: 1, windowMs: 60_000 });
    expect((await limiter.consume('user\uD800')).allowed).toBe(true);
    expect((await limiter.consume('user\uDC00')).allowed).toBe(false);
    expect((await limiter.consume('user\uFFFD')).allowed).toBe(false);
    expect((await limiter.consume('user\uD83D\uDE00')).allowed).toBe(true); // a pair is a character
  });

  it('takes new rules on the next call and keeps the state of rules whose name and algorithm stay', async () => {
    const clock = manualClock(0);
    const limiter = createLimiter({ algorithm: 'fixed-window', limit: 2, windowMs: 10_000, now: clock.now });
    await limiter.consume('k');
    await limiter.consume('k');
    expect((await limiter.consume('k')).allowed).toBe(false);
    limiter.updateRules([{ name: 'default', algorithm: 'fixed-window', limit: 3, windowMs: 10_000 }]);
    const next = await limiter.consume('k');
    expect(next).toMatchObject({ allowed: true, remaining: 0, limit: 3 });
    expect(() => limiter.updateRules([{ name: 'default', algorithm: 'fixed-window', limit: -1, windowMs: 10_000 }])).toThrow(
      expect.objectContaining({ code: 'ERR_FG_LIMIT' }),
    );
    expect(limiter.rules[0]?.limit).toBe(3);
    limiter.updateRules({ algorithm: 'gcra', limit: 1, windowMs: 1000 });
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, rule: 'default' });
  });

  it('carries bucket state over a rule change: drained at its own rate until the next call, then counted in the new units', async () => {
    const clock = manualClock(0);
    const limiter = createLimiter({ algorithm: 'token-bucket', limit: 10, windowMs: 1000, now: clock.now });
    await limiter.consume('k', { cost: 10 }); // empty
    limiter.updateRules({ algorithm: 'token-bucket', limit: 3, windowMs: 1000, burst: 10 });
    expect((await limiter.peek('k')).remaining).toBe(0); // ten tokens of debt, under either rule
    clock.advance(500); // the debt drains at the rate it was written with (10 a second) until the next call ...
    expect((await limiter.peek('k')).remaining).toBe(5);
    expect((await limiter.consume('k')).remaining).toBe(4); // ... which counts it under the new rule
    clock.advance(1000); // from then on, 3 a second
    expect((await limiter.peek('k')).remaining).toBe(7);
    clock.advance(10_000);
    expect((await limiter.peek('k')).remaining).toBe(10);
  });

  it('decides a call under the rules it names (a plan): counts kept by rule name from plan to plan', async () => {
    const clock = manualClock();
    const limiter = createLimiter({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000, now: clock.now });
    const free = [{ name: 'default', algorithm: 'fixed-window', limit: 3, windowMs: 60_000 }] as const;
    const paid = [{ name: 'default', algorithm: 'fixed-window', limit: 10, windowMs: 60_000 }] as const;
    const remaining: number[] = [];
    for (let i = 0; i < 3; i++) remaining.push((await limiter.consume('tenant', { rules: free })).remaining);
    expect(remaining).toEqual([2, 1, 0]);
    expect((await limiter.consume('tenant', { rules: free })).allowed).toBe(false);
    // The tenant upgrades: its three calls count under the paid plan too.
    expect(await limiter.consume('tenant', { rules: paid })).toMatchObject({ allowed: true, remaining: 6, limit: 10 });
    expect((await limiter.peek('tenant', { rules: free })).remaining).toBe(0);
    expect((await limiter.peek('tenant')).remaining).toBe(96); // the limiter's own rule, same name: same count
    await limiter.refund('tenant', { cost: 4, rules: paid });
    expect((await limiter.peek('tenant', { rules: paid })).remaining).toBe(10);
    expect(limiter.rulesFor(paid)[0]?.limit).toBe(10);
    expect(limiter.rulesFor()).toBe(limiter.rules);
  });

  it('compiles a plan once per array, and per content for arrays built anew each call: bounded, whatever the callers do', async () => {
    const limiter = createLimiter({ limit: 100, windowMs: 60_000 });
    const plan = [{ limit: 5, windowMs: 60_000 }];
    const first = limiter.rulesFor(plan);
    expect(limiter.rulesFor(plan)).toBe(first); // the same array: nothing compiled again
    expect(limiter.rulesFor([{ limit: 5, windowMs: 60_000 }])).toBe(first); // a new, equal array: found by content
    const byContent = (limiter as unknown as { byContent: Map<string, unknown> }).byContent;
    for (let i = 0; i < 10_000; i++) await limiter.consume('k', { rules: [{ limit: 5 + (i % 3), windowMs: 60_000 }] });
    expect(byContent.size).toBe(3); // three plans, ten thousand arrays
    for (let i = 0; i < 1_000; i++) limiter.rulesFor([{ limit: 1000 + i, windowMs: 60_000 }]);
    expect(byContent.size).toBeLessThanOrEqual(256); // a thousand plans: the oldest forgotten
  });

  it('rejects what a call does not take: unknown options, bad plans', async () => {
    const limiter = createLimiter({ limit: 5, windowMs: 1000 });
    await expect(limiter.consume('k', { coast: 2 } as never)).rejects.toMatchObject({ code: 'ERR_FG_UNKNOWN_OPTION' });
    await expect(limiter.consume('k', { cost: 1, weight: 2 } as never)).rejects.toMatchObject({ code: 'ERR_FG_UNKNOWN_OPTION' });
    await expect(limiter.peek('k', { cost: 2 } as never)).rejects.toMatchObject({ code: 'ERR_FG_UNKNOWN_OPTION' });
    await expect(limiter.consume('k', { rules: { limit: 5, windowMs: 1000 } } as never)).rejects.toMatchObject({ code: 'ERR_FG_RULES' });
    await expect(limiter.consume('k', { rules: [{ limit: 0, windowMs: 1000 }] })).rejects.toMatchObject({ code: 'ERR_FG_LIMIT' });
    await expect(limiter.consume('k', { rules: [] })).rejects.toMatchObject({ code: 'ERR_FG_RULES' });
    expect((await limiter.consume('k')).remaining).toBe(4);
  });

  it('checks an options object reused from call to call each time: a changed cost, plan or name is seen', async () => {
    const limiter = createLimiter({ limit: 10, windowMs: 60_000 });
    const free = [{ name: 'plan', limit: 3, windowMs: 60_000 }];
    const paid = [{ name: 'plan', limit: 10, windowMs: 60_000 }];
    const options: { cost?: unknown; rules?: typeof free; [name: string]: unknown } = { cost: 1, rules: free };
    for (let i = 0; i < 3; i++) await limiter.consume('k', options as never); // warm: the same object, good each time
    options.cost = 0;
    await expect(limiter.consume('k', options as never)).rejects.toMatchObject({ code: 'ERR_FG_COST' });
    options.cost = 2;
    expect(await limiter.consume('k', options as never)).toMatchObject({ allowed: false, limit: 3 }); // 3 + 2 > 3, not cost 1
    options.rules = paid;
    expect(await limiter.consume('k', options as never)).toMatchObject({ allowed: true, limit: 10, remaining: 5 });
    options.rules = { limit: 5, windowMs: 1000 } as never;
    await expect(limiter.consume('k', options as never)).rejects.toMatchObject({ code: 'ERR_FG_RULES' });
    options.rules = paid;
    options.coast = 2;
    await expect(limiter.consume('k', options as never)).rejects.toMatchObject({ code: 'ERR_FG_UNKNOWN_OPTION' });
    delete options.coast;
    options.cost = undefined;
    expect(await limiter.consume('k', options as never)).toMatchObject({ allowed: true, remaining: 4 });
    expect((await limiter.peek('k', { rules: paid })).remaining).toBe(4); // the refused calls consumed nothing
  });

  it('carries at most a full bucket of debt over to a much slower leaky bucket', async () => {
    const clock = manualClock(0);
    const limiter = createLimiter({ algorithm: 'leaky-bucket', limit: 100_000_000, windowMs: 100_000_000, now: clock.now });
    expect((await limiter.consume('k', { cost: 100_000_000 })).allowed).toBe(true); // full
    // 10^8 tokens are 10^16 units of the new rule: a debt of 3 years, and past what doubles keep exact.
    limiter.updateRules({ algorithm: 'leaky-bucket', limit: 1, windowMs: 100_000_000 });
    expect(await limiter.peek('k')).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 100_000_000, resetMs: 100_000_000 });
    clock.advance(100_000_000);
    expect((await limiter.consume('k')).allowed).toBe(true);
  });

  it('emits allowed and limited events with the decision and the store latency', async () => {
    const limiter = createLimiter({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000, now: manualClock().now });
    const events: string[] = [];
    const off = limiter.on('allowed', (e) => events.push(`allowed:${e.key}:${e.rule}:${e.decision.remaining}:${e.latencyMs >= 0}`));
    limiter.on('limited', (e) => events.push(`limited:${e.key}:${e.decision.retryAfterMs > 0}`));
    await limiter.consume('k');
    await limiter.consume('k');
    off();
    await limiter.reset('k');
    await limiter.consume('k');
    expect(events).toEqual(['allowed:k:default:0:true', 'limited:k:true']);
  });
});

/** A store that fails the way a dead network store does: every call rejects (or never answers). */
function brokenStore(mode: 'reject' | 'hang'): Store {
  const fail = () => (mode === 'reject' ? Promise.reject(new Error('connection refused')) : new Promise<never>(() => {}));
  return { consume: fail, peek: fail, refund: fail, reset: fail };
}

describe('when the store fails', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("allows with storeError set under onStoreError: 'allow' (the default), and emits 'error'", async () => {
    const limiter = createLimiter({ limit: 1, windowMs: 1000, store: brokenStore('reject') });
    const errors: string[] = [];
    limiter.on('error', (e) => errors.push(`${e.key}:${e.error.message}:${e.decision?.allowed}`));
    const decision = await limiter.consume('k');
    expect(decision.allowed).toBe(true);
    expect(decision.storeError?.message).toBe('connection refused');
    expect(errors).toEqual(['k:connection refused:true']);
  });

  it('treats a store that answers nonsense as a failed store, whether it answers at once or later', async () => {
    for (const answer of [() => undefined, () => Promise.resolve(undefined), () => [], () => 42]) {
      const nonsense = answer as unknown as Store['consume'];
      const limiter = createLimiter({ limit: 1, windowMs: 1000, store: { ...brokenStore('reject'), consume: nonsense }, onStoreError: 'deny' });
      limiter.on('error', () => {});
      const decision = await limiter.consume('k');
      expect(decision.allowed).toBe(false);
      expect(decision.storeError).toBeInstanceOf(Error);
    }
  });

  it("denies under onStoreError: 'deny'", async () => {
    const limiter = createLimiter({ limit: 1, windowMs: 1000, store: brokenStore('reject'), onStoreError: 'deny' });
    limiter.on('error', () => {});
    const decision = await limiter.consume('k');
    expect(decision).toMatchObject({ allowed: false, retryAfterMs: 1000 });
    expect(decision.storeError).toBeInstanceOf(Error);
  });

  it('lets an insurance limiter decide', async () => {
    const insurance = createLimiter({ algorithm: 'fixed-window', limit: 2, windowMs: 60_000, now: manualClock().now });
    const limiter = createLimiter({ limit: 100, windowMs: 1000, store: brokenStore('reject'), onStoreError: insurance });
    limiter.on('error', () => {});
    const results: boolean[] = [];
    for (let i = 0; i < 3; i++) results.push((await limiter.consume('k')).allowed);
    expect(results).toEqual([true, true, false]);
    expect((await limiter.consume('k')).storeError?.message).toBe('connection refused');
  });

  it("lets the insurance limiter decide a call under the call's own rules (its plan)", async () => {
    const insurance = createLimiter({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000, now: manualClock().now });
    const limiter = createLimiter({ limit: 100, windowMs: 1000, store: brokenStore('reject'), onStoreError: insurance });
    limiter.on('error', () => {});
    const plan = [{ name: 'default', algorithm: 'fixed-window', limit: 1, windowMs: 60_000 }] as const;
    expect((await limiter.consume('k', { rules: plan })).allowed).toBe(true);
    const denied = await limiter.consume('k', { rules: plan });
    expect([denied.allowed, denied.limit, denied.storeError?.message]).toEqual([false, 1, 'connection refused']);
  });

  it("gives an insurance limiter's leases back to it, not to the failing store", async () => {
    // During an outage, a concurrency limit of 2 kept by the insurance: released leases make room again.
    const insurance = createLimiter({ algorithm: 'concurrency', limit: 2, windowMs: 60_000, now: manualClock().now });
    const limiter = createLimiter({ algorithm: 'concurrency', limit: 2, windowMs: 60_000, store: brokenStore('reject'), onStoreError: insurance });
    limiter.on('error', () => {});
    const allowed: boolean[] = [];
    for (let i = 0; i < 5; i++) {
      const decision = await limiter.consume('k');
      allowed.push(decision.allowed);
      expect(decision.leaseId).toMatch(/^~1\./); // a lease of the insurance, marked so
      await limiter.release('k', decision.leaseId as string);
    }
    expect(allowed).toEqual([true, true, true, true, true]);
    expect((await insurance.peek('k')).remaining).toBe(2);
    // And the insurance still limits: 2 in flight, the third denied until one is released.
    const held = [await limiter.consume('k'), await limiter.consume('k')];
    expect(held.map((decision) => decision.allowed)).toEqual([true, true]);
    expect((await limiter.consume('k')).allowed).toBe(false);
    await limiter.release('k', held[0]?.leaseId as string);
    expect((await limiter.consume('k')).allowed).toBe(true);
  });

  it('answers within timeoutMs when the store never answers', async () => {
    // On fake timers the answer must come at timeoutMs exactly, however slow the machine.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const limiter = createLimiter({ limit: 1, windowMs: 1000, store: brokenStore('hang'), timeoutMs: 50 });
    limiter.on('error', () => {});
    let answered = false;
    const pending = limiter.consume('k').finally(() => {
      answered = true;
    });
    await vi.advanceTimersByTimeAsync(49);
    expect(answered).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(answered).toBe(true);
    const decision = await pending;
    expect(decision.allowed).toBe(true);
    expect(decision.storeError).toMatchObject({ code: 'ERR_FG_STORE_TIMEOUT' });
  });

  it('times out each call at its own deadline when several are in flight, and never a call the store answered', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const memory = new MemoryStore();
    // Keys starting with 'hang' never get an answer; the others get the memory store's, 5 ms later.
    const store: Store = {
      ...brokenStore('hang'),
      consume: (keys, ...rest) =>
        String(keys).startsWith('hang')
          ? new Promise<never>(() => {})
          : new Promise((resolve) => setTimeout(() => resolve(memory.consume(keys, ...rest) as ReturnType<Store['consume']>), 5)),
    };
    const limiter = createLimiter({ limit: 5, windowMs: 60_000, store, timeoutMs: 50, onStoreError: 'deny' });
    limiter.on('error', () => {});
    const answered: string[] = [];
    const call = (key: string) =>
      limiter.consume(key).then((decision) => answered.push(`${key}:${decision.storeError === undefined ? 'answered' : 'timed out'}`));
    void call('hang-a'); // t = 0, due at 50
    await vi.advanceTimersByTimeAsync(10);
    void call('served'); // t = 10, answered at 15
    await vi.advanceTimersByTimeAsync(10);
    void call('hang-b'); // t = 20, due at 70
    await vi.advanceTimersByTimeAsync(29);
    expect(answered).toEqual(['served:answered']);
    await vi.advanceTimersByTimeAsync(1);
    expect(answered).toEqual(['served:answered', 'hang-a:timed out']);
    await vi.advanceTimersByTimeAsync(19);
    expect(answered).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(answered).toEqual(['served:answered', 'hang-a:timed out', 'hang-b:timed out']);
    // And the timer starts again for the calls after a quiet spell.
    void call('hang-c');
    await vi.advanceTimersByTimeAsync(50);
    expect(answered.at(-1)).toBe('hang-c:timed out');
  });

  it("says in 'error' which call failed and how long it took: timeoutMs for a store that never answers", async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const hang = () => new Promise<never>(() => {});
    const limiter = createLimiter({ limit: 1, windowMs: 1000, store: { ...brokenStore('hang'), release: hang }, timeoutMs: 50 });
    const seen: { operation: string; latencyMs: number; decided?: boolean }[] = [];
    limiter.on('error', ({ operation, latencyMs, decision }) => seen.push({ operation, latencyMs, decided: decision?.allowed }));
    const calls = [limiter.consume('k'), limiter.peek('k'), limiter.refund('k'), limiter.release('k', '1.lease')];
    await vi.advanceTimersByTimeAsync(50);
    await Promise.all(calls);
    expect(seen).toEqual([
      { operation: 'consume', latencyMs: 50, decided: true },
      { operation: 'peek', latencyMs: 50, decided: true },
      { operation: 'refund', latencyMs: 50, decided: undefined },
      { operation: 'release', latencyMs: 50, decided: undefined },
    ]);
  });

  it('does not reject a refund, and logs at most one warning per 10 s when nobody listens', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    vi.useFakeTimers({ toFake: ['Date'] }); // the 10 s are counted on Date.now, which stands still here
    try {
      const limiter = createLimiter({ limit: 1, windowMs: 1000, store: brokenStore('reject') });
      await expect(limiter.refund('k')).resolves.toBeUndefined();
      for (let i = 0; i < 20; i++) await limiter.consume('k');
      expect(warn).toHaveBeenCalledTimes(1);
    } finally {
      warn.mockRestore();
    }
  });

  it('stops calling a failing store for a second after 5 failures in a row, then probes and recovers', async () => {
    // The breaker counts on performance.now: faked, the 20 calls below fall within its second however slow the machine.
    vi.useFakeTimers({ toFake: ['performance'] });
    let healthy = false;
    let calls = 0;
    const memory = new MemoryStore();
    const flaky: Store = {
      consume: (...args) => {
        calls++;
        return healthy ? memory.consume(...args) : Promise.reject(new Error('connection refused'));
      },
      peek: (...args) => memory.peek(...args),
      refund: (...args) => memory.refund(...args),
      reset: (...args) => memory.reset(...args),
    };
    const limiter = createLimiter({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000, store: flaky, now: manualClock().now });
    const codes: string[] = [];
    limiter.on('error', (e) => codes.push((e.error as FloodgateError).code ?? e.error.message));
    for (let i = 0; i < 20; i++) expect((await limiter.consume('k')).allowed).toBe(true); // 'allow' policy
    expect(calls).toBe(5);
    expect(codes.slice(4, 6)).toEqual(['connection refused', 'ERR_FG_STORE_UNAVAILABLE']);
    healthy = true;
    vi.advanceTimersByTime(1_100);
    const probe = await limiter.consume('k');
    expect(probe.storeError).toBeUndefined();
    expect(probe.remaining).toBe(99);
    expect((await limiter.consume('k')).remaining).toBe(98);
    expect(calls).toBe(7);
  });

  it('passes key and cost errors through instead of treating them as store errors', async () => {
    const limiter = createLimiter({ limit: 1, windowMs: 1000, store: brokenStore('reject'), onStoreError: 'deny' });
    await expect(limiter.consume('')).rejects.toBeInstanceOf(FloodgateError);
  });
});

describe('limiters sharing a store', () => {
  const reuse = expect.objectContaining({ code: 'ERR_FG_STORE_REUSE' });

  it('refuses a second limiter that would count a rule of the same name and scope under the same prefix', async () => {
    const store = new MemoryStore();
    const first = createLimiter({ limit: 5, windowMs: 1000, store });
    expect(() => createLimiter({ limit: 50, windowMs: 60_000, store })).toThrow(reuse);
    // Only one of the two chose the prefix: the other may not know that it shares.
    expect(() => createLimiter({ limit: 5, windowMs: 1000, store, prefix: 'fg:' })).toThrow(reuse);
    // Other names, other scopes, other prefixes never meet in the store.
    createLimiter({ name: 'login', limit: 5, windowMs: 1000, store });
    createLimiter({ scope: 'ip', limit: 5, windowMs: 1000, store });
    createLimiter({ limit: 5, windowMs: 1000, store, prefix: 'api:' });
    // Both chose the same prefix: they share on purpose (one consumes, one reports, say).
    createLimiter({ limit: 5, windowMs: 1000, store, prefix: 'shared:' });
    createLimiter({ limit: 5, windowMs: 1000, store, prefix: 'shared:' });
    // A closed limiter frees its names; another store is another namespace altogether.
    await first.close();
    createLimiter({ limit: 5, windowMs: 1000, store });
    createLimiter({ limit: 5, windowMs: 1000, store: new MemoryStore() });
  });

  it('refuses an updateRules() that would start sharing, and leaves the rules as they were', () => {
    const store = new MemoryStore();
    createLimiter({ name: 'per-minute', limit: 5, windowMs: 60_000, store });
    const other = createLimiter({ name: 'per-hour', limit: 50, windowMs: 3_600_000, store });
    expect(() => other.updateRules({ name: 'per-minute', limit: 10, windowMs: 60_000 })).toThrow(reuse);
    expect(other.rules.map((rule) => rule.name)).toEqual(['per-hour']);
    other.updateRules({ name: 'per-day', limit: 100, windowMs: 86_400_000 });
  });

  it("lays a nested level's limiter options over the level above: rules and shorthand replace each other, a namespace of its own", () => {
    const store = new MemoryStore();
    const above = { limit: 100, windowMs: 60_000, store, timeoutMs: 50, key: () => 'adapter option, not read' };
    expect(overlayLimiterOptions(above, { limit: 5 }, 'POST /login')).toEqual({ limit: 5, windowMs: 60_000, store, timeoutMs: 50, prefix: 'fg:POST /login:' });
    const rules = [{ name: 'a', limit: 1, windowMs: 1000 }];
    expect(overlayLimiterOptions(above, { rules }, 'r')).toEqual({ rules, store, timeoutMs: 50, prefix: 'fg:r:' });
    expect(overlayLimiterOptions({ rules, prefix: 'api:' }, { windowMs: 10 }, 'r')).toEqual({ windowMs: 10, prefix: 'api:r:' });
    expect(overlayLimiterOptions(above, { limit: 5, prefix: 'own:' }, 'r').prefix).toBe('own:');
    expect(overlayLimiterOptions({ prefix: 'api:' }, { limit: 5 })).toEqual({ prefix: 'api:', limit: 5 });
    store.close();
  });

  it('inherits nested adapter options: the limiter above is shared until a level names a limiter option, which gets it a limiter of its own', () => {
    const store = new MemoryStore();
    const key = () => 'k';
    const shared = createLimiter({ limit: 1, windowMs: 1000 });
    const top = inheritOptions(undefined, { limit: 100, windowMs: 60_000, store, headers: 'draft-8', prefix: undefined });
    expect(top).toMatchObject({ limited: true, options: { headers: 'draft-8' }, limiterOptions: { limit: 100, windowMs: 60_000, store } });
    expect(top.flowOptions).toEqual({ headers: 'draft-8', limit: 100, windowMs: 60_000, store });
    const level = { ...top, limiter: shared }; // the top level's flow made it
    // Adapter options only: the limiter above, the same counts.
    expect(inheritOptions(level, { key, headers: undefined }, 'r').flowOptions).toEqual({ headers: 'draft-8', key, limiter: shared });
    // A limiter option: a limiter of its own, in a namespace of its own.
    const own = inheritOptions(level, { limit: 5 }, 'POST /login');
    expect(own.flowOptions).toEqual({ headers: 'draft-8', limit: 5, windowMs: 60_000, store, prefix: 'fg:POST /login:' });
    expect(own.limiterOptions).toEqual({ limit: 5, windowMs: 60_000, store, prefix: 'fg:POST /login:' });
    // A limiter given: used as it is; given with limiter options, both go to the flow, which says which to drop.
    expect(inheritOptions(level, { limiter: shared }, 'r')).toMatchObject({ limiterOptions: undefined, flowOptions: { headers: 'draft-8', limiter: shared } });
    expect(inheritOptions(level, { limiter: shared, limit: 3 }, 'r').flowOptions).toEqual({
      headers: 'draft-8',
      limiter: shared,
      limit: 3,
      windowMs: 60_000,
      store,
    });
    // A top level without a limit only gives defaults: the level below that names one gets them.
    const defaults = inheritOptions(undefined, { windowMs: 60_000, store });
    expect(defaults.limited).toBe(false);
    expect(inheritOptions(defaults, { key }, 'r').limited).toBe(false);
    expect(inheritOptions(defaults, { limit: 2 }, 'r')).toMatchObject({ limited: true, flowOptions: { limit: 2, windowMs: 60_000, store, prefix: 'fg:r:' } });
    store.close();
  });

  it('reads an option set to undefined as not given when laying a level over the one above, as createLimiter() does', () => {
    // A route's `{ limit: tier.limit, rules: tier.rules }` with no rules in the tier: the windowMs above still applies
    // (the Fastify plugin merged it so before overlayLimiterOptions; dropping it made the route ERR_FG_WINDOW).
    const above = { limit: 100, windowMs: 60_000 };
    expect(overlayLimiterOptions(above, { limit: 5, rules: undefined }, 'r')).toEqual({ limit: 5, windowMs: 60_000, prefix: 'fg:r:' });
    expect(overlayLimiterOptions(above, { rules: undefined }, 'r')).toEqual({ limit: 100, windowMs: 60_000, prefix: 'fg:r:' });
    const rules = [{ name: 'a', limit: 1, windowMs: 1000 }];
    expect(overlayLimiterOptions({ rules }, { rules, limit: undefined }, 'r')).toEqual({ rules, prefix: 'fg:r:' });
    expect(overlayLimiterOptions({ ...above, prefix: 'api:' }, { limit: 5, prefix: undefined }, 'r').prefix).toBe('api:r:');
    for (const own of [{ limit: 5, rules: undefined }, { rules: undefined }]) {
      expect(() => createLimiter(overlayLimiterOptions(above, own, 'r'))).not.toThrow();
    }
  });

  it('derives namespaces that fit a prefix for adapters that build limiters from others (routes, handlers)', () => {
    expect(derivedPrefix(undefined, 'POST /login')).toBe('fg:POST /login:');
    expect(derivedPrefix('api:', 'CatsController')).toBe('api:CatsController:');
    const long = derivedPrefix(undefined, `GET /${'a'.repeat(100)}`);
    expect(long).toHaveLength(64);
    expect(long).toMatch(/^fg:GET \/a+~[0-9a-f]{8}:$/);
    expect(derivedPrefix(undefined, `GET /${'a'.repeat(100)}b`)).not.toBe(long);
    expect(() => createLimiter({ limit: 1, windowMs: 1000, prefix: long })).not.toThrow();
  });
});

describe('option validation', () => {
  const cases: [string, unknown, string][] = [
    ['limit 0', { limit: 0, windowMs: 1000 }, 'ERR_FG_LIMIT'],
    ['limit 1.5', { limit: 1.5, windowMs: 1000 }, 'ERR_FG_LIMIT'],
    ['limit as a string', { limit: '10', windowMs: 1000 }, 'ERR_FG_LIMIT'],
    ['windowMs Infinity', { limit: 1, windowMs: Number.POSITIVE_INFINITY }, 'ERR_FG_WINDOW'],
    ['windowMs NaN', { limit: 1, windowMs: Number.NaN }, 'ERR_FG_WINDOW'],
    ['windowMs missing', { limit: 1 }, 'ERR_FG_WINDOW'],
    ['unknown algorithm', { limit: 1, windowMs: 1000, algorithm: 'token-buckets' }, 'ERR_FG_ALGORITHM'],
    ['burst 0', { limit: 1, windowMs: 1000, algorithm: 'gcra', burst: 0 }, 'ERR_FG_BURST'],
    ['burst on fixed-window', { limit: 1, windowMs: 1000, algorithm: 'fixed-window', burst: 2 }, 'ERR_FG_BURST'],
    ['segments not dividing windowMs', { limit: 1, windowMs: 1000, segments: 3 }, 'ERR_FG_SEGMENTS'],
    ['segments on gcra', { limit: 1, windowMs: 1000, algorithm: 'gcra', segments: 2 }, 'ERR_FG_SEGMENTS'],
    ['mode on gcra', { limit: 1, windowMs: 1000, algorithm: 'gcra', mode: 'shape' }, 'ERR_FG_MODE'],
    ['bad mode', { limit: 1, windowMs: 1000, algorithm: 'leaky-bucket', mode: 'queue' }, 'ERR_FG_MODE'],
    // null is a value, not a way to ask for the default: it is rejected like any wrong value.
    ['algorithm null', { limit: 1, windowMs: 1000, algorithm: null }, 'ERR_FG_ALGORITHM'],
    ['burst null', { limit: 1, windowMs: 1000, algorithm: 'gcra', burst: null }, 'ERR_FG_BURST'],
    ['onStoreError null', { limit: 1, windowMs: 1000, onStoreError: null }, 'ERR_FG_OPTION'],
    ['timeoutMs null', { limit: 1, windowMs: 1000, timeoutMs: null }, 'ERR_FG_OPTION'],
    ['store null', { limit: 1, windowMs: 1000, store: null }, 'ERR_FG_OPTION'],
    ['localDenyCache with a misspelt option', { limit: 1, windowMs: 1000, localDenyCache: { maxkeys: 5 } }, 'ERR_FG_UNKNOWN_OPTION'],
    ['no rule', {}, 'ERR_FG_RULES'],
    ['empty rules', { rules: [] }, 'ERR_FG_RULES'],
    ['rules and shorthand', { limit: 1, windowMs: 1, rules: [{ limit: 1, windowMs: 1 }] }, 'ERR_FG_RULES'],
    [
      'unnamed rule among several',
      {
        rules: [
          { limit: 1, windowMs: 1 },
          { limit: 2, windowMs: 2 },
        ],
      },
      'ERR_FG_RULES',
    ],
    ['rule name with a colon', { rules: [{ name: 'a:b', limit: 1, windowMs: 1 }] }, 'ERR_FG_RULES'],
    [
      'duplicate names',
      {
        rules: [
          { name: 'a', limit: 1, windowMs: 1 },
          { name: 'a', limit: 2, windowMs: 2 },
        ],
      },
      'ERR_FG_DUPLICATE_RULE',
    ],
    ['huge rule', { algorithm: 'gcra', limit: 1, windowMs: 2 ** 40, burst: 2 ** 20 }, 'ERR_FG_RULE_TOO_LARGE'],
    ['max (express-rate-limit)', { max: 5, windowMs: 1000 }, 'ERR_FG_UNKNOWN_OPTION'],
    ['unknown field in a rule', { rules: [{ limit: 1, windowMs: 1, window: 2 }] }, 'ERR_FG_UNKNOWN_OPTION'],
    ['store without methods', { limit: 1, windowMs: 1, store: {} }, 'ERR_FG_OPTION'],
    ['negative timeout', { limit: 1, windowMs: 1, timeoutMs: -5 }, 'ERR_FG_OPTION'],
    // setTimeout fires a delay above 2^31 - 1 ms after 1 ms: every call would time out and fail open.
    ['timeout above 2^31 - 1 ms', { limit: 1, windowMs: 1, timeoutMs: 2 ** 31 }, 'ERR_FG_OPTION'],
    ['bad onStoreError', { limit: 1, windowMs: 1, onStoreError: 'ignore' }, 'ERR_FG_OPTION'],
    ['clock not a function', { limit: 1, windowMs: 1, now: 5 }, 'ERR_FG_OPTION'],
    ['prefix not a string', { limit: 1, windowMs: 1, prefix: 7 }, 'ERR_FG_OPTION'],
    ['adapter option', { limit: 1, windowMs: 1, key: () => 'k' }, 'ERR_FG_UNKNOWN_OPTION'],
    ['options not an object', 'fast', 'ERR_FG_OPTION'],
  ];

  it.each(cases)('%s throws a FloodgateError with its code and a message that says what to change', (_, options, code) => {
    let thrown: unknown;
    try {
      createLimiter(options as never);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(FloodgateError);
    expect(thrown).toMatchObject({ code });
    expect((thrown as Error).message).toMatch(/must|needs|has|is too large|got|only applies|no option/);
  });

  it('takes the longest timeout a timer keeps (2^31 - 1 ms), and a store that answers within it decides', async () => {
    const limiter = createLimiter({ limit: 1, windowMs: 60_000, timeoutMs: 2 ** 31 - 1 });
    expect((await limiter.consume('k')).allowed).toBe(true);
    expect((await limiter.consume('k')).allowed).toBe(false);
  });

  it('refuses clock values exact arithmetic cannot hold (NaN, negative, above 2^50 ms) at call time, and floors fractions', async () => {
    for (const value of [Number.NaN, -1, Number.POSITIVE_INFINITY, 2 ** 50 + 1, 2 ** 53, '1700000000000']) {
      const limiter = createLimiter({ limit: 5, windowMs: 1000, now: () => value as number });
      await expect(limiter.consume('k')).rejects.toMatchObject({ code: 'ERR_FG_OPTION', message: expect.stringMatching(/clock \(now option\) returned/) });
    }
    let now = 2 ** 50 - 1000;
    const limiter = createLimiter({ algorithm: 'fixed-window', limit: 5, windowMs: 1000, now: () => now });
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, resetMs: 1000 - (now % 1000) });
    now = 1_700_000_000_000.75;
    expect(await limiter.consume('j')).toMatchObject({ allowed: true, resetMs: 1000 });
  });

  it('explains names from other libraries', () => {
    expect(() => createLimiter({ max: 5, windowMs: 1000 } as never)).toThrow(/Floodgate calls it 'limit'/);
    expect(() => createLimiter({ limit: 5, windowMs: 1000, keyGenerator: () => 'k' } as never)).toThrow(/'key'/);
  });

  it("names an unknown option plainly, even one called like an object's own properties", () => {
    for (const name of ['constructor', 'toString', 'hasOwnProperty', '__proto__']) {
      const options = JSON.parse(`{ "limit": 5, "windowMs": 1000, "${name}": 1 }`);
      let message = '';
      try {
        createLimiter(options);
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message, name).toMatch(new RegExp(`has no option '${name}'`));
      expect(message, name).not.toMatch(/native code|function/);
    }
  });

  it('rejects options updateRules() does not take, as createLimiter() does', () => {
    const limiter = createLimiter({ limit: 5, windowMs: 1000 });
    for (const options of [
      { limit: 5, windowMs: 1000, prefix: 'x' },
      { limit: 5, windowMs: 1000, timeoutMs: 10 },
      { max: 5, windowMs: 1000 },
    ]) {
      expect(() => limiter.updateRules(options as never)).toThrow(expect.objectContaining({ code: 'ERR_FG_UNKNOWN_OPTION' }));
    }
    expect(() => limiter.updateRules([{ limit: 5, windowMs: 1000, prefix: 'x' }] as never)).toThrow(expect.objectContaining({ code: 'ERR_FG_UNKNOWN_OPTION' }));
    expect(limiter.rules[0]?.limit).toBe(5);
  });

  it('fuzzed option objects either build a limiter or throw a FloodgateError, never another error', () => {
    const anything = fc.oneof(
      fc.integer({ min: -3, max: 100_000 }),
      fc.double(),
      fc.string({ maxLength: 12 }),
      fc.constantFrom(undefined, null, true, [], {}, 'sliding-window', 'gcra', 'shape', 'allow', 'deny', 0, 1, 2 ** 60),
    );
    const ruleLike = fc.record(
      { name: anything, algorithm: anything, limit: anything, windowMs: anything, burst: anything, segments: anything, mode: anything, extra: anything },
      { requiredKeys: [] },
    );
    const optionsLike = fc.oneof(
      ruleLike,
      fc.record(
        { rules: fc.oneof(fc.array(ruleLike, { maxLength: 3 }), anything), timeoutMs: anything, prefix: anything, onStoreError: anything },
        { requiredKeys: [] },
      ),
      anything,
    );
    fc.assert(
      fc.property(optionsLike, (options) => {
        try {
          const limiter = createLimiter(options as never);
          for (const rule of limiter.rules) {
            expect(Number.isSafeInteger(rule.limit) && rule.limit > 0).toBe(true);
            expect(Number.isSafeInteger(rule.windowMs) && rule.windowMs > 0).toBe(true);
          }
        } catch (error) {
          expect(error).toBeInstanceOf(FloodgateError);
          expect((error as FloodgateError).code).toMatch(/^ERR_FG_/);
        }
      }),
      { numRuns: 2000 },
    );
  });
});

it('fuzzed options that build are taken exactly as given: no option is dropped or silently defaulted', () => {
  const valid = <T>(...values: T[]) => fc.constantFrom(...values);
  const anything = fc.oneof(fc.integer({ min: -2, max: 5 }), fc.string({ maxLength: 6 }), fc.constantFrom(undefined, null, true, {}, 1.5));
  const sometimes = <T>(good: fc.Arbitrary<T>) => fc.oneof({ weight: 4, arbitrary: good }, { weight: 1, arbitrary: anything });
  // Rules valid for their algorithm most of the time, so that many option sets build.
  const rule = fc.constantFrom('fixed-window', 'sliding-window', 'sliding-log', 'token-bucket', 'leaky-bucket', 'gcra', 'concurrency').chain((algorithm) =>
    fc.record(
      {
        algorithm: sometimes(valid(algorithm)),
        limit: sometimes(fc.integer({ min: 1, max: 1000 })),
        windowMs: sometimes(valid(1000, 60_000, 3_600_000)),
        ...(['token-bucket', 'leaky-bucket', 'gcra'].includes(algorithm) ? { burst: sometimes(fc.integer({ min: 1, max: 50 })) } : {}),
        ...(algorithm === 'sliding-window' ? { segments: sometimes(valid(1, 2, 4, 10)) } : {}),
        ...(algorithm === 'leaky-bucket' ? { mode: sometimes(valid('police', 'shape')) } : {}),
        ...(algorithm === 'concurrency' ? {} : { blockMs: sometimes(valid(1, 60_000, 900_000)), maxBlockMs: sometimes(valid(900_000, 86_400_000)) }),
      },
      { requiredKeys: ['limit', 'windowMs'] },
    ),
  );
  const named = fc.array(rule, { minLength: 1, maxLength: 3 }).map((rules) => rules.map((r, i) => ({ name: `r${i}.x`, ...r })));
  const insurance = createLimiter({ limit: 1, windowMs: 1000 });
  const options = fc.record(
    {
      rules: named,
      prefix: sometimes(valid('', 'api:', 'fg:')),
      timeoutMs: sometimes(valid(1, 50, 200, 2.5)),
      onStoreError: sometimes(valid<unknown>('allow', 'deny', insurance)),
      localDenyCache: sometimes(valid<unknown>(true, false, { maxKeys: 5 }, {})),
    },
    { requiredKeys: ['rules'] },
  );
  let built = 0;
  fc.assert(
    fc.property(fc.oneof(options, rule), (given) => {
      let config: ReturnType<typeof parseLimiterOptions>;
      try {
        config = parseLimiterOptions(given as LimiterOptions);
      } catch (error) {
        expect(error).toBeInstanceOf(FloodgateError);
        return;
      }
      built++;
      const rules = 'rules' in given ? (given.rules as Record<string, unknown>[]) : [given as Record<string, unknown>];
      const fields = ['name', 'algorithm', 'limit', 'windowMs', 'burst', 'segments', 'mode', 'blockMs', 'maxBlockMs'] as const;
      rules.forEach((r, i) => {
        for (const field of fields) if (r[field] !== undefined) expect(config.rules[i]?.[field], field).toBe(r[field]);
      });
      const o = given as Record<string, unknown>;
      if (o.prefix !== undefined) expect(config.prefix).toBe(o.prefix);
      if (o.timeoutMs !== undefined) expect(config.timeoutMs).toBe(o.timeoutMs);
      if (o.onStoreError !== undefined) expect(config.onStoreError).toBe(o.onStoreError);
      if (o.localDenyCache !== undefined) {
        const cache = o.localDenyCache as boolean | { maxKeys?: number };
        expect(config.localDenyCacheKeys).toBe(cache === false ? 0 : cache === true ? 10_000 : (cache.maxKeys ?? 10_000));
      }
    }),
    { numRuns: 3000 },
  );
  expect(built).toBeGreaterThan(300); // the property looked at many options that were accepted, not only rejections
});

it('decisions are plain data that survive JSON', async () => {
  const limiter = createLimiter({ limit: 1, windowMs: 1000 });
  const decision: Decision = await limiter.consume('k');
  expect(JSON.parse(JSON.stringify(decision))).toEqual(decision);
});

it('compileRule describes rules by their options', () => {
  const options: RuleOptions = { algorithm: 'sliding-window', limit: 10, windowMs: 60_000, segments: 6 };
  expect(compileRule(options, 'rule', 'default')).toMatchObject({ segmentMs: 10_000, capacity: 10 });
});
