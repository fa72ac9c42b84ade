/*
 * The `settle` option's arithmetic, through the request flow the adapters
 * call (run, then settle once the response is over), on a clock the tests
 * move by hand: the estimate is taken at admission, then the difference is
 * given back or taken as far as each rule has it. Each spec runs on the
 * memory store and on a RedisStore on the limiter's clock, with the same
 * numbers; the property runs every algorithm against a model of the units used.
 */
import { useRedisServer } from '@floodgate/test-support';
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { FloodgateError } from '../errors.js';
import { createLimiter, type Limiter, type LimiterEvents } from '../limiter.js';
import type { LimiterOptions } from '../options.js';
import { MemoryStore } from '../stores/memory-store.js';
import { RedisStore } from '../stores/redis-store.js';
import type { Store } from '../stores/types.js';
import { createRateLimitFlow, type Outcome, type RateLimitOptions } from './middleware.js';

const redisServer = useRedisServer();

/** A clock the test moves by hand, from the start of a minute (windows align to it). */
function manualClock(start = Date.UTC(2100, 0, 1)) {
  let now = start;
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

/** What the test's handler reported: what `settle` reads from the request, as an app reads `res.locals.tokens`. */
type Request = { reported?: unknown };
type Args = [request: Request];

const flowOf = (options: RateLimitOptions<Args, never>) =>
  createRateLimitFlow<Args, never>({ validate: false, ...options }, { name: 'test', defaultKey: () => () => 'k', expose: () => {}, clientIp: () => undefined });

/** One request: admitted (or not) at its cost, answered with `status`, then settled; resolves once settled. */
async function serve(flow: ReturnType<typeof flowOf>, reported: unknown, status = 200): Promise<Outcome> {
  const request: Request = { reported };
  const outcome = await flow.run([request]);
  await flow.settle(outcome, status);
  return outcome;
}

const settleReported = (request: Request) => request.reported as number;

let prefixes = 0;
const stores: [string, () => Store][] = [
  ['MemoryStore', () => new MemoryStore()],
  ['RedisStore', () => new RedisStore({ client: redisServer.client, clock: 'client' })],
];

describe.each(stores)('settle: costs known after the response, on the %s', (_, makeStore) => {
  const limiterWith = (options: LimiterOptions, clock = manualClock()) => ({
    clock,
    limiter: createLimiter({ store: makeStore(), prefix: `settle${prefixes++}:`, now: clock.now, timeoutMs: 30_000, ...options }),
  });
  const remaining = async (limiter: Limiter) => (await limiter.peek('k')).remaining;

  it('takes the estimate at admission, then gives back what the request did not use, or takes what it used beyond it', async () => {
    const { limiter } = limiterWith({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000 });
    const flow = flowOf({ limiter, cost: 10, settle: settleReported });
    const first = await serve(flow, 4);
    expect(first.kind === 'pass' && first.decision.remaining).toBe(90); // this response's headers: the estimate
    expect(await remaining(limiter)).toBe(96);
    await serve(flow, 30);
    expect(await remaining(limiter)).toBe(66);
    await serve(flow, 10);
    expect(await remaining(limiter)).toBe(56);
    await serve(flow, 0); // nothing used: the whole estimate back
    expect(await remaining(limiter)).toBe(56);
    await serve(flow, undefined); // nothing reported: the estimate stands
    expect(await remaining(limiter)).toBe(46);
  });

  it('takes the units beyond the estimate as far as the rule has them: the key is empty, owes nothing more, and is whole again after a window', async () => {
    const { limiter, clock } = limiterWith({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000 });
    const flow = flowOf({ limiter, cost: 10, settle: settleReported });
    await serve(flow, 10);
    await serve(flow, 5_000); // 4 990 beyond the estimate, 80 left
    expect(await remaining(limiter)).toBe(0);
    // The next request's decision shows the settled cost: denied until the window ends.
    const next = await serve(flow, 10);
    expect(next.kind).toBe('deny');
    expect(next.kind !== 'skip' && next.decision.retryAfterMs).toBe(60_000);
    clock.advance(60_000);
    expect(await remaining(limiter)).toBe(100); // no debt carried into the next window
    const after = await serve(flow, 10);
    expect(after.kind === 'pass' && after.decision.remaining).toBe(90);
  });

  it('never gives back more than the capacity: a refund after the bucket refilled stops at full', async () => {
    const { limiter, clock } = limiterWith({ algorithm: 'token-bucket', limit: 60, windowMs: 60_000 }); // a unit a second
    const flow = flowOf({ limiter, cost: 30, settle: settleReported });
    const request: Request = { reported: 0 };
    const outcome = await flow.run([request]);
    expect(await remaining(limiter)).toBe(30);
    clock.advance(20_000); // 20 units back while the response ran
    await flow.settle(outcome, 200);
    expect(await remaining(limiter)).toBe(60); // 50 + 30 given back, capped at the burst
  });

  it('charges each rule as far as it has room: a rule with room takes all the extra units though another has fewer left', async () => {
    const { limiter } = limiterWith({
      rules: [
        { name: 'per-minute', algorithm: 'fixed-window', limit: 100, windowMs: 60_000 },
        { name: 'per-day', algorithm: 'fixed-window', limit: 1_000, windowMs: 86_400_000 },
      ],
    });
    const flow = flowOf({ limiter, cost: 10, settle: settleReported });
    await serve(flow, 300);
    const rules = (await limiter.peek('k')).rules.map((rule) => [rule.name, rule.remaining]);
    expect(rules).toEqual([
      ['per-minute', 0],
      ['per-day', 700],
    ]);
  });

  it('settles under the rules the request was decided under (a plan), and leaves a concurrency rule to its lease', async () => {
    const { limiter } = limiterWith({ limit: 1, windowMs: 1_000 });
    const plan = [
      { name: 'tokens', algorithm: 'token-bucket', limit: 1_000, windowMs: 60_000 },
      { name: 'in-flight', algorithm: 'concurrency', limit: 300, windowMs: 60_000 },
    ] as const;
    const flow = flowOf({ limiter, rules: () => plan, cost: 100, settle: settleReported });
    const outcome = await serve(flow, 250);
    expect(outcome.kind === 'pass' && outcome.lease !== undefined).toBe(true);
    const rules = (await limiter.peek('k', { rules: plan })).rules.map((rule) => [rule.name, rule.remaining]);
    // 100 taken, 150 more; the lease (weighing 100: the concurrency rule's cost) ended with the request.
    expect(rules).toEqual([
      ['tokens', 750],
      ['in-flight', 300],
    ]);
  });

  it('starts no block and emits no event of its own: one allowed per request, none for the units settled', async () => {
    const { limiter } = limiterWith({ algorithm: 'fixed-window', limit: 50, windowMs: 60_000, blockMs: 600_000 });
    const events: string[] = [];
    for (const name of ['allowed', 'limited', 'blocked', 'error'] as const) limiter.on(name, () => events.push(name));
    const flow = flowOf({ limiter, cost: 10, settle: settleReported });
    await serve(flow, 100);
    expect(events).toEqual(['allowed']);
    expect((await limiter.peek('k')).blocked).toBeUndefined();
    // The next request is denied by the rule, and that denial is the breach that blocks.
    expect((await serve(flow, 10)).kind).toBe('deny');
    expect(events).toEqual(['allowed', 'blocked', 'limited']);
  });
});

describe('settle: a concurrent request between its peek and its consume', () => {
  it('looks again and takes what is left, and the denial it met starts no block', async () => {
    const store = new MemoryStore();
    const limiter = createLimiter({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000, blockMs: 600_000, store, now: manualClock().now });
    const blocked: unknown[] = [];
    limiter.on('blocked', (event) => blocked.push(event));
    const flow = flowOf({ limiter, cost: 10, settle: settleReported });
    const outcome = await flow.run([{ reported: 200 }]); // 90 left
    // Another request takes 50 units right after the settle's first peek (which saw 90).
    const peek = store.peek.bind(store);
    const consume = store.consume.bind(store);
    let raced = false;
    const spy = vi.spyOn(store, 'peek').mockImplementation((ids, ruleSet, now) => {
      const seen = peek(ids, ruleSet, now);
      if (!raced) {
        raced = true;
        expect(consume(ids, ruleSet, 50, now)[0]?.allowed).toBe(true);
      }
      return seen;
    });
    await flow.settle(outcome, 200);
    spy.mockRestore();
    expect(raced).toBe(true);
    const after = await limiter.peek('k');
    expect([after.remaining, after.blocked, blocked]).toEqual([0, undefined, []]); // 90 asked, denied; then the 40 left taken
  });
});

describe('settle: which wins, and what is not settled', () => {
  const clocked = (options: LimiterOptions) => createLimiter({ now: manualClock().now, ...options });

  it('skipFailedRequests and skipSuccessfulRequests win: a request they give back is free and never settled', async () => {
    const limiter = clocked({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000 });
    const settle = vi.fn(settleReported);
    const flow = flowOf({ limiter, cost: 10, skipFailedRequests: true, settle });
    await serve(flow, 50, 502);
    expect(settle).not.toHaveBeenCalled();
    expect((await limiter.peek('k')).remaining).toBe(100);
    await serve(flow, 50, 200);
    expect(settle).toHaveBeenCalledTimes(1);
    expect((await limiter.peek('k')).remaining).toBe(50);
    const logins = clocked({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000, prefix: 'logins:' });
    const failures = flowOf({ limiter: logins, cost: 10, skipSuccessfulRequests: true, settle });
    await serve(failures, 30, 200);
    expect(settle).toHaveBeenCalledTimes(1);
    await serve(failures, 30, 500);
    expect(settle).toHaveBeenCalledTimes(2);
    expect((await logins.peek('k')).remaining).toBe(70);
  });

  it('shadow: an admitted request is settled, one the limiter would have denied took nothing and is not', async () => {
    const limiter = clocked({ algorithm: 'fixed-window', limit: 20, windowMs: 60_000 });
    const settle = vi.fn(settleReported);
    const flow = flowOf({ limiter, cost: 10, shadow: true, settle });
    await serve(flow, 15);
    expect((await limiter.peek('k')).remaining).toBe(5);
    const over = await serve(flow, 15);
    expect(over.kind === 'pass' && over.decision.allowed).toBe(false);
    expect(settle).toHaveBeenCalledTimes(1);
    expect((await limiter.peek('k')).remaining).toBe(5);
  });

  it('a request decided by onStoreError took nothing measured: it is not settled', async () => {
    const fail = () => Promise.reject(new Error('store down'));
    const limiter = createLimiter({ limit: 10, windowMs: 60_000, store: { consume: fail, peek: fail, refund: fail, reset: fail } as never });
    limiter.on('error', () => {});
    const settle = vi.fn(settleReported);
    const outcome = await serve(flowOf({ limiter, cost: 2, settle }), 5);
    expect(outcome.kind === 'pass' && outcome.decision.storeError).toBeInstanceOf(Error);
    expect(settle).not.toHaveBeenCalled();
  });

  it('stacked limiters each settle their own: one by the units reported, one by its own function, one not at all', async () => {
    const tokens = clocked({ algorithm: 'fixed-window', limit: 1_000, windowMs: 60_000 });
    const calls = clocked({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000, prefix: 'calls:' });
    const site = clocked({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000, prefix: 'site:' });
    const flows = [
      flowOf({ limiter: site }),
      flowOf({ limiter: tokens, cost: 100, settle: settleReported }),
      flowOf({ limiter: calls, cost: 5, settle: () => 1 }),
    ];
    const request: Request = { reported: 40 };
    const outcomes = await Promise.all(flows.map((flow) => flow.run([request])));
    await Promise.all(flows.map((flow, i) => flow.settle(outcomes[i] as Outcome, 200)));
    expect(await Promise.all([site, tokens, calls].map(async (limiter) => (await limiter.peek('k')).remaining))).toEqual([99, 960, 99]);
  });

  it("passes the adapter's response after the request's arguments when it gives one (the fetch adapter)", async () => {
    const limiter = clocked({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000 });
    const settle = vi.fn((...args: unknown[]) => (args[1] as { tokens: number }).tokens);
    const flow = flowOf({ limiter, cost: 10, settle: settle as never });
    const request: Request = {};
    await flow.settle(await flow.run([request]), 200, { tokens: 25 });
    expect(settle).toHaveBeenCalledWith(request, { tokens: 25 });
    expect((await limiter.peek('k')).remaining).toBe(75);
  });
});

describe('settle: a function that fails or returns no unit count', () => {
  it('reports ERR_FG_COST through the limiter\'s error event (operation "settle"), never rejects, and keeps the estimate', async () => {
    const limiter = createLimiter({ algorithm: 'fixed-window', limit: 1_000, windowMs: 60_000, now: manualClock().now });
    const errors: LimiterEvents['error'][] = [];
    limiter.on('error', (event) => errors.push(event));
    const thrown = new Error('usage missing');
    const returned: unknown[] = [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53, '7', null, {}, [3], true];
    const flows = [
      ...returned.map((value) => flowOf({ limiter, cost: 10, settle: () => value as number })),
      flowOf({ limiter, cost: 10, settle: () => Promise.resolve(-5) }),
      flowOf({
        limiter,
        cost: 10,
        settle: () => {
          throw thrown;
        },
      }),
      flowOf({ limiter, cost: 10, settle: () => Promise.reject(thrown) }),
    ];
    for (const flow of flows) await serve(flow, 1);
    expect(errors).toHaveLength(flows.length);
    for (const event of errors) {
      expect(event.operation).toBe('settle');
      expect(event.key).toBe('k');
      expect(event.error).toBeInstanceOf(FloodgateError);
      expect((event.error as FloodgateError).code).toBe('ERR_FG_COST');
    }
    expect(errors[0]?.error.message).toBe(
      'The settle function returned -1; it must return the units the request took, a non-negative integer (or undefined to keep its cost). [ERR_FG_COST]',
    );
    expect(errors.at(-1)?.error.message).toBe('The settle function threw: usage missing [ERR_FG_COST]');
    expect(errors.at(-1)?.error.cause).toBe(thrown);
    // Every estimate stands: 10 units per request, nothing given back or taken.
    expect((await limiter.peek('k')).remaining).toBe(1_000 - 10 * flows.length);
  });

  it('without a listener, logs it (at most once per 10 s, as store errors)', async () => {
    const limiter = createLimiter({ limit: 10, windowMs: 60_000 });
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      await serve(flowOf({ limiter, settle: () => -1 }), 1);
      await serve(flowOf({ limiter, settle: () => -1 }), 1);
      expect(warn).toHaveBeenCalledTimes(1);
      expect(String(warn.mock.calls[0]?.[0])).toMatch(/^\[floodgate\] settle function failed: The settle function returned -1/);
    } finally {
      warn.mockRestore();
    }
  });

  it('a store that fails while settling: the error event says so, nothing is taken, nothing rejects', async () => {
    const store = new MemoryStore();
    const limiter = createLimiter({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000, store, now: manualClock().now });
    const operations: string[] = [];
    limiter.on('error', ({ operation }) => operations.push(operation));
    const flow = flowOf({ limiter, cost: 10, settle: settleReported });
    const outcome = await flow.run([{ reported: 60 }]);
    const peek = vi.spyOn(store, 'peek').mockImplementation(() => {
      throw new Error('store down');
    });
    const refund = vi.spyOn(store, 'refund').mockImplementation(() => {
      throw new Error('store down');
    });
    await flow.settle(outcome, 200);
    await flow.settle(await flow.run([{ reported: 0 }]), 200);
    expect(operations).toEqual(['peek', 'refund']);
    peek.mockRestore();
    refund.mockRestore();
    expect((await limiter.peek('k')).remaining).toBe(80);
  });

  it('rejects a settle option that is not a function when the middleware is built', () => {
    for (const settle of [5, 'tokens', {}, null]) {
      expect(() => flowOf({ limit: 1, windowMs: 1_000, settle } as never)).toThrow(
        expect.objectContaining({ code: 'ERR_FG_OPTION', message: expect.stringContaining('settle must be a function') }),
      );
    }
  });
});

describe('settle on every algorithm: the units a key holds are those a model of used units says', () => {
  const algorithms = ['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket', 'leaky-bucket', 'gcra'] as const;
  /** A request: its estimate (some above the capacity), what it reports (undefined: nothing). */
  const request = fc.record({ cost: fc.integer({ min: 1, max: 24 }), used: fc.option(fc.integer({ min: 0, max: 60 }), { nil: undefined }) });

  it('on a clock that stands still: admitted when the estimate fits, then used = the estimate, adjusted by the difference within [0, capacity]', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...algorithms), fc.array(request, { minLength: 1, maxLength: 12 }), async (algorithm, requests) => {
        const capacity = 20;
        const limiter = createLimiter({ algorithm, limit: capacity, windowMs: 60_000, now: manualClock().now });
        let used = 0;
        for (const { cost, used: reported } of requests) {
          const outcome = await serve(flowOf({ limiter, cost, settle: () => reported }), undefined);
          const fits = used + cost <= capacity;
          expect(outcome.kind).toBe(fits ? 'pass' : 'deny');
          if (!fits) continue;
          used += cost;
          if (reported !== undefined) used = Math.min(capacity, Math.max(0, used + reported - cost));
          expect((await limiter.peek('k')).remaining).toBe(capacity - used);
        }
      }),
      { numRuns: 300 },
    );
  });
});
