import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FloodgateError } from '../errors.js';
import { MemoryStore } from '../stores/memory-store.js';
import { RedisStore } from '../stores/redis-store.js';
import { createRateLimitFlow } from './middleware.js';

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
          for (const name of ['key', 'skip', 'handler'] as const) if (options[name] !== undefined) expect(typeof options[name]).toBe('function');
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
