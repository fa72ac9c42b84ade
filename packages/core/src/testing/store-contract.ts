/*
 * The store contract: what every Store must do, as vitest tests any store
 * package runs from its own test files. A store passes when it makes the
 * decisions of the reference (testing/reference.ts: the pure algorithms,
 * composed all or nothing over the keys of each rule's scope, blocks written
 * from the contract) on random traces of consume, peek, refund, reset and
 * release, with costs, scopes, plans (rules per call), blocks and clock
 * jumps both ways, field by field; and, given a way to start it in other
 * processes, when several processes sharing it admit exactly the limit.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ALGORITHMS } from '../algorithms/registry.js';
import type { Decision } from '../decision.js';
import type { Keys } from '../keys.js';
import { createLimiter, type Limiter } from '../limiter.js';
import { type AlgorithmName, algorithms, type CompiledRule, compileRule, type RuleOptions } from '../rules.js';
import type { BlockedInfo, Store } from '../stores/types.js';
import { expectedDecision, referenceLimiter } from './reference.js';

export interface StoreContractOptions {
  /**
   * How many random traces each property runs (the blocking property runs
   * a third as many). More find more; a store with slow round trips may
   * take fewer. @defaultValue 300
   */
  numRuns?: number;
  /**
   * Where the trace clocks start (ms since the epoch). Any epoch must
   * work: the store decides with the limiter's clock.
   * @defaultValue Date.UTC(2100, 0, 1)
   */
  epoch?: number;
  /**
   * The multi-process test: a module whose default export makes the store
   * (`export default () => new MyStore(...)`, a promise of one allowed),
   * run in `processes` child processes at once, each with 32 calls in flight
   * on one key; they must admit exactly the limit under every algorithm.
   * Omit it for a store that lives in one process (as MemoryStore does).
   */
  processes?: {
    /** The module (a path or a file URL). */
    module: string | URL;
    /** Node options of the children, e.g. `['--import', 'tsx']` for a TypeScript module. @defaultValue [] */
    execArgv?: string[];
    /** How many processes. @defaultValue 4 */
    count?: number;
    /** Calls per process. @defaultValue 3000 */
    calls?: number;
  };
  /** Each test's timeout in ms. @defaultValue 180_000 */
  timeoutMs?: number;
}

const scopes = ['key', 'key', 'ip', 'user', 'global'] as const;
const every: readonly AlgorithmName[] = algorithms;
const blockingAlgorithms = every.filter((algorithm) => ALGORITHMS[algorithm].blocks);

/**
 * Blocking options, for every algorithm but concurrency: none (unless
 * `always`), blockMs alone, or with escalation (maxBlockMs up to 8 times
 * blockMs); blocks from a tenth of the shortest window to the longest window,
 * or to the shortest one when `always` (so that blocks end, and strikes
 * follow each other, within a trace).
 */
function blocking(algorithm: AlgorithmName, range: [number, number], always: boolean): fc.Arbitrary<Pick<RuleOptions, 'blockMs' | 'maxBlockMs'>> {
  if (!ALGORITHMS[algorithm].blocks) return fc.constant({});
  const blockMs = fc.integer({ min: Math.max(1, Math.round(range[0] / 10)), max: always ? range[0] : range[1] });
  return fc.oneof(
    { weight: always ? 0 : 2, arbitrary: fc.constant({}) },
    { weight: 1, arbitrary: blockMs.map((ms) => ({ blockMs: ms })) },
    { weight: 1, arbitrary: fc.tuple(blockMs, fc.integer({ min: 1, max: 8 })).map(([ms, times]) => ({ blockMs: ms, maxBlockMs: ms * times })) },
  );
}

/** A rule of the algorithm, with windows of `range` ms (a bucket's refill time stretched into the range too). */
function contractRule(algorithm: AlgorithmName, name: string, range: [number, number], blocks = false): fc.Arbitrary<RuleOptions> {
  return fc
    .record({
      limit: fc.integer({ min: 1, max: blocks ? 4 : 12 }),
      windowMs: fc.integer({ min: range[0], max: range[1] }),
      burst: fc.integer({ min: 1, max: 15 }),
      segments: fc.integer({ min: 1, max: 6 }),
      shape: fc.boolean(),
      scope: fc.constantFrom(...scopes),
      block: blocking(algorithm, range, blocks),
    })
    .map(({ limit, windowMs, burst, segments, shape, scope, block }): RuleOptions => {
      const takes = ALGORITHMS[algorithm].takes;
      const rule: RuleOptions = { name, scope, algorithm, limit, windowMs, ...block };
      // A window the segments divide; a bucket's refill time stretched into the range.
      if (takes.includes('segments')) Object.assign(rule, { segments, windowMs: Math.max(segments, windowMs - (windowMs % segments)) });
      if (takes.includes('burst')) Object.assign(rule, { burst, windowMs: windowMs * Math.ceil(limit / burst) });
      if (takes.includes('mode')) rule.mode = shape ? 'shape' : 'police';
      return rule;
    });
}

const ruleLists = (range: [number, number], blocks: boolean) =>
  fc
    .array(fc.constantFrom(...(blocks ? blockingAlgorithms : every)), { minLength: 1, maxLength: blocks ? 2 : 3 })
    .chain((names) => fc.tuple(...names.map((algorithm, i) => contractRule(algorithm, `r${i}`, range, blocks))));

/**
 * A limiter's rules and two plans: the same rule names, algorithms and scopes
 * with other numbers, that a call may be decided under instead (consume(keys,
 * { rules })). State is kept per rule name and algorithm, so it carries from
 * plan to plan.
 */
export const rulesAndPlans = (range: [number, number], blocks = false): fc.Arbitrary<RuleOptions[][]> =>
  ruleLists(range, blocks).chain((rules) =>
    fc.tuple(
      fc.constant(rules),
      ...[0, 1].map(() =>
        fc.tuple(
          ...rules.map((rule) =>
            contractRule(rule.algorithm as AlgorithmName, rule.name as string, range, false).map((plan): RuleOptions => {
              // A plan keeps what shapes a rule's state: its algorithm and scope, a sliding
              // window's segments, and a sliding log's window (the calls each store keeps).
              const kept = { scope: rule.scope, ...(rule.segments === undefined ? {} : { segments: rule.segments }) };
              if (rule.algorithm === 'sliding-window')
                return { ...plan, ...kept, windowMs: Math.max(plan.windowMs - (plan.windowMs % (rule.segments ?? 1)), rule.segments ?? 1) };
              if (rule.algorithm === 'sliding-log') return { ...plan, ...kept, windowMs: rule.windowMs };
              return { ...plan, ...kept };
            }),
          ),
        ),
      ),
    ),
  );

/** The keys of a call: a string (scope `key` only) or one key per scope, with keys that try to break out of their hash tag. */
const callKeys = fc.record({
  key: fc.constantFrom('a', 'b', 'user:{42}', 'x}:r0', '%global', "o'k;--"),
  ip: fc.constantFrom('203.0.113.9', '2001:db8::/56'),
  user: fc.constantFrom('u1', 'u2'),
});

export interface Step {
  op: string;
  keys: { key: string; ip: string; user: string };
  /** ms from the previous call, in thousandths of the shortest window. */
  gap: number;
  cost: number;
  /** 0: the limiter's own rules; 1, 2: a plan given with the call. */
  plan: number;
}

/** Gaps between calls: the same ms, small steps, long jumps, and the clock going back. */
const gap = fc.oneof(
  { weight: 3, arbitrary: fc.constant(0) },
  { weight: 6, arbitrary: fc.integer({ min: 1, max: 300 }) },
  { weight: 2, arbitrary: fc.integer({ min: 300, max: 3000 }) },
  { weight: 2, arbitrary: fc.integer({ min: -2000, max: -1 }) },
);

/** Random traces of every operation, with gaps (in thousandths of the shortest window) drawn from `gaps`. */
export const operations = (gaps: fc.Arbitrary<number> = gap) =>
  fc.array(
    fc.record({
      op: fc.constantFrom('consume', 'consume', 'consume', 'consume', 'peek', 'refund', 'reset', 'release', 'release', 'block', 'unblock'),
      keys: callKeys,
      gap: gaps,
      cost: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 17 })),
      plan: fc.oneof({ weight: 3, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: 2 }) }),
    }),
    { minLength: 1, maxLength: 40 },
  );

/** Traces that breach rules with blockMs again and again: one or two keys, mostly consumes of small costs. */
const blockingOperations = fc.array(
  fc.record({
    op: fc.oneof(
      { weight: 12, arbitrary: fc.constant('consume') },
      { weight: 2, arbitrary: fc.constant('peek') },
      { weight: 2, arbitrary: fc.constant('refund') },
      { weight: 1, arbitrary: fc.constant('reset') },
      { weight: 1, arbitrary: fc.constant('block') },
      { weight: 2, arbitrary: fc.constant('unblock') },
    ),
    keys: fc.record({ key: fc.constantFrom('a', 'a', 'b'), ip: fc.constant('203.0.113.9'), user: fc.constant('u1') }),
    gap,
    cost: fc.oneof(
      { weight: 6, arbitrary: fc.constant(1) },
      { weight: 3, arbitrary: fc.integer({ min: 1, max: 4 }) },
      { weight: 1, arbitrary: fc.integer({ min: 1, max: 17 }) },
    ),
    plan: fc.oneof({ weight: 3, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: 2 }) }),
  }),
  { minLength: 10, maxLength: 60 },
);

/** Where a trace's clock starts, in hours after the epoch option: windows then fall differently on the epoch's grid. */
const startHour = fc.integer({ min: 0, max: 999 });

let traces = 0;
/** Far above any round trip: a timeout would make a decision differ from the reference (onStoreError decides it). */
const callTimeoutMs = 30_000;

/** A call's keys as the limiter takes them: a string when every rule counts under `key`, else the object. */
export const keysFor = (rules: readonly RuleOptions[], keys: Step['keys']): Keys => (rules.every((r) => (r.scope ?? 'key') === 'key') ? keys.key : keys);

/**
 * The clock of a trace: what the limiter reads, how the trace moves it, and the time a call was decided
 * at (undefined when that is not known: the rest of the trace is then not checked).
 */
export interface TraceClock {
  now(): number;
  advance(ms: number): void | Promise<void>;
  decidedAt(): number | undefined;
}

/** The limiter's clock, moved by the trace. */
export function manualClock(start: number): TraceClock {
  let now = start;
  return {
    now: () => now,
    advance(ms: number) {
      now += ms;
    },
    decidedAt: () => now,
  };
}

/**
 * Runs a trace on a limiter over `store` and checks every decision against
 * the reference, field by field. Resolves false when the clock could not tell
 * when a call was decided (the trace stops there).
 */
export async function checkTrace(store: Store, [rules = [], ...plans]: RuleOptions[][], steps: Step[], clock: TraceClock): Promise<boolean> {
  const limiter: Limiter = createLimiter({ rules, store, now: clock.now, prefix: `contract${traces++}:`, timeoutMs: callTimeoutMs });
  const errors: Error[] = [];
  limiter.on('error', ({ error }) => errors.push(error));
  const compiled = [rules, ...plans].map((list) => (list ?? []).map((r, i) => compileRule(r, `rules[${i}]`)));
  const reference = referenceLimiter(compiled[0] as CompiledRule[]);
  const shortest = Math.min(...[rules, ...plans].flat().map((r) => r.windowMs));
  const leases: { keys: Keys; leaseId: string; plan: number }[] = [];
  try {
    for (const step of steps) {
      await clock.advance(Math.round((step.gap * shortest) / 1000));
      const keys = keysFor(rules, step.keys);
      const { op, cost } = step;
      const plan = step.plan < plans.length + 1 ? step.plan : 0;
      const under = reference.under(compiled[plan] as CompiledRule[]);
      const given = plan === 0 ? {} : { rules: plans[plan - 1] };
      if (op === 'consume') {
        const { leaseId, ...decision } = await limiter.consume(keys, { cost, ...given });
        const at = clock.decidedAt();
        if (at === undefined) return false;
        expect(withoutUntil(decision)).toEqual(expectedDecision(under.consume(keys, at, cost, leaseId)));
        if (leaseId !== undefined) leases.push({ keys, leaseId, plan });
      } else if (op === 'release') {
        const lease = leases.splice(cost % Math.max(1, leases.length), 1)[0];
        if (lease === undefined) continue;
        await limiter.release(lease.keys, lease.leaseId, lease.plan === 0 ? {} : { rules: plans[lease.plan - 1] });
        const at = clock.decidedAt();
        if (at === undefined) return false;
        reference.under(compiled[lease.plan] as CompiledRule[]).release(lease.keys, at, lease.leaseId);
      } else if (op === 'peek') {
        const decision = await limiter.peek(keys, given);
        const at = clock.decidedAt();
        if (at === undefined) return false;
        expect(withoutUntil(decision)).toEqual(expectedDecision(under.peek(keys, at)));
      } else if (op === 'refund') {
        await limiter.refund(keys, { cost, ...given });
        const at = clock.decidedAt();
        if (at === undefined) return false;
        under.refund(keys, at, cost);
      } else if (op === 'block' || op === 'unblock') {
        // By hand, under the limiter's own rules of a key that can hold a block (none: not concurrency, nor global).
        if (rules.every((rule) => rule.algorithm === 'concurrency' || rule.scope === 'global')) continue;
        const ms = Math.max(1, Math.round((cost * shortest) / 8));
        if (op === 'block') await limiter.block(keys, ms);
        else await limiter.unblock(keys);
        const at = clock.decidedAt();
        if (at === undefined) return false;
        if (op === 'block') reference.block(keys, at, ms);
        else reference.unblock(keys, at);
      } else {
        under.reset(keys);
        await limiter.reset(keys, given);
      }
      // A store error the limiter swallowed (a refund, a release) would show only later, if at all.
      expect(errors).toEqual([]);
    }
    return true;
  } finally {
    await limiter.close();
  }
}

/**
 * A decision without its blocks' `untilMs`: the limiter adds it from its own
 * clock (now + leftMs), which a store on its server's clock does not decide
 * on. It must be there, an integer at least `leftMs`; its exact value is the
 * limiter's (blocking.test.ts).
 */
function withoutUntil(decision: Decision): Decision {
  const strip = (blocked: BlockedInfo | undefined): BlockedInfo | undefined => {
    if (blocked === undefined) return undefined;
    const { untilMs, ...rest } = blocked;
    expect(Number.isSafeInteger(untilMs) && (untilMs as number) >= blocked.leftMs).toBe(true);
    return rest;
  };
  const rules = decision.rules.map((rule) => (rule.blocked === undefined ? rule : { ...rule, blocked: strip(rule.blocked) }));
  return decision.blocked === undefined ? { ...decision, rules } : { ...decision, rules, blocked: strip(decision.blocked) };
}

const run = promisify(execFile);

/** The worker of the multi-process test: built beside this module (dist/testing-worker.js), or its source in Floodgate's own tests (run by tsx). */
function contractWorker(): { path: string; execArgv: string[] } {
  const built = fileURLToPath(new URL('./testing-worker.js', import.meta.url));
  if (existsSync(built)) return { path: built, execArgv: [] };
  return { path: fileURLToPath(new URL('./contract-worker.ts', import.meta.url)), execArgv: ['--import', 'tsx'] };
}

/**
 * The store contract, as vitest `describe` blocks: call it at the top level
 * of a test file. `makeStore` makes a store that decides with the limiter's
 * clock (for a store with a server clock of its own: `clock: 'client'`),
 * one per trace; the stores it makes may share one database, as the traces
 * use prefixes of their own.
 *
 * @example
 * ```ts
 * import { storeContract } from '@floodgate/core/testing';
 * storeContract('MyStore', () => new MyStore({ client, clock: 'client' }));
 * ```
 */
export function storeContract(name: string, makeStore: () => Store | Promise<Store>, options: StoreContractOptions = {}): void {
  const { numRuns = 300, epoch = Date.UTC(2100, 0, 1), processes, timeoutMs = 180_000 } = options;
  const trace = async (rules: RuleOptions[][], steps: Step[], start: number) => {
    const store = await makeStore();
    try {
      await checkTrace(store, rules, steps, manualClock(start));
    } finally {
      await store.close?.();
    }
  };

  describe(`${name}: the store contract`, () => {
    it('keeps records (blocks by hand): set, get, delete, and list by prefix in the order of code points, a page at a time; or says it cannot list', async () => {
      const store = await makeStore();
      try {
        const records = store.records;
        if (records === undefined) {
          // Records are optional: without them a limiter blocks by hand, but cannot list the blocks.
          const limiter = createLimiter({ limit: 1, windowMs: 1_000, store, prefix: `contract${traces++}:` });
          await expect(limiter.blocked()).rejects.toMatchObject({ code: 'ERR_FG_OPTION', message: expect.stringContaining('records') });
          return;
        }
        const space = `contract-records${traces++}:`;
        // Names a binary collation and a JavaScript sort order differently: é (U+00E9), 𝒳 (U+1D4B3, a surrogate pair), ｚ (U+FF5A).
        const names = ['b', 'a', 'a:1', 'é', '𝒳', 'ｚ', 'a{x}', "o'k;--", 'z'].map((n) => space + n);
        for (const [i, n] of names.entries()) await records.set(n, `value ${i} of ${n}`, 600_000);
        await records.set(`${space}-elsewhere`.replace(space, `other${space}`), 'not listed', 600_000);
        expect(await records.get([names[0] as string, `${space}missing`, names[4] as string])).toEqual([
          `value 0 of ${names[0]}`,
          null,
          `value 4 of ${names[4]}`,
        ]);
        const listed: string[] = [];
        let after = '';
        for (let pages = 0; pages < 10; pages++) {
          const page = await records.list(space, after, 4);
          expect(page.records.length).toBeLessThanOrEqual(4);
          for (const [n, value] of page.records) {
            expect(value).toBe(`value ${names.indexOf(n)} of ${n}`);
            listed.push(n);
          }
          after = page.next;
          if (after === '') break;
        }
        const byCodePoint = [...names].sort((x, y) => {
          const a = [...x].map((c) => c.codePointAt(0) as number);
          const b = [...y].map((c) => c.codePointAt(0) as number);
          for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return (a[i] as number) - (b[i] as number);
          return a.length - b.length;
        });
        expect(listed).toEqual(byCodePoint);
        await records.delete([names[1] as string, names[2] as string]);
        expect(await records.get([names[1] as string])).toEqual([null]);
        expect((await records.list(space, '', 100)).records.map(([n]) => n)).toEqual(byCodePoint.filter((n) => n !== names[1] && n !== names[2]));
        await records.set(names[0] as string, 'again', 600_000);
        expect(await records.get([names[0] as string])).toEqual(['again']);
        await records.delete(names);
        expect((await records.list(space, '', 100)).records).toEqual([]);
      } finally {
        await store.close?.();
      }
    });

    it(
      'decides random multi-rule, multi-scope traces exactly like the reference, field by field',
      async () => {
        await fc.assert(
          fc.asyncProperty(rulesAndPlans([30_000, 600_000]), operations(), startHour, async (rules, steps, hour) => {
            await trace(rules, steps, epoch + hour * 3_600_000);
          }),
          { numRuns },
        );
      },
      timeoutMs,
    );

    it(
      'blocks, escalates and forgets exactly like the reference on random traces of repeated breaches (blockMs, maxBlockMs)',
      async () => {
        await fc.assert(
          fc.asyncProperty(rulesAndPlans([30_000, 600_000], true), blockingOperations, startHour, async (rules, steps, hour) => {
            await trace(rules, steps, epoch + hour * 3_600_000);
          }),
          { numRuns: Math.max(1, Math.round(numRuns / 3)) },
        );
      },
      timeoutMs,
    );

    it.each(every)('%s: a cost above the capacity is denied with retryAfterMs = Infinity and takes nothing', async (algorithm) => {
      const steps = [1, 5, 4, 1].map((cost) => ({ op: 'consume', keys: { key: 'k', ip: '', user: '' }, gap: 0, cost, plan: 0 }));
      await trace([[{ name: 'r0', algorithm, limit: 4, windowMs: 60_000 }]], steps, epoch);
    });

    // Found on Redis: a refund under a plan whose sliding window has another length deleted the other
    // grid's count once it had ended on the caller's clock; the clock then went back and found it gone.
    it('leaves a count made on another grid alone when refunding under a plan, also once it has ended', async () => {
      const rules = (windowMs: number): RuleOptions[] => [
        { name: 'r0', algorithm: 'fixed-window', limit: 1, windowMs: 30_000 },
        { name: 'r1', scope: 'global', algorithm: 'sliding-window', limit: 1, windowMs },
      ];
      const step = (op: string, key: string, gap: number, cost: number, plan: number) => ({ op, keys: { key, ip: '', user: '' }, gap, cost, plan });
      const steps = [
        step('consume', 'a', 1, 1, 1),
        step('peek', 'a', 1131, 1, 0),
        step('refund', 'a', 245, 3, 0),
        step('consume', 'a', -919, 13, 1),
        step('consume', 'b', -1746, 1, 1),
      ];
      await trace([rules(30_000), rules(30_001)], steps, epoch);
    });

    // Found on Redis: an ended state beside a block, refunded by a rule on another grid, was deleted; the clock went back to it.
    it('forgets nothing when a rule on another grid refunds a blocked key whose state has ended: the clock may go back to it', async () => {
      const plan = (limit: number, windowMs: number, burst: number, blocks: boolean): RuleOptions[] => [
        { name: 'r0', algorithm: 'sliding-window', limit, windowMs, segments: 1, blockMs: 3000, ...(blocks ? { maxBlockMs: 3000 } : {}) },
        { name: 'r1', algorithm: 'gcra', limit: 1, windowMs: 76_003, burst, ...(blocks ? { blockMs: 3000 } : {}) },
      ];
      const step = (op: string, gap: number, plan: number) => ({ op, keys: { key: 'a', ip: '203.0.113.9', user: 'u1' }, gap, cost: 1, plan });
      const steps = [
        step('consume', 5, 0),
        step('consume', 192, 0),
        step('consume', 9, 1),
        step('consume', 358, 0),
        step('refund', 1072, 1),
        step('consume', -1, 0),
      ];
      await trace([plan(2, 76_265, 2, true), plan(1, 76_003, 1, false)], steps, epoch + 847 * 3_600_000);
    });

    it('runs every algorithm in one limiter, several keys interleaved', async () => {
      const rules = every.map((algorithm, i) => ({ name: `r${i}`, algorithm, limit: 3, windowMs: 60_000 }));
      const steps = Array.from({ length: 30 }, (_, i) => ({
        op: i % 7 === 6 ? 'refund' : 'consume',
        keys: { key: i % 2 ? 'a' : 'b', ip: '', user: '' },
        gap: i % 5 === 0 ? 200 : 0,
        cost: 1 + (i % 2),
        plan: 0,
      }));
      await trace([rules], steps, epoch);
    });

    it('decides a frozen clock at any epoch (1970, 2000, 2300) as the reference does: no clock is a store error', async () => {
      for (const start of [0, Date.UTC(2000, 0, 1), Date.UTC(2300, 0, 1)]) {
        const rules = every.map((algorithm, i) => ({ name: `r${i}`, algorithm, limit: 2, windowMs: 60_000 }));
        const steps = Array.from({ length: 8 }, (_, i) => ({
          op: i === 5 ? 'peek' : 'consume',
          keys: { key: 'k', ip: '', user: '' },
          gap: 0,
          cost: 1,
          plan: 0,
        }));
        await trace([rules], steps, start);
      }
    });

    it.each(every)('%s: calls at once admit exactly the limit: 200 on one key, 200 on 10 keys, 200 sharing one scope across 20 others', async (algorithm) => {
      const store = await makeStore();
      const options = { store, now: () => epoch, timeoutMs: callTimeoutMs, onStoreError: 'deny' } as const;
      try {
        const limiter = createLimiter({ algorithm, limit: 50, windowMs: 3_600_000, prefix: `contract-burst${traces++}:`, ...options });
        const one = await Promise.all(Array.from({ length: 200 }, () => limiter.consume('hot')));
        expect(one.filter((d) => d.storeError !== undefined)).toEqual([]);
        expect(one.filter((d) => d.allowed)).toHaveLength(50);
        const ten = await Promise.all(Array.from({ length: 200 }, (_, i) => limiter.consume(`k${i % 10}`, { cost: 5 })));
        expect(ten.filter((d) => d.allowed)).toHaveLength(100);
        // Calls over different keys that share one (the ip): a store must keep that one's count exact across them.
        const scoped = createLimiter({
          rules: [
            { name: 'per-ip', scope: 'ip', algorithm, limit: 50, windowMs: 3_600_000 },
            { name: 'per-user', scope: 'user', algorithm, limit: 100, windowMs: 3_600_000 },
          ],
          prefix: `contract-scopes${traces++}:`,
          ...options,
        });
        const shared = await Promise.all(Array.from({ length: 200 }, (_, i) => scoped.consume({ ip: '203.0.113.9', user: `u${i % 20}` })));
        expect(shared.filter((d) => d.storeError !== undefined)).toEqual([]);
        expect(shared.filter((d) => d.allowed)).toHaveLength(50);
        await Promise.all([limiter.close(), scoped.close()]);
      } finally {
        await store.close?.();
      }
    });

    if (processes !== undefined) {
      const { module, execArgv = [], count = 4, calls = 3000 } = processes;
      const path = module instanceof URL ? fileURLToPath(module) : module;
      it.each(every)(
        `%s: ${count} processes x ${calls} calls, 32 in flight each, admit exactly the limit of 1000`,
        async (algorithm) => {
          const prefix = `contract-race${traces++}-${process.pid}:`;
          const worker = contractWorker();
          const nodeOptions = execArgv.includes('tsx') ? execArgv : [...worker.execArgv, ...execArgv];
          const results = await Promise.all(
            Array.from({ length: count }, () =>
              run(process.execPath, [...nodeOptions, worker.path, path, algorithm, prefix, String(calls), '32'], { timeout: timeoutMs }),
            ),
          );
          const admitted = results.map(({ stdout }) => Number(JSON.parse(stdout.trim().split('\n').pop() as string).admitted));
          expect(admitted.reduce((a, b) => a + b, 0)).toBe(1000);
        },
        timeoutMs,
      );
    }
  });
}
