import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FloodgateError } from '../errors.js';
import { MemoryStore } from '../stores/memory-store.js';
import { RedisStore } from '../stores/redis-store.js';
import { createRateLimitFlow, handlerSignals } from './middleware.js';

const build = (options: unknown) =>
  createRateLimitFlow(options as never, {
    name: 'test',
    defaultKey: () => () => 'k',
    expose: () => {},
    clientIp: () => '127.0.0.1',
    extraKeys: ['getConnInfo'],
  });

/** Values of every type and shape, valid ones among them. */
const anything = fc.oneof(
  fc.integer({ min: -3, max: 1_000 }),
  fc.double(),
  fc.string({ maxLength: 10 }),
  fc.boolean(),
  fc.constantFrom(
    undefined,
    null,
    [],
    {},
    () => 'k',
    () => 3,
    async () => 'k',
    'legacy',
    'draft-8',
    'both',
    'allow',
    'deny',
    429,
    0,
    Number.NaN,
  ),
  fc.object({ maxDepth: 1, maxKeys: 3 }),
);

const adapterOptions = fc.record(
  {
    limit: fc.oneof(fc.integer({ min: 1, max: 100 }), anything),
    windowMs: fc.oneof(fc.integer({ min: 1, max: 100_000 }), anything),
    algorithm: anything,
    key: anything,
    cost: anything,
    skip: anything,
    statusCode: anything,
    message: anything,
    handler: anything,
    headers: anything,
    skipSuccessfulRequests: anything,
    skipFailedRequests: anything,
    shadow: anything,
    settle: anything,
    limiter: anything,
    timeoutMs: anything,
    onStoreError: anything,
    localDenyCache: anything,
    getConnInfo: anything,
    allowList: fc.oneof(anything, fc.array(fc.oneof(fc.constantFrom('10.0.0.0/8', '::1', '2001:db8::/33', '1.2.3.4/33', 'x'), fc.string()), { maxLength: 3 })),
    denyList: fc.oneof(anything, fc.array(fc.constantFrom('192.168.0.0/16', '203.0.113.7', 'fe80::/10', '10.0.0.0/8/1'), { maxLength: 3 })),
    validate: fc.oneof(anything, fc.record({ singleKey: anything, xForwardedFor: anything, trustProxy: anything, ip: anything }, { requiredKeys: [] })),
  },
  { requiredKeys: [] },
);

function onlyFloodgateErrors(run: () => unknown): void {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(FloodgateError);
    expect((error as FloodgateError).code).toMatch(/^ERR_FG_/);
    expect((error as FloodgateError).message.length).toBeGreaterThan(20);
  }
}

describe('option validation, fuzzed', () => {
  it('rateLimit() options: every invalid combination is a FloodgateError, never a TypeError or a silent default', () => {
    fc.assert(
      fc.property(adapterOptions, (options) => {
        onlyFloodgateErrors(() => {
          const flow = build(options);
          // What was accepted must be usable as given.
          if (options.statusCode !== undefined) expect(Number.isInteger(options.statusCode) && (options.statusCode as number) >= 400).toBe(true);
          if (options.headers !== undefined) expect(['legacy', 'draft-8', 'both', false]).toContain(options.headers);
          for (const name of ['key', 'skip', 'handler', 'settle'] as const) if (options[name] !== undefined) expect(typeof options[name]).toBe('function');
          expect(typeof flow.run).toBe('function');
        });
      }),
      { numRuns: 3_000 },
    );
  });

  it('MemoryStore and RedisStore options likewise', () => {
    const client = { evalsha: async () => [], eval: async () => [] };
    fc.assert(
      fc.property(fc.record({ maxKeys: anything, sweepIntervalMs: anything, other: anything }, { requiredKeys: [] }), (options) => {
        onlyFloodgateErrors(() => new MemoryStore(options as never).close());
      }),
      { numRuns: 1_000 },
    );
    fc.assert(
      fc.property(fc.record({ client: fc.oneof(fc.constant(client), anything), prefix: anything, clock: anything }, { requiredKeys: [] }), (options) => {
        onlyFloodgateErrors(() => new RedisStore(options as never));
      }),
      { numRuns: 1_000 },
    );
  });
});

describe('runNow(): the request flow without promises where nothing needs one', () => {
  const isThenable = (value: unknown) => typeof (value as { then?: unknown } | null)?.then === 'function';

  it('answers synchronously with the memory store and synchronous callbacks, and the outcome is the one run() resolves to', async () => {
    const flow = build({ limit: 2, windowMs: 60_000, validate: false, skip: () => false, cost: () => 1 });
    const first = flow.runNow([]);
    expect(isThenable(first)).toBe(false);
    expect(first).toMatchObject({ kind: 'pass', decision: { allowed: true, remaining: 1 } });
    expect(await flow.run([])).toMatchObject({ kind: 'pass', decision: { allowed: true, remaining: 0 } });
    const denied = flow.runNow([]);
    expect(isThenable(denied)).toBe(true); // a denial renders its body in an async step
    expect(await denied).toMatchObject({ kind: 'deny', status: 429, decision: { allowed: false } });
  });

  it('waits only for the callbacks that return promises, in order: skip, key, cost, rules', async () => {
    const calls: string[] = [];
    const noted =
      <T>(name: string, value: T) =>
      async () => {
        calls.push(name);
        return value;
      };
    const flow = build({
      windowMs: 60_000,
      validate: false,
      skip: noted('skip', false),
      key: noted('key', 'k'),
      cost: noted('cost', 2),
      limit: noted('limit', 5),
    });
    const outcome = flow.runNow([]);
    expect(isThenable(outcome)).toBe(true);
    expect(await outcome).toMatchObject({ kind: 'pass', decision: { allowed: true, limit: 5, remaining: 3 } });
    expect(calls).toEqual(['skip', 'key', 'cost', 'limit']);
    expect(await flow.runNow([])).toMatchObject({ kind: 'pass', decision: { remaining: 1 } });
  });

  it('throws a bad key at once from runNow(), and run() rejects with it (never throws)', async () => {
    const flow = build({ limit: 2, windowMs: 60_000, validate: false, key: () => '' });
    expect(() => flow.runNow([])).toThrow(expect.objectContaining({ code: 'ERR_FG_KEY' }));
    let ran: Promise<unknown> | undefined;
    expect(() => {
      ran = flow.run([]);
    }).not.toThrow();
    await expect(ran).rejects.toMatchObject({ code: 'ERR_FG_KEY' });
  });

  it('sets taken only when a refund may follow, so that settling has work only then', async () => {
    const plain = build({ limit: 5, windowMs: 60_000, validate: false });
    const refunding = build({ limit: 5, windowMs: 60_000, validate: false, skipFailedRequests: true });
    const kept = await plain.run([]);
    const refundable = await refunding.run([]);
    expect(kept).toMatchObject({ kind: 'pass', taken: undefined });
    expect(plain.mustSettle(kept)).toBe(false);
    expect(refundable).toMatchObject({ kind: 'pass', taken: { keys: 'k', cost: 1 } });
    expect(refunding.mustSettle(refundable)).toBe(true);
    refunding.settle(refundable, 500);
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect((await refunding.limiter.peek('k')).remaining).toBe(5); // the failed request's unit is back
  });
});

describe('handlerSignals(): when a handler is done, as a framework hook tells', () => {
  it('tells every stacked limit of a request once, with the status, and rejects them when the handler failed', async () => {
    const handlers = handlerSignals();
    const request = {};
    const other = {};
    expect(handlers.waiting(request)).toBe(false);
    const outer = handlers.wait(request);
    const inner = handlers.wait(request);
    const failed = handlers.wait(other);
    expect(handlers.waiting(request)).toBe(true);
    handlers.done(request, 201);
    handlers.done(request, 500); // too late: told once
    expect(await Promise.all([outer, inner])).toEqual([201, 201]);
    expect(handlers.waiting(request)).toBe(false);
    handlers.done(other, undefined);
    await expect(failed).rejects.toThrow('the handler failed');
  });
});
