import { describe, expect, it } from 'vitest';
import { FloodgateError } from './errors.js';
import { createLimiter } from './limiter.js';
import { RateLimitedError } from './rate-limited-error.js';
import type { Store } from './stores/types.js';
import { FakeTimers } from './test-support/fake-timers.js';
import { WaitingRoom, type WaitOptions } from './wait.js';
import { type WrappableLimiter, wrap } from './wrap.js';

describe('limiter.wrap', () => {
  it("passes `this` and the arguments to fn unchanged, returns fn's result, and keeps its name", async () => {
    const limiter = createLimiter({ limit: 5, windowMs: 60_000 });
    const account = {
      owner: 'ada',
      transfer: limiter.wrap(
        async function transfer(this: { owner: string }, to: string, amount: number) {
          return `${this.owner} -> ${to}: ${amount}`;
        },
        {
          key(this: { owner: string }, to: string) {
            return `${this.owner}:${to}`;
          },
          cost: (_to, amount) => amount,
        },
      ),
    };
    await expect(account.transfer('bob', 2)).resolves.toBe('ada -> bob: 2');
    expect(account.transfer.name).toBe('transfer');
    expect((await limiter.peek('ada:bob')).remaining).toBe(3);
  });

  it('rejects a denied call with RateLimitedError, naming the rule and its scope and when to retry; fn does not run', async () => {
    const limiter = createLimiter({
      now: () => 1_000_000,
      rules: [
        { name: 'everyone', scope: 'global', algorithm: 'fixed-window', limit: 100, windowMs: 60_000 },
        { name: 'per-user', scope: 'user', algorithm: 'fixed-window', limit: 1, windowMs: 60_000 },
      ],
    });
    let runs = 0;
    const send = limiter.wrap(
      async (user: string) => {
        runs++;
        return user;
      },
      { key: (user) => ({ user }) },
    );
    await send('u1');
    const error = await send('u1').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitedError);
    expect(error).toBeInstanceOf(FloodgateError);
    expect(error).toMatchObject({ name: 'RateLimitedError', code: 'ERR_FG_RATE_LIMITED', status: 429, retryAfterMs: 20_000, decision: { rule: 'per-user' } });
    expect((error as Error).message).toBe("Rate limited by rule 'per-user' (scope 'user'): retry in 20000 ms. [ERR_FG_RATE_LIMITED]");
    expect(runs).toBe(1);
  });

  it('waits its turn with wait: true, and rejects with ERR_FG_WAIT_TIMEOUT beyond wait.maxWaitMs', async () => {
    const limiter = createLimiter({ algorithm: 'gcra', limit: 20, windowMs: 1000, burst: 1 }); // one every 50 ms
    const started = performance.now();
    const times: number[] = [];
    const call = limiter.wrap(async (n: number) => times.push(performance.now() - started) && n, { key: () => 'api', wait: true });
    expect(await Promise.all([1, 2, 3].map((n) => call(n)))).toEqual([1, 2, 3]);
    expect(times[2]).toBeGreaterThanOrEqual(2 * 50 - 2);
    const hurried = limiter.wrap(async () => 'ran', { key: () => 'api', wait: { maxWaitMs: 5 } });
    await hurried().catch(() => {}); // one of the two goes (or both wait too long), the next surely does not
    await expect(hurried()).rejects.toMatchObject({ code: 'ERR_FG_WAIT_TIMEOUT' });
  });

  it('decides each call under the rules its arguments choose (plans)', async () => {
    const limiter = createLimiter({ limit: 1, windowMs: 60_000 });
    const free = [{ name: 'plan', algorithm: 'fixed-window' as const, limit: 1, windowMs: 60_000 }];
    const paid = [{ name: 'plan', algorithm: 'fixed-window' as const, limit: 3, windowMs: 60_000 }];
    const call = limiter.wrap(async (_tenant: string, plan: 'free' | 'paid') => plan, {
      key: (tenant) => tenant,
      rules: (_tenant, plan) => (plan === 'paid' ? paid : free),
    });
    await call('t1', 'free');
    await expect(call('t1', 'free')).rejects.toBeInstanceOf(RateLimitedError);
    await expect(call('t1', 'paid')).resolves.toBe('paid'); // the same count, under the paid plan's limit
  });

  it('ends the lease of a concurrency rule when fn is done, also when it throws', async () => {
    const limiter = createLimiter({ algorithm: 'concurrency', limit: 1, windowMs: 60_000 });
    const call = limiter.wrap(
      async (fail: boolean) => {
        expect((await limiter.peek('job')).remaining).toBe(0);
        if (fail) throw new Error('boom');
        return 'done';
      },
      { key: 'job' },
    );
    await expect(call(true)).rejects.toThrow('boom');
    await expect(call(false)).resolves.toBe('done');
    expect((await limiter.peek('job')).remaining).toBe(1);
  });

  it('runs a call a shaping rule delays after its delay, without wait', async () => {
    const limiter = createLimiter({ algorithm: 'leaky-bucket', mode: 'shape', limit: 10, windowMs: 1000, burst: 5 }); // one every 100 ms
    const started = performance.now();
    const call = limiter.wrap(async () => performance.now() - started, { key: 'k' });
    const [first, second] = await Promise.all([call(), call()]);
    expect(first).toBeLessThan(100);
    expect(second).toBeGreaterThanOrEqual(100 - 2);
  });

  it("runs fn when the store fails under onStoreError: 'allow', and rejects under 'deny'", async () => {
    const fail = () => Promise.reject(new Error('connection refused'));
    for (const onStoreError of ['allow', 'deny'] as const) {
      const store: Store = { consume: fail, peek: fail, refund: fail, reset: fail };
      const limiter = createLimiter({ limit: 1, windowMs: 1000, store, onStoreError });
      limiter.on('error', () => {});
      const call = limiter.wrap(async () => 'ran', { key: 'k' });
      if (onStoreError === 'allow') await expect(call()).resolves.toBe('ran');
      else await expect(call()).rejects.toThrow(/the store failed \(connection refused\) and onStoreError denied the call; retry in 1000 ms/);
    }
  });

  it('checks its options when it wraps, and names what to change', () => {
    const limiter = createLimiter({ limit: 1, windowMs: 1000 });
    const fn = async () => 1;
    expect(() => limiter.wrap(fn, {} as never)).toThrow(expect.objectContaining({ code: 'ERR_FG_KEY' }));
    expect(() => limiter.wrap(fn, { key: 'k', maxWaitMs: 10 } as never)).toThrow(
      expect.objectContaining({ code: 'ERR_FG_UNKNOWN_OPTION', message: expect.stringContaining("wrap() has no option 'maxWaitMs'") }),
    );
    expect(() => limiter.wrap(fn, { key: 'k', wait: { timeout: 5 } as never })).toThrow(expect.objectContaining({ code: 'ERR_FG_UNKNOWN_OPTION' }));
    expect(() => limiter.wrap(fn, { key: 'k', wait: 1 as never })).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
    expect(() => limiter.wrap(fn, { key: 'k', cost: 0 })).toThrow(expect.objectContaining({ code: 'ERR_FG_COST' }));
    expect(() => limiter.wrap(fn, { key: 'k', rules: {} as never })).toThrow(expect.objectContaining({ code: 'ERR_FG_RULES' }));
    expect(() => limiter.wrap('nope' as never, { key: 'k' })).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
  });
});

/**
 * wrap() over a limiter whose waits stand in a waiting room on a hand-moved
 * clock: what wrap hands to wait() (priority among it) decides the order.
 */
function onFakeClock() {
  const clock = new FakeTimers();
  const limiter = createLimiter({ algorithm: 'gcra', limit: 10, windowMs: 1000, burst: 1, now: clock.now }); // one every 100 ms
  const room = new WaitingRoom(
    {
      consume: (keys, o) => limiter.consume(keys, o),
      refund: (keys, o) => limiter.refund(keys, o),
      release: (keys, leaseId, o) => limiter.release(keys, leaseId, o),
      rulesFor: (rules) => limiter.rulesFor(rules),
      lineOf: (keys) => JSON.stringify(keys),
    },
    clock,
  );
  const asked: WaitOptions[] = [];
  const waiting: WrappableLimiter = {
    consume: (keys, o) => limiter.consume(keys, o),
    release: (keys, leaseId, o) => limiter.release(keys, leaseId, o),
    wait: (keys, o = {}) => {
      asked.push(o);
      return room.wait(keys, o.cost ?? 1, o.rules, o.maxWaitMs, o.signal, o.priority);
    },
  };
  return { clock, limiter, waiting, asked };
}

describe('limiter.wrap: priorities', () => {
  it('orders the waiting calls by wait.priority, a number or a function of the arguments', async () => {
    const { clock, limiter, waiting } = onFakeClock();
    await limiter.consume('api');
    const ran: string[] = [];
    const job = async (name: string) => {
      ran.push(name);
      return name;
    };
    const byKind = wrap(waiting, job, { key: 'api', wait: { priority: (name) => (name.startsWith('user') ? 5 : 0) } });
    const nightly = wrap(waiting, job, { key: 'api', wait: { priority: -5 } });
    const done = Promise.all([nightly('report'), byKind('sync-1'), byKind('user-1'), byKind('sync-2'), byKind('user-2')]);
    await clock.advance(1000);
    await expect(done).resolves.toEqual(['report', 'sync-1', 'user-1', 'sync-2', 'user-2']);
    expect(ran).toEqual(['user-1', 'user-2', 'sync-1', 'sync-2', 'report']);
  });

  it('lets calls made one after another wait in that order, whatever options they have', async () => {
    const { clock, limiter, waiting } = onFakeClock();
    await limiter.consume('api');
    const ran: string[] = [];
    const job = async (name: string) => ran.push(name);
    const plain = wrap(waiting, job, { key: 'api', wait: true });
    const ranked = wrap(waiting, job, { key: () => 'api', cost: () => 1, wait: { priority: () => 0, maxWaitMs: 60_000 } });
    const done = Promise.all([plain('a'), ranked('b'), plain('c'), ranked('d')]);
    await clock.advance(1000);
    await done;
    expect(ran).toEqual(['a', 'b', 'c', 'd']);
  });

  it('gives wait() no priority when none is set (a plain wait keeps the options it always had)', async () => {
    const { waiting, asked } = onFakeClock();
    await wrap(waiting, async () => 1, { key: 'api', wait: { maxWaitMs: 10 } })();
    await wrap(waiting, async () => 1, { key: 'other-api', wait: { priority: 2 } })();
    expect(asked.map((o) => 'priority' in o)).toEqual([false, true]);
  });

  it('refuses a bad priority when it wraps, and a call whose priority function returns one; fn does not run', async () => {
    const { waiting } = onFakeClock();
    let runs = 0;
    const fn = async () => ++runs;
    for (const priority of [0.5, 1001, Number.NaN, '3']) {
      expect(() => wrap(waiting, fn, { key: 'api', wait: { priority: priority as number } })).toThrow(
        expect.objectContaining({ code: 'ERR_FG_OPTION', message: expect.stringContaining('wait.priority must be an integer from -1000 to 1000') }),
      );
    }
    const computed = wrap(waiting, fn, { key: 'api', wait: { priority: () => 1e6 } });
    await expect(computed()).rejects.toMatchObject({ code: 'ERR_FG_OPTION' });
    expect(runs).toBe(0);
  });
});
