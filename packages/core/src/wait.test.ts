import { describe, expect, it, vi } from 'vitest';
import type { Decision } from './decision.js';
import { FloodgateError } from './errors.js';
import { createLimiter, type Limiter } from './limiter.js';
import type { LimiterOptions } from './options.js';
import { RateLimitedError } from './rate-limited-error.js';
import { MAX_TIMER_MS } from './sleep.js';
import type { Store } from './stores/types.js';
import { FakeTimers, settle } from './test-support/fake-timers.js';
import { type Admitter, WaitingRoom, type WaitOptions } from './wait.js';

/**
 * A limiter on a MemoryStore and a waiting room on the same hand-moved clock.
 * The room reaches the limiter through its public methods; `hold()` holds the
 * answer of each consume until it is opened (a store slow to answer: the call
 * is decided, the answer is on its way).
 */
function setup(options: LimiterOptions) {
  const clock = new FakeTimers();
  const limiter = createLimiter({ ...options, now: clock.now });
  const counts = { consume: 0, refund: 0 };
  let gate: Promise<void> | undefined;
  const admitter: Admitter = {
    consume: async (keys, o) => {
      counts.consume++;
      const decision = limiter.consume(keys, o);
      if (gate !== undefined) await gate;
      return decision;
    },
    refund: (keys, o) => {
      counts.refund++;
      return limiter.refund(keys, o);
    },
    release: (keys, leaseId, o) => limiter.release(keys, leaseId, o),
    rulesFor: (rules) => limiter.rulesFor(rules),
    lineOf: (keys, rules) => JSON.stringify([keys, rules ?? null]),
  };
  const room = new WaitingRoom(admitter, clock);
  const wait = (keys: string | Record<string, string>, o: WaitOptions = {}) =>
    watch(room.wait(keys, o.cost ?? 1, o.rules, o.maxWaitMs, o.signal, o.priority), clock);
  const hold = () => {
    let open = () => {};
    gate = new Promise<void>((resolve) => {
      open = () => {
        gate = undefined;
        resolve();
      };
    });
    return open;
  };
  return { clock, limiter, room, counts, wait, hold };
}

interface Watched {
  /** 'pending', 'resolved' or 'rejected' */
  state: string;
  /** Clock time it settled at. */
  at: number;
  decision?: Decision;
  error?: unknown;
  promise: Promise<unknown>;
}

/** Follows a promise: when (on the fake clock) it settled, and how. */
function watch(promise: Promise<Decision>, clock: FakeTimers): Watched {
  const watched: Watched = { state: 'pending', at: Number.NaN, promise };
  watched.promise = promise.then(
    (decision) => Object.assign(watched, { state: 'resolved', at: clock.time, decision }),
    (error: unknown) => Object.assign(watched, { state: 'rejected', at: clock.time, error }),
  );
  return watched;
}

const code = (error: unknown) => (error as FloodgateError).code;

describe('limiter.wait: one line per key, served in arrival order', () => {
  it('admits a call that fits at once, and consumes then', async () => {
    const { wait, limiter, clock } = setup({ limit: 3, windowMs: 1000, algorithm: 'fixed-window' });
    const start = clock.time;
    const first = wait('k');
    await settle();
    expect(first).toMatchObject({ state: 'resolved', at: start, decision: { allowed: true, remaining: 2 } });
    expect((await limiter.peek('k')).remaining).toBe(2);
  });

  it('serves waiters in arrival order: a later small cost never overtakes an earlier large one', async () => {
    // 10 tokens a second, one every 100 ms; the bucket starts empty.
    const { wait, limiter, clock, room } = setup({ algorithm: 'token-bucket', limit: 10, windowMs: 1000 });
    const start = clock.time;
    await limiter.consume('k', { cost: 10 });
    const big = wait('k', { cost: 5 });
    const small = wait('k', { cost: 1 });
    const medium = wait('k', { cost: 3 });
    await settle();
    expect(room.timers).toBe(1);
    await clock.advance(2000);
    // Alone, the cost of 1 would have gone at +100 ms; behind the 5 it goes at +600.
    expect([big.at - start, small.at - start, medium.at - start]).toEqual([500, 600, 900]);
    expect([big, small, medium].map((w) => w.decision?.allowed)).toEqual([true, true, true]);
    expect(room.size).toBe(0);
  });

  it('keeps one timer per key, however many wait, and asks the store once per admission and retry, not per waiter', async () => {
    const { wait, clock, room, counts } = setup({ algorithm: 'gcra', limit: 10, windowMs: 1000, burst: 1 });
    const start = clock.time;
    const onA = Array.from({ length: 100 }, () => wait('a'));
    const onB = Array.from({ length: 50 }, () => wait('b'));
    await settle();
    expect(room.timers).toBe(2);
    expect(clock.pending).toBe(2);
    expect(counts.consume).toBe(4); // per key: the first admitted, the second denied (and told when)
    await clock.advance(2_000);
    // One every 100 ms per key, each exactly when the rule allows it.
    expect(onA.slice(0, 21).map((w) => w.at - start)).toEqual(Array.from({ length: 21 }, (_, i) => i * 100));
    expect(onB.slice(0, 21).map((w) => w.at - start)).toEqual(Array.from({ length: 21 }, (_, i) => i * 100));
    expect(onA.filter((w) => w.state === 'resolved')).toHaveLength(21);
    expect(room.timers).toBe(2);
    // Each admission after the first costs one denial (which says when) and one admitted call.
    expect(counts.consume).toBe(2 * (21 + 21));
    expect(Math.max(...clock.delays)).toBe(100);
    await clock.advance(10_000);
    expect(room.size).toBe(0);
    expect(room.timers).toBe(0);
    expect(clock.pending).toBe(0);
  });

  it('treats each key object (scopes included) and each rule set as a line of its own', async () => {
    const rules = [
      { name: 'per-ip', scope: 'ip', algorithm: 'fixed-window' as const, limit: 1, windowMs: 1000 },
      { name: 'per-user', scope: 'user', algorithm: 'fixed-window' as const, limit: 1, windowMs: 1000 },
    ];
    const { wait, room } = setup({ rules });
    const first = wait({ ip: '1.1.1.1', user: 'u1' });
    const sameIp = wait({ ip: '1.1.1.1', user: 'u2' });
    const otherIp = wait({ ip: '2.2.2.2', user: 'u3' });
    const plan = wait({ ip: '1.1.1.1', user: 'u1' }, { rules: [{ name: 'plan', scope: 'user', limit: 5, windowMs: 1000 }] });
    await settle();
    expect([first.state, sameIp.state, otherIp.state, plan.state]).toEqual(['resolved', 'pending', 'resolved', 'resolved']);
    expect(room.timers).toBe(1);
  });
});

describe('limiter.wait: woken lines', () => {
  it('asks again at once when woken while a denial was on its way, instead of sleeping on a stale answer', async () => {
    const { wait, limiter, hold, counts, room, clock } = setup({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000 });
    const start = clock.time;
    await limiter.consume('k');
    const open = hold();
    const call = wait('k');
    await settle();
    await limiter.reset('k'); // capacity comes back while the denial is on its way
    room.wake(JSON.stringify(['k', null]));
    open();
    await settle();
    expect(call).toMatchObject({ state: 'resolved', at: start });
    expect(counts.consume).toBe(2);
  });
});

describe('limiter.wait: rejects at once what cannot come in time', () => {
  it('rejects with ERR_FG_WAIT_TIMEOUT at once, not after waiting, when the denial says it is too late', async () => {
    const { wait, limiter, clock, room } = setup({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000 });
    clock.time = 60_000 * 30_000_000 + 10_000; // 10 s into a window
    await limiter.consume('k');
    const late = wait('k', { maxWaitMs: 49_999 });
    await settle();
    expect(late.state).toBe('rejected');
    expect(late.at).toBe(60_000 * 30_000_000 + 10_000);
    expect(late.error).toBeInstanceOf(RateLimitedError);
    expect(late.error).toMatchObject({ code: 'ERR_FG_WAIT_TIMEOUT', retryAfterMs: 50_000, status: 429, decision: { allowed: false, rule: 'default' } });
    expect((late.error as Error).message).toMatch(/^Not admitted within maxWaitMs \(49999 ms\): rule 'default' admits it in 50000 ms at the earliest/);
    expect(room.size).toBe(0);
    expect(clock.pending).toBe(0);
    const inTime = wait('k', { maxWaitMs: 50_000 });
    await clock.advance(50_000);
    expect(inTime).toMatchObject({ state: 'resolved', at: 60_000 * 30_000_001 });
  });

  it('rejects a newcomer at once, without asking the store, when the line ahead of it is not admitted in time', async () => {
    const { wait, limiter, clock, counts } = setup({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000 });
    clock.time = 60_000 * 30_000_000;
    await limiter.consume('k');
    const patient = wait('k');
    await settle();
    const asked = counts.consume;
    const hurried = wait('k', { maxWaitMs: 1000 });
    await settle();
    expect(counts.consume).toBe(asked);
    expect(hurried).toMatchObject({ state: 'rejected', error: { code: 'ERR_FG_WAIT_TIMEOUT', retryAfterMs: 60_000 } });
    expect((hurried.error as Error).message).toContain('1 call(s) wait ahead of it on this key');
    expect(patient.state).toBe('pending');
  });

  it('rejects a waiter deep in the line as soon as the line shows its turn comes too late, before its maxWaitMs is up', async () => {
    const { wait, clock } = setup({ algorithm: 'gcra', limit: 10, windowMs: 1000, burst: 1 });
    const start = clock.time;
    const ahead = Array.from({ length: 9 }, () => wait('k'));
    const tenth = wait('k', { maxWaitMs: 850 }); // its turn would come at +900
    const eleventh = wait('k', { maxWaitMs: 1000 }); // at +1000 if the tenth went; it does not, so at +900
    await clock.advance(2000);
    expect(ahead.map((w) => w.at - start)).toEqual([0, 100, 200, 300, 400, 500, 600, 700, 800]);
    expect(tenth.state).toBe('rejected');
    expect(tenth.at - start).toBeLessThanOrEqual(850);
    expect(code(tenth.error)).toBe('ERR_FG_WAIT_TIMEOUT');
    expect(eleventh).toMatchObject({ state: 'resolved' });
    expect(eleventh.at - start).toBe(900);
  });

  it('rejects a cost above a rule capacity with ERR_FG_COST at once, without asking the store', async () => {
    const { wait, counts } = setup({
      rules: [
        { name: 'small', algorithm: 'token-bucket', limit: 5, windowMs: 1000, burst: 8 },
        { name: 'big', limit: 100, windowMs: 1000 },
      ],
    });
    const huge = wait('k', { cost: 9 });
    await settle();
    expect(huge).toMatchObject({ state: 'rejected', error: { code: 'ERR_FG_COST' } });
    expect((huge.error as Error).message).toMatch(/rule 'small' holds at most 8 at once\. Lower the cost, or raise the rule's burst/);
    expect(counts.consume).toBe(0);
  });
});

describe('limiter.wait: aborted waiters consume nothing', () => {
  it('rejects at once with the reason of a signal that is already aborted', async () => {
    const { wait, limiter, counts } = setup({ limit: 5, windowMs: 1000 });
    const reason = new Error('shutting down');
    const aborted = wait('k', { signal: AbortSignal.abort(reason) });
    await settle();
    expect(aborted).toMatchObject({ state: 'rejected', error: reason });
    expect(counts.consume).toBe(0);
    expect((await limiter.peek('k')).remaining).toBe(5);
  });

  it('rejects a waiting call when its signal aborts, and lets the next one move up', async () => {
    const { wait, limiter, clock, room } = setup({ algorithm: 'token-bucket', limit: 10, windowMs: 1000 });
    const start = clock.time;
    await limiter.consume('k', { cost: 10 });
    const controller = new AbortController();
    const big = wait('k', { cost: 8, signal: controller.signal });
    const small = wait('k', { cost: 1 });
    await clock.advance(50);
    controller.abort();
    await settle();
    expect(big).toMatchObject({ state: 'rejected', at: start + 50 });
    expect((big.error as Error).name).toBe('AbortError');
    await clock.advance(1000);
    // The cost of 1 no longer waits behind the 8: it goes as soon as one token is back.
    expect(small).toMatchObject({ state: 'resolved', at: start + 100 });
    expect(room.size).toBe(0);
    expect((await limiter.peek('k')).remaining).toBe(9); // the aborted call took nothing: 10 refilled, 1 used
  });

  it('gives back an admission that arrives after the signal aborted (the call was in flight)', async () => {
    const { wait, limiter, hold, counts } = setup({ algorithm: 'fixed-window', limit: 5, windowMs: 60_000 });
    const open = hold();
    const controller = new AbortController();
    const call = wait('k', { cost: 2, signal: controller.signal });
    await settle();
    expect(counts.consume).toBe(1);
    controller.abort(new Error('never mind'));
    await settle();
    expect(call).toMatchObject({ state: 'rejected', error: { message: 'never mind' } });
    open();
    await settle();
    expect(counts.refund).toBe(1);
    expect((await limiter.peek('k')).remaining).toBe(5);
  });
});

describe('limiter.wait: shaping rules reserve a slot', () => {
  const shape = { algorithm: 'leaky-bucket' as const, mode: 'shape' as const, limit: 5, windowMs: 1000, burst: 10 };

  it('reserves the slot in one call and resolves when its delay is over, without retrying', async () => {
    const { wait, clock, counts, room } = setup(shape);
    const start = clock.time;
    const calls = Array.from({ length: 4 }, () => wait('k'));
    await settle();
    expect(counts.consume).toBe(4);
    expect(room.timers).toBe(1);
    await clock.advance(1000);
    expect(calls.map((w) => w.at - start)).toEqual([0, 200, 400, 600]);
    expect(calls.map((w) => w.decision?.delayMs)).toEqual([0, 200, 400, 600]);
    expect(counts.consume).toBe(4);
  });

  it('gives the slot back and rejects at once when the delay is beyond maxWaitMs', async () => {
    const { wait, limiter, counts } = setup(shape);
    await limiter.consume('k', { cost: 3 }); // the next slot is 600 ms away
    const hurried = wait('k', { maxWaitMs: 500 });
    await settle();
    expect(hurried).toMatchObject({ state: 'rejected', error: { code: 'ERR_FG_WAIT_TIMEOUT', retryAfterMs: 600 } });
    expect((hurried.error as Error).message).toContain("rule 'default' shapes it to go in 600 ms");
    expect(counts.refund).toBe(1);
    expect((await limiter.consume('k')).delayMs).toBe(600); // the slot it had was given back
  });

  it('gives the slot back when the signal aborts during the delay', async () => {
    const { wait, limiter, clock } = setup(shape);
    const controller = new AbortController();
    wait('k');
    const second = wait('k', { signal: controller.signal });
    await clock.advance(100);
    controller.abort();
    await settle();
    expect(second.state).toBe('rejected');
    expect((await limiter.consume('k')).delayMs).toBe(100); // 200 ms after the first, which left 100 ms ago
  });
});

describe('limiter.wait: priorities', () => {
  // One call every 100 ms, the slot at +0 taken: waiters go at +100, +200, ...
  const spaced = { algorithm: 'gcra' as const, limit: 10, windowMs: 1000, burst: 1 };

  it('admits higher priorities first, and the calls of one priority in arrival order', async () => {
    const { wait, limiter, clock } = setup(spaced);
    const start = clock.time;
    await limiter.consume('k');
    const calls = { a: wait('k'), b: wait('k', { priority: 5 }), c: wait('k', { priority: 0 }), d: wait('k', { priority: 5 }) };
    const more = { e: wait('k', { priority: 2 }), f: wait('k', { priority: -3 }) };
    await clock.advance(1000);
    const at = Object.fromEntries(Object.entries({ ...calls, ...more }).map(([name, w]) => [name, w.at - start]));
    expect(at).toEqual({ b: 100, d: 200, e: 300, a: 400, c: 500, f: 600 });
  });

  it('puts a later call of a higher priority before those already waiting: it goes at the next slot', async () => {
    const { wait, limiter, clock } = setup(spaced);
    const start = clock.time;
    await limiter.consume('k');
    const low = Array.from({ length: 3 }, () => wait('k'));
    await clock.advance(50);
    const urgent = wait('k', { priority: 1 });
    await clock.advance(1000);
    expect(urgent.at - start).toBe(100);
    expect(low.map((w) => w.at - start)).toEqual([200, 300, 400]);
  });

  it('never puts it before a call the store is deciding: that one is admitted if the store says so', async () => {
    const { wait, hold, clock } = setup({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000 });
    const open = hold();
    const first = wait('k');
    await settle();
    const urgent = wait('k', { priority: 9 });
    open();
    await settle();
    expect(first).toMatchObject({ state: 'resolved', at: clock.time });
    expect(urgent.state).toBe('pending');
  });

  it('lets the first waiter step back when the store denies it and a higher priority came meanwhile', async () => {
    const { wait, limiter, hold, clock } = setup(spaced);
    const start = clock.time;
    await limiter.consume('k');
    const open = hold();
    const first = wait('k');
    await settle();
    const urgent = wait('k', { priority: 1 });
    open();
    await clock.advance(1000);
    expect([urgent.at - start, first.at - start]).toEqual([100, 200]);
  });

  it('asks at once for a newcomer that goes first: its smaller cost may fit before the line would try again', async () => {
    // 10 tokens a second, one every 100 ms; the bucket starts empty.
    const { wait, limiter, clock } = setup({ algorithm: 'token-bucket', limit: 10, windowMs: 1000 });
    const start = clock.time;
    await limiter.consume('k', { cost: 10 });
    const big = wait('k', { cost: 5 }); // would go at +500
    const small = wait('k', { cost: 1 }); // behind it, at +600
    await clock.advance(50);
    const urgent = wait('k', { cost: 1, priority: 1 });
    await clock.advance(2000);
    expect([urgent.at - start, big.at - start, small.at - start]).toEqual([100, 600, 700]);
    // Within a priority, still no overtaking: the 1 waited behind the 5 although it would have fit sooner.
  });

  it('is strict: lower priorities wait while higher ones keep coming, and go once they stop', async () => {
    const { wait, limiter, clock } = setup(spaced);
    const start = clock.time;
    await limiter.consume('k');
    const background = wait('k', { priority: -1 });
    const urgent: Watched[] = [];
    for (let i = 0; i < 5; i++) {
      await clock.advance(50);
      urgent.push(wait('k')); // just before each slot
      await clock.advance(50);
    }
    await clock.advance(1000);
    expect(urgent.map((w) => w.at - start)).toEqual([100, 200, 300, 400, 500]);
    expect(background).toMatchObject({ state: 'resolved', at: start + 600 });
  });

  it('bounds that wait by maxWaitMs: rejected with ERR_FG_WAIT_TIMEOUT once higher ones have taken its turns, having taken nothing', async () => {
    const { wait, limiter, clock, room } = setup(spaced);
    const start = clock.time;
    let admitted = 0;
    limiter.on('allowed', () => admitted++);
    await limiter.consume('k');
    const background = wait('k', { priority: -1, maxWaitMs: 250 });
    const urgent: Watched[] = [];
    for (let i = 0; i < 3; i++) {
      await clock.advance(50);
      urgent.push(wait('k'));
      await clock.advance(50);
    }
    expect(background.state).toBe('rejected');
    // At +200 the line's next slot is +300: past its deadline (+250), so it is told then, not at +250.
    expect(background.at - start).toBe(200);
    expect(background.error).toMatchObject({ code: 'ERR_FG_WAIT_TIMEOUT', retryAfterMs: 100 });
    await clock.advance(1000);
    expect(urgent.map((w) => w.at - start)).toEqual([100, 200, 300]);
    expect(admitted).toBe(1 + 3);
    expect(room.size).toBe(0);
  });

  it('lets the next priority move up when a waiter ahead of it aborts; the aborted one takes nothing', async () => {
    const { wait, limiter, clock } = setup({ algorithm: 'token-bucket', limit: 10, windowMs: 1000 });
    const start = clock.time;
    await limiter.consume('k', { cost: 10 });
    const controller = new AbortController();
    const big = wait('k', { cost: 8, priority: 3, signal: controller.signal });
    const small = wait('k', { cost: 1, priority: 1 });
    await clock.advance(50);
    controller.abort();
    await clock.advance(1000);
    expect(big).toMatchObject({ state: 'rejected', at: start + 50 });
    expect(small).toMatchObject({ state: 'resolved', at: start + 100 });
    expect((await limiter.peek('k')).remaining).toBe(9);
  });

  it('refuses a priority that is not an integer from -1000 to 1000 with ERR_FG_OPTION, without asking the store', async () => {
    const { wait, counts } = setup(spaced);
    const bad = [1.5, Number.NaN, Number.POSITIVE_INFINITY, 1001, -1001, 2 ** 53, '1', null].map((priority) => wait('k', { priority: priority as number }));
    const edges = [wait('k', { priority: -1000 }), wait('j', { priority: 1000 })];
    await settle();
    expect(bad.map((w) => code(w.error))).toEqual(Array.from({ length: 8 }, () => 'ERR_FG_OPTION'));
    expect((bad[0] as Watched).error).toMatchObject({
      message: 'priority must be an integer from -1000 to 1000 (higher goes first; 0, the default), got 1.5. [ERR_FG_OPTION]',
    });
    expect(edges.map((w) => w.state)).toEqual(['resolved', 'resolved']);
    expect(counts.consume).toBe(2);
  });
});

describe('limiter.wait: a wait never outlasts maxWaitMs', () => {
  it('rejects a waiter whose time ran out while the store was slow to decide the call ahead, without asking for it', async () => {
    const { wait, limiter, hold, clock, counts } = setup({ algorithm: 'fixed-window', limit: 5, windowMs: 60_000 });
    const start = clock.time;
    const open = hold();
    const ahead = wait('k');
    const hurried = wait('k', { maxWaitMs: 100 });
    await clock.advance(150); // the store answers the first call 150 ms late
    open();
    await settle();
    expect(ahead).toMatchObject({ state: 'resolved', at: start + 150 });
    expect(hurried).toMatchObject({ state: 'rejected', at: start + 150, error: { code: 'ERR_FG_WAIT_TIMEOUT' } });
    expect((hurried.error as Error).message).toMatch(/^Not admitted within maxWaitMs \(100 ms\): its turn came 50 ms too late/);
    expect(counts.consume).toBe(1);
    expect((await limiter.peek('k')).remaining).toBe(4);
  });

  it('decides a waiter by its own store call when that call is under way at its deadline: it asked in time', async () => {
    const { wait, hold, clock } = setup({ algorithm: 'fixed-window', limit: 5, windowMs: 60_000 });
    const start = clock.time;
    const open = hold();
    const call = wait('k', { maxWaitMs: 100 });
    await clock.advance(150);
    open();
    await settle();
    expect(call).toMatchObject({ state: 'resolved', at: start + 150 });
  });
});

describe('limiter.wait: timers', () => {
  it('sleeps a wait longer than setTimeout can keep (2^31 - 1 ms) in chunks, and admits it on time', async () => {
    const windowMs = 30 * 86_400_000; // 30 days: 2 592 000 000 ms
    const { wait, limiter, clock } = setup({ algorithm: 'fixed-window', limit: 1, windowMs });
    clock.time = windowMs * 700;
    await limiter.consume('k');
    const call = wait('k');
    await clock.advance(windowMs - 1);
    expect(call.state).toBe('pending');
    await clock.advance(1);
    expect(call).toMatchObject({ state: 'resolved', at: windowMs * 701 });
    expect(clock.delays).toEqual([MAX_TIMER_MS, windowMs - MAX_TIMER_MS]);
  });
});

describe('limiter.wait: close', () => {
  it('rejects every waiter with ERR_FG_CLOSED, gives back reserved slots, and rejects waits after it', async () => {
    const { wait, limiter, room, clock } = setup({ algorithm: 'leaky-bucket', mode: 'shape', limit: 5, windowMs: 1000, burst: 2 });
    const calls = Array.from({ length: 4 }, () => wait('k')); // delays 0, 200, 400; the 4th overflows and waits
    await settle();
    expect(calls.map((w) => w.state)).toEqual(['resolved', 'pending', 'pending', 'pending']);
    await room.close();
    await settle();
    expect(calls.slice(1).map((w) => code(w.error))).toEqual(['ERR_FG_CLOSED', 'ERR_FG_CLOSED', 'ERR_FG_CLOSED']);
    expect(String(calls[1]?.error)).toMatch(/limiter was closed while this call waited/);
    expect(clock.pending).toBe(0);
    expect((await limiter.consume('k')).delayMs).toBe(200); // only the first call's slot is still taken
    const after = wait('k');
    await settle();
    expect(code(after.error)).toBe('ERR_FG_CLOSED');
  });
});

/** A store that fails as a dead network store does. */
const brokenStore = (): Store => {
  const fail = () => Promise.reject(new Error('connection refused'));
  return { consume: fail, peek: fail, refund: fail, reset: fail };
};

describe('limiter.wait: when the store fails', () => {
  it("resolves with storeError under onStoreError: 'allow'", async () => {
    const { wait, limiter } = setup({ limit: 1, windowMs: 1000, store: brokenStore(), onStoreError: 'allow' });
    limiter.on('error', () => {});
    const call = wait('k');
    await settle();
    expect(call.state).toBe('resolved');
    expect(call.decision?.storeError?.message).toBe('connection refused');
  });

  it("keeps waiting under onStoreError: 'deny' (the denial's retryAfterMs, 1 s), within maxWaitMs", async () => {
    const { wait, limiter } = setup({ limit: 1, windowMs: 1000, store: brokenStore(), onStoreError: 'deny' });
    limiter.on('error', () => {});
    const call = wait('k', { maxWaitMs: 500 });
    await settle();
    expect(call).toMatchObject({ state: 'rejected', error: { code: 'ERR_FG_WAIT_TIMEOUT', retryAfterMs: 1000 } });
  });

  it('rejects with what an insurance limiter throws, and serves the next waiter', async () => {
    let fail = true;
    const insurance = {
      consume: async () => {
        if (fail) throw new Error('insurance down too');
        return createLimiter({ limit: 1, windowMs: 1000 }).consume('k');
      },
    };
    const { wait, limiter } = setup({ limit: 1, windowMs: 1000, store: brokenStore(), onStoreError: insurance });
    limiter.on('error', () => {});
    const first = wait('k');
    const second = wait('k');
    await settle();
    expect(first).toMatchObject({ state: 'rejected', error: { message: 'insurance down too' } });
    expect(second).toMatchObject({ state: 'rejected' });
    fail = false;
    const third = wait('k');
    await settle();
    expect(third.state).toBe('resolved');
  });
});

describe('limiter.wait (the limiter method, real timers)', () => {
  it('rejects unknown options, a bad maxWaitMs and a bad signal', async () => {
    const limiter = createLimiter({ limit: 1, windowMs: 1000 });
    await expect(limiter.wait('k', { timeout: 5 } as WaitOptions)).rejects.toMatchObject({
      code: 'ERR_FG_UNKNOWN_OPTION',
      message: expect.stringContaining("wait() has no option 'timeout'; it takes cost and maxWaitMs and signal and priority and rules"),
    });
    await expect(limiter.wait('k', { maxWaitMs: -1 })).rejects.toMatchObject({ code: 'ERR_FG_OPTION' });
    await expect(limiter.wait('k', { maxWaitMs: Number.NaN })).rejects.toMatchObject({ code: 'ERR_FG_OPTION' });
    await expect(limiter.wait('k', { signal: {} as AbortSignal })).rejects.toMatchObject({ code: 'ERR_FG_OPTION' });
    await expect(limiter.wait('k', { cost: 0 })).rejects.toMatchObject({ code: 'ERR_FG_COST' });
    await expect(limiter.wait('')).rejects.toMatchObject({ code: 'ERR_FG_KEY' });
    expect((await limiter.peek('k')).remaining).toBe(1);
  });

  it('waits on real timers with one setTimeout per retry, not per waiter', async () => {
    const limiter = createLimiter({ algorithm: 'gcra', limit: 50, windowMs: 1000, burst: 1 }); // one every 20 ms
    const spy = vi.spyOn(globalThis, 'setTimeout');
    try {
      const started = performance.now();
      const decisions = await Promise.all(Array.from({ length: 10 }, () => limiter.wait('k')));
      const elapsed = performance.now() - started;
      expect(decisions.every((d) => d.allowed)).toBe(true);
      expect(elapsed).toBeGreaterThanOrEqual(9 * 20 - 2);
      // One timer per retry of the line's first waiter, 9 in all, and at most one more each when a timer fires a
      // millisecond before the limiter's clock (Date.now) says it is time. A timer per waiter would be 10 per retry.
      expect(spy.mock.calls.length).toBeGreaterThanOrEqual(9);
      expect(spy.mock.calls.length).toBeLessThanOrEqual(18);
    } finally {
      spy.mockRestore();
    }
  });

  it('wakes the line when a lease is released in this process, long before the lease would expire', async () => {
    const limiter = createLimiter({ algorithm: 'concurrency', limit: 1, windowMs: 60_000 });
    const held = await limiter.consume('k');
    const started = performance.now();
    const waiting = limiter.wait('k');
    setTimeout(() => void limiter.release('k', held.leaseId as string), 20);
    const decision = await waiting;
    expect(decision.allowed).toBe(true);
    expect(performance.now() - started).toBeLessThan(5_000);
    await limiter.release('k', decision.leaseId as string);
    await limiter.close();
  });

  it('keeps the line in order across updateRules(), and wakes it: new rules may admit it sooner', async () => {
    const limiter = createLimiter({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000 });
    await limiter.consume('k');
    const order: string[] = [];
    const first = limiter.wait('k').then(() => order.push('first'));
    limiter.updateRules({ algorithm: 'fixed-window', limit: 3, windowMs: 60_000 });
    const second = limiter.wait('k').then(() => order.push('second'));
    await Promise.all([first, second]); // at once, not in a minute
    expect(order).toEqual(['first', 'second']);
    expect((await limiter.peek('k')).remaining).toBe(0);
  });

  it('close() rejects waiting calls with ERR_FG_CLOSED and later waits too', async () => {
    const limiter: Limiter = createLimiter({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000 });
    await limiter.consume('k');
    const waiting = limiter.wait('k');
    await limiter.close();
    await expect(waiting).rejects.toMatchObject({ code: 'ERR_FG_CLOSED' });
    await expect(limiter.wait('k')).rejects.toBeInstanceOf(FloodgateError);
  });
});
