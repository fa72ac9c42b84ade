/*
 * Blocking after a breach (rule options blockMs and maxBlockMs), as a user
 * meets it: exact waits at the edges of a block, escalation, the 'blocked'
 * event, peek, refund, reset, plans, the local deny cache and a clock that
 * jumps. Each spec runs on the memory store and on a RedisStore on the
 * limiter's clock, with the same numbers.
 */
import { useRedisServer } from '@floodgate/test-support';
import { describe, expect, it } from 'vitest';
import { FloodgateError } from './errors.js';
import { createLimiter, type LimiterEvents } from './limiter.js';
import type { LimiterOptions } from './options.js';
import { MAX_BLOCK_MS } from './rules.js';
import { MemoryStore } from './stores/memory-store.js';
import { RedisStore } from './stores/redis-store.js';
import type { Store } from './stores/types.js';

const redisServer = useRedisServer();

/** A clock the test moves by hand, from the start of a minute (windows align to it), ahead of Redis's clock. */
function manualClock(start = Date.UTC(2100, 0, 1)) {
  let now = start;
  return { now: () => now, advance: (ms: number) => (now += ms), set: (ms: number) => (now = ms), start };
}

let prefixes = 0;

const stores: [string, () => Store][] = [
  ['MemoryStore', () => new MemoryStore()],
  ['RedisStore', () => new RedisStore({ client: redisServer.client, clock: 'client' })],
];

describe.each(stores)('blocking after a breach on the %s', (_, makeStore) => {
  const limiterWith = (options: LimiterOptions, clock = manualClock()) => ({
    clock,
    limiter: createLimiter({ store: makeStore(), prefix: `block${prefixes++}:`, now: clock.now, timeoutMs: 30_000, ...options }),
  });

  it('denies the key for blockMs from the denial: at until - 1 denied with 1 ms to wait, at until admitted', async () => {
    const { limiter, clock } = limiterWith({ algorithm: 'fixed-window', limit: 2, windowMs: 1000, blockMs: 10_000 });
    expect((await limiter.consume('k')).allowed).toBe(true);
    expect((await limiter.consume('k')).allowed).toBe(true);
    const breach = await limiter.consume('k');
    expect(breach).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 10_000, resetMs: 10_000 });
    expect(breach.blocked).toEqual({ blockMs: 10_000, leftMs: 10_000, strike: 1, started: true, untilMs: clock.now() + 10_000 });
    expect(breach.rules[0]?.blocked).toEqual(breach.blocked);
    clock.advance(9_999); // the window (1 s) is long over: only the block holds
    const last = await limiter.consume('k');
    expect(last).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 1, resetMs: 1 });
    expect(last.blocked).toEqual({ blockMs: 10_000, leftMs: 1, strike: 1, started: false, untilMs: clock.now() + 1 });
    clock.advance(1);
    const after = await limiter.consume('k');
    expect(after).toMatchObject({ allowed: true, remaining: 1 });
    expect(after.blocked).toBeUndefined();
  });

  it('waits for the rule itself when it needs longer than the block', async () => {
    const { limiter, clock } = limiterWith({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000, blockMs: 1_000 });
    await limiter.consume('k');
    clock.advance(20_000);
    const breach = await limiter.consume('k');
    expect(breach).toMatchObject({ allowed: false, retryAfterMs: 40_000, resetMs: 40_000 }); // the window ends in 40 s
    expect(breach.blocked).toMatchObject({ blockMs: 1_000, leftMs: 1_000, started: true });
    clock.advance(39_999);
    // The block ended, the window has 1 ms to go: this call breaches again, and starts another block.
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, retryAfterMs: 1_000, blocked: { started: true } });
    clock.advance(1_000);
    expect((await limiter.consume('k')).allowed).toBe(true);
  });

  it('is not extended by the calls made during it, which take nothing', async () => {
    const { limiter, clock } = limiterWith({ algorithm: 'token-bucket', limit: 3, windowMs: 3_000, blockMs: 60_000 });
    for (let i = 0; i < 3; i++) await limiter.consume('k');
    await limiter.consume('k'); // the breach, at 0
    for (let i = 1; i <= 59; i++) {
      clock.advance(1_000);
      const during = await limiter.consume('k', { cost: 1 + (i % 3) });
      expect(during).toMatchObject({ allowed: false, retryAfterMs: 60_000 - i * 1_000 });
      expect(during.blocked?.started).toBe(false);
    }
    clock.advance(1_000);
    // The bucket refilled long ago, and nothing was taken during the block: a full bucket.
    expect(await limiter.consume('k', { cost: 3 })).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('is lifted by reset(), not by refund()', async () => {
    const { limiter } = limiterWith({ algorithm: 'sliding-log', limit: 1, windowMs: 1_000, blockMs: 60_000 });
    await limiter.consume('k');
    expect((await limiter.consume('k')).blocked?.started).toBe(true);
    await limiter.refund('k');
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, retryAfterMs: 60_000, blocked: { started: false } });
    await limiter.reset('k');
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('is reported by peek (denied, nothing left, the time left), and a peek starts none', async () => {
    const { limiter, clock } = limiterWith({ algorithm: 'gcra', limit: 1, windowMs: 1_000, blockMs: 30_000 });
    await limiter.consume('k');
    const full = await limiter.peek('k');
    expect(full).toMatchObject({ allowed: false, retryAfterMs: 1_000 });
    expect(full.blocked).toBeUndefined(); // the rule denies a call now, but only a call breaches
    clock.advance(500);
    expect((await limiter.consume('k')).blocked).toMatchObject({ leftMs: 30_000, started: true });
    clock.advance(10_000);
    const peeked = await limiter.peek('k');
    expect(peeked).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 20_000, resetMs: 20_000 });
    expect(peeked.blocked).toEqual({ blockMs: 30_000, leftMs: 20_000, strike: 1, started: false, untilMs: clock.now() + 20_000 });
    clock.advance(20_000);
    expect(await limiter.peek('k')).toMatchObject({ allowed: true, remaining: 1 });
  });

  it('starts no block for a cost above the capacity: a bad call, not a breach', async () => {
    const { limiter } = limiterWith({ algorithm: 'leaky-bucket', limit: 5, windowMs: 5_000, blockMs: 60_000 });
    const tooBig = await limiter.consume('k', { cost: 6 });
    expect(tooBig).toMatchObject({ allowed: false, retryAfterMs: Number.POSITIVE_INFINITY });
    expect(tooBig.blocked).toBeUndefined();
    expect((await limiter.consume('k', { cost: 5 })).allowed).toBe(true);
  });

  it('keeps the block across the rules a call names, under a plan without blockMs too', async () => {
    const { limiter, clock } = limiterWith({ algorithm: 'sliding-window', limit: 100, windowMs: 60_000 });
    const strict = [{ algorithm: 'sliding-window', limit: 1, windowMs: 60_000, blockMs: 600_000 }] as const;
    const lenient = [{ algorithm: 'sliding-window', limit: 100, windowMs: 60_000 }] as const;
    await limiter.consume('k', { rules: strict });
    expect((await limiter.consume('k', { rules: strict })).blocked?.started).toBe(true);
    clock.advance(100_000);
    // The block lives in the rule's state (name 'default', sliding-window): the limiter's own rule and another plan honour it.
    expect(await limiter.consume('k', { rules: lenient })).toMatchObject({ allowed: false, retryAfterMs: 500_000, limit: 100 });
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, retryAfterMs: 500_000 });
    expect((await limiter.consume('other', { rules: lenient })).allowed).toBe(true);
    clock.advance(500_000);
    expect(await limiter.consume('k', { rules: lenient })).toMatchObject({ allowed: true });
  });

  it('escalates: each block within maxBlockMs of the last is twice as long, up to maxBlockMs; then forgets', async () => {
    const { limiter, clock } = limiterWith({ algorithm: 'fixed-window', limit: 1, windowMs: 1_000, blockMs: 10_000, maxBlockMs: 60_000 });
    const blocks: [number, number][] = [];
    for (let i = 0; i < 5; i++) {
      await limiter.consume('k'); // admitted: the last block is over, and so is the window
      const breach = await limiter.consume('k');
      blocks.push([breach.blocked?.blockMs ?? 0, breach.blocked?.strike ?? 0]);
      clock.advance((breach.blocked?.blockMs ?? 0) + 59_000); // 59 s after the block ended: still remembered
    }
    expect(blocks).toEqual([
      [10_000, 1],
      [20_000, 2],
      [40_000, 3],
      [60_000, 4],
      [60_000, 5],
    ]);
    // The last block ended 59 s ago; at 60 s without a block the strikes are forgotten.
    clock.advance(1_000);
    await limiter.consume('k');
    expect((await limiter.consume('k')).blocked).toEqual({ blockMs: 10_000, leftMs: 10_000, strike: 1, started: true, untilMs: clock.now() + 10_000 });
  });

  it('escalates from the last block a plan started, at least blockMs of the rule that breaches', async () => {
    const { limiter, clock } = limiterWith({ algorithm: 'fixed-window', limit: 1, windowMs: 1_000, blockMs: 1_000, maxBlockMs: 600_000 });
    const harsh = [{ algorithm: 'fixed-window', limit: 1, windowMs: 1_000, blockMs: 100_000, maxBlockMs: 600_000 }] as const;
    const noEscalation = [{ algorithm: 'fixed-window', limit: 1, windowMs: 1_000, blockMs: 5_000 }] as const;
    await limiter.consume('k');
    expect((await limiter.consume('k')).blocked).toMatchObject({ blockMs: 1_000, strike: 1 });
    clock.advance(2_000);
    await limiter.consume('k');
    expect((await limiter.consume('k', { rules: harsh })).blocked).toMatchObject({ blockMs: 100_000, strike: 2 }); // twice 1 s, but at least 100 s
    clock.advance(101_000);
    await limiter.consume('k');
    expect((await limiter.consume('k')).blocked).toMatchObject({ blockMs: 200_000, strike: 3 });
    clock.advance(201_000);
    await limiter.consume('k');
    // A rule without maxBlockMs does not escalate: its block is its blockMs, a first strike, and nothing is remembered after it.
    expect((await limiter.consume('k', { rules: noEscalation })).blocked).toMatchObject({ blockMs: 5_000, strike: 1 });
    clock.advance(6_000);
    await limiter.consume('k');
    expect((await limiter.consume('k')).blocked).toMatchObject({ blockMs: 1_000, strike: 1 });
  });

  it('starts a block on every denying rule with blockMs, whichever binds; a rule that admits starts none', async () => {
    const { limiter } = limiterWith({
      rules: [
        { name: 'per-second', algorithm: 'fixed-window', limit: 1, windowMs: 1_000, blockMs: 5_000 },
        { name: 'per-minute', algorithm: 'fixed-window', limit: 1, windowMs: 60_000, blockMs: 120_000 },
        { name: 'per-ip', scope: 'ip', algorithm: 'fixed-window', limit: 10, windowMs: 60_000, blockMs: 120_000 },
      ],
    });
    await limiter.consume({ key: 'k', ip: '203.0.113.9' });
    const breach = await limiter.consume({ key: 'k', ip: '203.0.113.9' });
    expect(breach).toMatchObject({ allowed: false, rule: 'per-minute', retryAfterMs: 120_000 });
    expect(breach.rules.map((r) => r.blocked?.blockMs)).toEqual([5_000, 120_000, undefined]);
    expect(breach.rules.every((r) => r.blocked === undefined || r.blocked.started)).toBe(true);
  });

  it("emits 'blocked' once per block started: key, scope, rule, its length, when it ends, its strike", async () => {
    const { limiter, clock } = limiterWith({
      rules: [
        { name: 'per-user', scope: 'user', algorithm: 'fixed-window', limit: 1, windowMs: 60_000, blockMs: 60_000, maxBlockMs: 3_600_000 },
        { name: 'per-ip', scope: 'ip', algorithm: 'fixed-window', limit: 100, windowMs: 60_000 },
      ],
    });
    const events: LimiterEvents['blocked'][] = [];
    limiter.on('blocked', (event) => events.push(event));
    const keys = { user: 'u42', ip: '203.0.113.9' };
    await limiter.consume(keys);
    const breach = await limiter.consume(keys);
    await limiter.consume(keys); // during the block: no event
    clock.advance(60_000);
    await limiter.consume(keys); // a new window: admitted
    await limiter.consume(keys); // a second breach within an hour: twice as long
    expect(events.map(({ decision, ...rest }) => rest)).toEqual([
      { key: keys, scope: 'user', rule: 'per-user', blockMs: 60_000, until: clock.start + 60_000, strike: 1 },
      { key: keys, scope: 'user', rule: 'per-user', blockMs: 120_000, until: clock.start + 180_000, strike: 2 },
    ]);
    expect(events[0]?.decision).toEqual(breach);
  });

  it('holds no longer than its length when the clock goes back, and ends when the clock jumps past it', async () => {
    const { limiter, clock } = limiterWith({ algorithm: 'sliding-window', limit: 1, windowMs: 1_000, blockMs: 10_000 });
    await limiter.consume('k');
    clock.advance(500);
    await limiter.consume('k'); // blocked until start + 10 500
    clock.advance(-60_000); // a minute back: the block stands still at its start, 10 s left
    expect(await limiter.peek('k')).toMatchObject({ allowed: false, retryAfterMs: 10_000, blocked: { leftMs: 10_000 } });
    clock.set(clock.start + 8_500);
    expect(await limiter.peek('k')).toMatchObject({ allowed: false, retryAfterMs: 2_000 });
    clock.advance(3_600_000); // an hour forward: long over
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('with the local deny cache: denied without the store until the block ends, not a ms longer; reset lifts it', async () => {
    const store = makeStore();
    let storeCalls = 0;
    const counting: Store = {
      consume: (...args) => {
        storeCalls++;
        return store.consume(...args);
      },
      peek: (...args) => store.peek(...args),
      refund: (...args) => store.refund(...args),
      reset: (...args) => store.reset(...args),
    };
    const { limiter, clock } = limiterWith({ algorithm: 'fixed-window', limit: 1, windowMs: 1_000, blockMs: 5_000, localDenyCache: true, store: counting });
    await limiter.consume('k');
    expect((await limiter.consume('k')).blocked?.started).toBe(true);
    const asked = storeCalls;
    clock.advance(4_999);
    const cached = await limiter.consume('k');
    expect(storeCalls).toBe(asked); // answered here
    expect(cached).toMatchObject({ allowed: false, retryAfterMs: 1, blocked: { leftMs: 1, started: false } });
    clock.advance(1);
    expect((await limiter.consume('k')).allowed).toBe(true);
    expect((await limiter.consume('k')).blocked?.started).toBe(true);
    expect((await limiter.consume('k')).blocked?.started).toBe(false); // remembered here
    await limiter.reset('k');
    expect((await limiter.consume('k')).allowed).toBe(true);
  });
});

describe.each(stores)('blocks by hand on the %s', (_, makeStore) => {
  const limiterWith = (options: LimiterOptions, clock = manualClock()) => ({
    clock,
    limiter: createLimiter({ store: makeStore(), prefix: `hand${prefixes++}:`, now: clock.now, timeoutMs: 30_000, ...options }),
  });
  const twoRules: LimiterOptions = {
    rules: [
      { name: 'per-second', algorithm: 'fixed-window', limit: 3, windowMs: 1_000 },
      { name: 'per-minute', algorithm: 'sliding-log', limit: 10, windowMs: 60_000 },
    ],
  };

  it('denies the key for ms, with what is left to wait, as a block by hand; other keys pass; unblock lifts it and the counts stayed', async () => {
    const { limiter, clock } = limiterWith(twoRules);
    await limiter.consume('k');
    await limiter.block('k', 900_000);
    clock.advance(100);
    const denied = await limiter.consume('k');
    expect(denied).toMatchObject({ allowed: false, retryAfterMs: 899_900, remaining: 0 });
    expect(denied.blocked).toEqual({ blockMs: 900_000, leftMs: 899_900, strike: 0, started: false, manual: true, untilMs: clock.start + 900_000 });
    expect(denied.rules.map((r) => r.blocked?.manual)).toEqual([true, true]);
    expect((await limiter.peek('k')).blocked).toMatchObject({ manual: true, leftMs: 899_900 });
    expect((await limiter.consume('other')).allowed).toBe(true);
    await limiter.unblock('k');
    const after = await limiter.consume('k');
    expect(after.allowed).toBe(true);
    expect(after.rules.map((r) => r.remaining)).toEqual([1, 8]); // the first call still counts; the denied one took nothing
  });

  it('ends by itself: at until - 1 denied with 1 ms to wait, at until admitted', async () => {
    const { limiter, clock } = limiterWith({ algorithm: 'token-bucket', limit: 5, windowMs: 1_000 });
    await limiter.block('k', 60_000);
    clock.advance(59_999);
    expect(await limiter.consume('k')).toMatchObject({ allowed: false, retryAfterMs: 1 });
    clock.advance(1);
    expect(await limiter.consume('k')).toMatchObject({ allowed: true, remaining: 4 });
  });

  it('under one rule only with { rule }, and unblock({ rule }) lifts that one', async () => {
    const { limiter } = limiterWith(twoRules);
    await limiter.block('k', 60_000, { rule: 'per-minute' });
    const denied = await limiter.consume('k');
    expect(denied.rules.map((r) => r.blocked?.manual)).toEqual([undefined, true]);
    expect(denied.rule).toBe('per-minute');
    await limiter.unblock('k', { rule: 'per-minute' });
    expect((await limiter.consume('k')).allowed).toBe(true);
  });

  it("replaces a rule's block and lifts it; a block by hand counts for no escalation", async () => {
    const { limiter, clock } = limiterWith({ algorithm: 'fixed-window', limit: 1, windowMs: 1_000, blockMs: 10_000, maxBlockMs: 80_000 });
    await limiter.consume('k');
    expect((await limiter.consume('k')).blocked).toMatchObject({ strike: 1, leftMs: 10_000 });
    await limiter.block('k', 2_000);
    expect((await limiter.consume('k')).blocked).toMatchObject({ manual: true, leftMs: 2_000 });
    clock.advance(2_000);
    await limiter.consume('k'); // a new window
    // The rule's next block is a first one again: the block by hand replaced the one remembered.
    expect((await limiter.consume('k')).blocked).toMatchObject({ strike: 1, leftMs: 10_000, started: true });
    await limiter.unblock('k');
    clock.advance(1_000);
    expect((await limiter.consume('k')).allowed).toBe(true);
  });

  it('lifts at once for every process: a block by hand is never remembered by the local deny cache', async () => {
    const store = makeStore();
    const clock = manualClock();
    const options = { store, prefix: `hand${prefixes++}:`, now: clock.now, timeoutMs: 30_000, limit: 5, windowMs: 1_000, localDenyCache: true };
    const a = createLimiter(options);
    const b = createLimiter(options);
    await a.block('k', 600_000);
    expect((await b.consume('k')).allowed).toBe(false);
    await a.unblock('k');
    expect((await b.consume('k')).allowed).toBe(true);
  });

  it('lists the blocks, by hand with their reasons and started by rules, a page at a time; unblock takes them off the list', async () => {
    const { limiter, clock } = limiterWith({
      rules: [
        { name: 'login-ip', scope: 'ip', algorithm: 'fixed-window', limit: 1, windowMs: 60_000, blockMs: 600_000 },
        { name: 'login-account', scope: 'account', algorithm: 'fixed-window', limit: 5, windowMs: 60_000 },
        { name: 'everyone', scope: 'global', algorithm: 'fixed-window', limit: 1_000, windowMs: 60_000 },
      ],
    });
    const start = clock.now();
    await limiter.block({ ip: '198.51.100.7', account: 'alice' }, 900_000, { reason: 'credential stuffing' });
    await limiter.consume({ ip: '203.0.113.9', account: 'bob' });
    const breach = await limiter.consume({ ip: '203.0.113.9', account: 'bob' });
    expect(breach.blocked).toMatchObject({ started: true, strike: 1 });
    // A call the block by hand denies says why.
    const denied = await limiter.consume({ ip: '198.51.100.7', account: 'carol' });
    expect(denied.blocked).toMatchObject({ manual: true, reason: 'credential stuffing', untilMs: start + 900_000 });
    // The rule-started block's record is written after the call: let it land.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const everything = await limiter.blocked();
    expect(everything.cursor).toBe('');
    expect(everything.items).toEqual([
      { key: 'alice', scope: 'account', rule: 'login-account', untilMs: start + 900_000, reason: 'credential stuffing', manual: true },
      { key: '198.51.100.7', scope: 'ip', rule: 'login-ip', untilMs: start + 900_000, reason: 'credential stuffing', manual: true },
      { key: '203.0.113.9', scope: 'ip', rule: 'login-ip', untilMs: start + 600_000, manual: false },
    ]); // the global rule holds no block by hand unless named
    const first = await limiter.blocked({ count: 2 });
    expect(first.items.map((item) => item.key)).toEqual(['alice', '198.51.100.7']);
    const second = await limiter.blocked({ cursor: first.cursor, count: 2 });
    expect(second).toEqual({ items: [everything.items[2]], cursor: '' });
    await limiter.unblock({ ip: '203.0.113.9', account: 'bob' });
    expect((await limiter.blocked()).items.map((item) => item.key)).toEqual(['alice', '198.51.100.7']);
    // A reset lifts a block with the counts, and takes it off the list too.
    await limiter.reset({ ip: '198.51.100.7', account: 'dave' });
    expect((await limiter.blocked()).items.map((item) => item.key)).toEqual(['alice']);
    expect((await limiter.consume({ ip: '198.51.100.7', account: 'dave' })).allowed).toBe(true);
    // Past its end a block is no longer listed, whatever the store still holds.
    clock.advance(900_000);
    expect((await limiter.blocked()).items).toEqual([]);
  });

  it('refuses bad input with ERR_FG_OPTION, naming what to give', async () => {
    const { limiter } = limiterWith(twoRules);
    for (const ms of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, MAX_BLOCK_MS + 1, '60000']) {
      await expect(limiter.block('k', ms as number)).rejects.toMatchObject({ code: 'ERR_FG_OPTION', message: expect.stringContaining('positive integer') });
    }
    await expect(limiter.block('k', 1_000, { rule: 'per-hour' })).rejects.toMatchObject({
      code: 'ERR_FG_OPTION',
      message: expect.stringContaining("'per-second', 'per-minute'"),
    });
    await expect(limiter.block('k', 1_000, { why: 'x' } as never)).rejects.toMatchObject({ code: 'ERR_FG_UNKNOWN_OPTION' });
    await expect(limiter.block('k', 1_000, { reason: 'x'.repeat(501) })).rejects.toMatchObject({
      code: 'ERR_FG_OPTION',
      message: expect.stringContaining('500'),
    });
    await expect(limiter.blocked({ count: 0 })).rejects.toMatchObject({ code: 'ERR_FG_OPTION' });
    await expect(limiter.blocked({ page: 1 } as never)).rejects.toMatchObject({ code: 'ERR_FG_UNKNOWN_OPTION' });
    await expect(limiter.block('', 1_000)).rejects.toMatchObject({ code: 'ERR_FG_KEY' });
    const leases = limiterWith({ algorithm: 'concurrency', limit: 2, windowMs: 60_000 }).limiter;
    await expect(leases.block('k', 1_000)).rejects.toMatchObject({ code: 'ERR_FG_OPTION', message: expect.stringContaining('concurrency') });
    await expect(limiter.unblock('k', { rule: 'nope' })).rejects.toBeInstanceOf(FloodgateError);
  });
});

describe('blockMs and maxBlockMs options', () => {
  const cases: [string, object][] = [
    ['blockMs 0', { blockMs: 0 }],
    ['blockMs -1', { blockMs: -1 }],
    ['blockMs 1.5', { blockMs: 1.5 }],
    ['blockMs Infinity', { blockMs: Number.POSITIVE_INFINITY }],
    ['blockMs as a string', { blockMs: '900000' }],
    ['blockMs null', { blockMs: null }],
    ['blockMs beyond 100 years', { blockMs: MAX_BLOCK_MS + 1 }],
    ['maxBlockMs without blockMs', { maxBlockMs: 60_000 }],
    ['maxBlockMs below blockMs', { blockMs: 60_000, maxBlockMs: 59_999 }],
    ['maxBlockMs beyond 100 years', { blockMs: 60_000, maxBlockMs: MAX_BLOCK_MS + 1 }],
    ['blockMs on concurrency', { algorithm: 'concurrency', blockMs: 60_000 }],
  ];

  it.each(cases)('%s: ERR_FG_OPTION, with a message that says what to change', (_, options) => {
    let thrown: unknown;
    try {
      createLimiter({ limit: 5, windowMs: 60_000, ...options } as LimiterOptions);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(FloodgateError);
    expect(thrown).toMatchObject({ code: 'ERR_FG_OPTION' });
    expect((thrown as Error).message).toMatch(/blockMs/);
  });

  it('takes both in shorthand, in rules, in updateRules and in per-call rules', async () => {
    const limiter = createLimiter({ limit: 1, windowMs: 1_000, blockMs: 1_000, maxBlockMs: MAX_BLOCK_MS });
    expect(limiter.rules[0]).toMatchObject({ blockMs: 1_000, maxBlockMs: MAX_BLOCK_MS });
    limiter.updateRules({ limit: 1, windowMs: 1_000, blockMs: 2_000 });
    expect(limiter.rules[0]).toMatchObject({ blockMs: 2_000, maxBlockMs: 0 });
    expect(limiter.rulesFor([{ limit: 1, windowMs: 1_000, blockMs: 3_000 }])[0]?.blockMs).toBe(3_000);
    expect(createLimiter({ limit: 1, windowMs: 1_000 }).rules[0]).toMatchObject({ blockMs: 0, maxBlockMs: 0 });
  });

  it("points users of rate-limiter-flexible's blockDuration to blockMs", () => {
    expect(() => createLimiter({ limit: 5, windowMs: 1000, blockDuration: 900 } as never)).toThrow(/'blockMs' \(milliseconds, not seconds\)/);
  });
});
