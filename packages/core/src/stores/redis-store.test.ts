import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { type RedisClusterServers, startCluster, useRedisServer } from '@floodgate/test-support';
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALGORITHM_FILES, assembleScripts, CONSUME_FILES, renderModule } from '../../scripts/build-lua.mjs';
import { gcra } from '../algorithms/gcra.js';
import { createVerdict } from '../algorithms/types.js';
import { createLimiter } from '../limiter.js';
import { algorithms, type CompiledRule, compileRule, type RuleOptions } from '../rules.js';
import { algorithmNames, ruleOptions } from '../test-support/arbitraries.js';
import { expectedDecision, referenceLimiter } from '../test-support/reference.js';
import { SCRIPTS } from './lua.generated.js';
import { type FlatConsume, flatConsume, RedisStore, ruleArguments, ruleHorizon, unpackCount } from './redis-store.js';
import type { RuleDecision } from './types.js';

const run = promisify(execFile);

const redisServer = useRedisServer();
let redis: Redis;
let prefixes = 0;
const fresh = (name: string) => `${name}${prefixes++}:`;
/**
 * timeoutMs for the limiters below: far above any round trip, so that a slow
 * moment of a loaded machine cannot turn a decision into a store error (the
 * default 200 ms is what the timeout tests are about).
 */
const timeoutMs = 30_000;
/** A limiter clock that stands still, for tests not about the server clock (with RedisStore clock: 'client'). */
const frozen = () => Date.UTC(2026, 0, 1, 0, 0, 30);

beforeAll(() => {
  redis = redisServer.client;
});

/** The commands (lowercase name, then arguments) a client sent Redis while `action` ran, as MONITOR saw them; not those scripts ran. */
async function commandsSent(action: () => Promise<unknown>): Promise<string[][]> {
  const monitor = await redis.duplicate().monitor(); // resolves once MONITOR is on
  const marker = `end-of-action-${prefixes++}`;
  const commands: string[][] = [];
  const markerSeen = new Promise<void>((resolve) => {
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      if (source === 'lua') return;
      if (String(args[0]).toLowerCase() === 'echo' && args[1] === marker) resolve();
      else commands.push([String(args[0]).toLowerCase(), ...args.slice(1).map(String)]);
    });
  });
  await action();
  // MONITOR reports commands in the order Redis ran them: once the marker sent after the action shows, so has the action.
  await redis.echo(marker);
  await markerSeen;
  monitor.disconnect();
  return commands;
}

describe('the shipped scripts', () => {
  it('are the assembly of lua/*.lua: one per algorithm and one for all, each with its SHA-1', async () => {
    const assembled = assembleScripts();
    expect(Object.keys(SCRIPTS).sort()).toEqual([...algorithms, 'all', ...Object.keys(CONSUME_FILES).map((name) => `consume:${name}`)].sort());
    expect(Object.keys(ALGORITHM_FILES).sort()).toEqual([...algorithms].sort());
    expect(renderModule(assembled)).toBe(renderModule(Object.fromEntries(Object.entries(SCRIPTS).map(([name, s]) => [name, s.source]))));
    for (const [name, script] of Object.entries(SCRIPTS)) {
      expect(script.source, name).toBe(assembled[name]);
      expect(createHash('sha1').update(script.source).digest('hex'), name).toBe(script.sha1);
      expect(await redis.script('LOAD', script.source), name).toBe(script.sha1);
    }
  });

  it('keep only their own algorithm and the helpers it uses, so Redis builds less on every call', () => {
    for (const algorithm of algorithms) {
      const source = SCRIPTS[algorithm].source;
      for (const other of algorithms) expect(source.includes(`algorithms['${other}']`), `${algorithm} script defines ${other}`).toBe(other === algorithm);
      expect(source, algorithm).toContain(`local SINGLE = algorithms['${algorithm}']`);
    }
    expect(SCRIPTS['fixed-window'].source).not.toContain('meter_decide');
    expect(SCRIPTS.gcra.source).toContain('meter_decide');
    expect(SCRIPTS.all.source).toContain('local SINGLE = nil');
  });

  it('run flat where a call takes a flat consume script: no Lua function is built per call', () => {
    for (const name of Object.keys(CONSUME_FILES)) {
      const source = SCRIPTS[`consume:${name}` as keyof typeof SCRIPTS].source;
      expect(source, name).not.toMatch(/\bfunction\b/);
    }
  });
});

describe('RedisStore flat consume scripts (one rule, server clock)', () => {
  /** The algorithms whose consume of one rule (of one segment, for sliding-window) runs a flat script. */
  const flatAlgorithms = ['fixed-window', 'gcra', 'sliding-window', 'token-bucket', 'leaky-bucket'] as const;
  type FlatAlgorithm = (typeof flatAlgorithms)[number];

  it('are what consume runs for one rule on the server clock, and only then', async () => {
    /** The SHA-1s of the scripts a second consume ran (the first loads its script). */
    const sent = async (store: RedisStore, rules: RuleOptions[]) => {
      const ruleSet = { prefix: fresh('which'), rules: rules.map((r, i) => compileRule(r, `rules[${i}]`, rules.length === 1 ? 'default' : undefined)) };
      await store.consume('k', ruleSet, 1, frozen());
      const commands = await commandsSent(() => store.consume('k', ruleSet, 1, frozen()));
      return commands.map(([name, sha]) => `${name} ${sha}`);
    };
    const server = new RedisStore({ client: redis });
    const client = new RedisStore({ client: redis, clock: 'client' });
    const shaOf = (name: keyof typeof SCRIPTS) => SCRIPTS[name].sha1;
    expect(await sent(server, [{ algorithm: 'fixed-window', limit: 5, windowMs: 60_000 }])).toEqual([`evalsha ${shaOf('consume:fixed-window')}`]);
    expect(await sent(server, [{ algorithm: 'gcra', limit: 5, windowMs: 60_000 }])).toEqual([`evalsha ${shaOf('consume:gcra')}`]);
    expect(await sent(client, [{ algorithm: 'gcra', limit: 5, windowMs: 60_000 }])).toEqual([`evalsha ${shaOf('gcra')}`]);
    expect(await sent(server, [{ algorithm: 'sliding-window', limit: 5, windowMs: 60_000 }])).toEqual([`evalsha ${shaOf('consume:sliding-window')}`]);
    expect(await sent(server, [{ algorithm: 'sliding-window', limit: 5, windowMs: 60_000, segments: 2 }])).toEqual([`evalsha ${shaOf('sliding-window')}`]);
    expect(await sent(server, [{ algorithm: 'token-bucket', limit: 5, windowMs: 60_000 }])).toEqual([`evalsha ${shaOf('consume:bucket')}`]);
    expect(await sent(server, [{ algorithm: 'leaky-bucket', limit: 5, windowMs: 60_000, mode: 'shape' }])).toEqual([`evalsha ${shaOf('consume:bucket')}`]);
    expect(await sent(client, [{ algorithm: 'token-bucket', limit: 5, windowMs: 60_000 }])).toEqual([`evalsha ${shaOf('token-bucket')}`]);
    expect(await sent(server, [{ algorithm: 'sliding-log', limit: 5, windowMs: 60_000 }])).toEqual([`evalsha ${shaOf('sliding-log')}`]);
    const two = [
      { name: 'a', algorithm: 'gcra', limit: 5, windowMs: 60_000 },
      { name: 'b', algorithm: 'gcra', limit: 50, windowMs: 600_000 },
    ] as const;
    expect(await sent(server, [...two])).toEqual([`evalsha ${shaOf('gcra')}`]);
  });

  /**
   * Rules whose decisions cannot change within the few ms a trace takes, but
   * for the ms counts themselves: windows of hours (a trace that runs near the
   * end of one is discarded), and bucket emission intervals of 10 min or more,
   * not always whole ms (a gcra TAT with a fraction).
   */
  const slowRule = (algorithm: FlatAlgorithm) =>
    fc
      .record({
        limit: fc.integer({ min: 1, max: 6 }),
        hours: fc.integer({ min: 1, max: 10 }),
        extraMs: fc.integer({ min: 0, max: 5 }),
        burst: fc.integer({ min: 1, max: 8 }),
        mode: fc.constantFrom('police', 'shape'),
      })
      .map(({ limit, hours, extraMs, burst, mode }) => {
        const windowMs = hours * 3_600_000 + extraMs;
        if (algorithm === 'fixed-window' || algorithm === 'sliding-window') return { algorithm, limit, windowMs };
        return algorithm === 'leaky-bucket' ? { algorithm, limit, windowMs, burst, mode } : { algorithm, limit, windowMs, burst };
      });

  it.each(flatAlgorithms)(
    '%s: decides like the reference, taking turns with the general script on one state',
    async (algorithm) => {
      await fc.assert(
        fc.asyncProperty(
          slowRule(algorithm),
          fc.array(fc.record({ op: fc.constantFrom('flat', 'flat', 'general', 'peek', 'refund'), cost: fc.integer({ min: 1, max: 4 }) }), {
            minLength: 1,
            maxLength: 25,
          }),
          async (options, steps) => {
            const start = Date.now();
            const windowAlgorithm = algorithm === 'fixed-window' || algorithm === 'sliding-window';
            // A trace that starts in the last minute of a window is discarded: the window must not end while it runs.
            fc.pre(!windowAlgorithm || options.windowMs - (start % options.windowMs) > 60_000);
            const store = new RedisStore({ client: redis });
            const rule = compileRule(options, 'rule', 'default');
            const ruleSet = { prefix: fresh(`turns-${algorithm}`), rules: [rule] };
            const reference = referenceLimiter([rule]);
            const [key] = store.keysOf('k', ruleSet) as [string];
            /**
             * The flat script tells no time, so the reference decides its calls at the ms they were sent:
             * Redis decided within the ms the call was sent and the one its answer came, which are most
             * often the same (on this machine's clock). Every field but the ms counts must match exactly,
             * and those within the sum of those spans so far (most often 0).
             */
            let drift = 0;
            const expectNear = (got: RuleDecision[], want: RuleDecision[]) => {
              const slack = drift;
              const exact = (d: RuleDecision | undefined) => ({ ...d, resetMs: 0, delayMs: 0, retryAfterMs: Number.isFinite(d?.retryAfterMs) });
              expect(got.map(exact)).toEqual(want.map(exact));
              const [g, w] = [got[0] as RuleDecision, want[0] as RuleDecision];
              expect(Math.abs(g.resetMs - w.resetMs)).toBeLessThanOrEqual(slack);
              expect(Math.abs(g.delayMs - w.delayMs)).toBeLessThanOrEqual(slack);
              if (Number.isFinite(g.retryAfterMs)) expect(Math.abs(g.retryAfterMs - w.retryAfterMs)).toBeLessThanOrEqual(slack);
            };
            for (const { op, cost } of steps) {
              const t0 = Date.now();
              if (op === 'refund') {
                const { now } = await store.evaluate('refund', 'k', ruleSet, cost, 0);
                reference.refund('k', now, cost);
              } else if (op === 'peek') {
                const { decisions, now } = await store.evaluate('peek', 'k', ruleSet, 1, 0);
                expectNear(decisions, reference.peek('k', now));
              } else if (op === 'general') {
                const { decisions, now } = await store.evaluate('consume', 'k', ruleSet, cost, 0);
                expectNear(decisions, reference.consume('k', now, cost));
              } else {
                const decisions = await store.consume('k', ruleSet, cost, 0);
                drift += Date.now() - t0;
                expectNear(decisions, reference.consume('k', t0, cost));
                // A fixed window's end is absolute: the key expires at its last ms, exactly.
                if (algorithm === 'fixed-window' && decisions[0]?.allowed) {
                  expect(await redis.pexpiretime(key)).toBe(t0 - (t0 % options.windowMs) + options.windowMs - 1);
                }
              }
            }
          },
        ),
        { numRuns: 40 },
      );
    },
    120_000,
  );

  it.each([
    // The longest wait: a window, or two for a sliding window (its previous window still weighs in).
    ['fixed-window', { algorithm: 'fixed-window', limit: 3, windowMs: 300 }, 300],
    ['gcra', { algorithm: 'gcra', limit: 3, windowMs: 300 }, 300],
    ['sliding-window', { algorithm: 'sliding-window', limit: 3, windowMs: 300 }, 600],
    ['token-bucket', { algorithm: 'token-bucket', limit: 3, windowMs: 300 }, 300],
    ['leaky-bucket', { algorithm: 'leaky-bucket', limit: 3, windowMs: 300 }, 300],
  ] as const)('%s: admits again once the time it answered has passed', async (_name, options, longest) => {
    const store = new RedisStore({ client: redis });
    const ruleSet = { prefix: fresh('again'), rules: [compileRule(options, 'rule', 'default')] };
    const remaining: number[] = [];
    const started = Date.now();
    let denied: RuleDecision | undefined;
    // Calls until one is denied: a 300 ms window can end, and a bucket refills a token each 100 ms, while they run.
    for (let i = 0; i < 20 && denied === undefined; i++) {
      const [decision] = (await store.consume('k', ruleSet, 1, 0)) as [RuleDecision];
      if (decision.allowed) remaining.push(decision.remaining);
      else denied = decision;
    }
    if (denied === undefined) return expect.fail('20 calls in a row admitted by a rule of 3 per 300 ms');
    // Calls within one 300 ms window (by this machine's clock, which Redis TIME reads too) and one bucket's 100 ms
    // saw nothing end or refill: exactly three were admitted.
    const ended = Date.now();
    if (ended - started < 100 && started % 300 < ended % 300) expect(remaining).toEqual([2, 1, 0]);
    expect(denied.retryAfterMs).toBeGreaterThan(0);
    expect(denied.retryAfterMs).toBeLessThanOrEqual(longest);
    await new Promise((resolve) => setTimeout(resolve, denied.retryAfterMs + 5));
    const [again] = await store.consume('k', ruleSet, 1, 0);
    expect(again?.allowed).toBe(true);
  });

  /** A value and an absolute expiry, as of `now`, that a key of `rule` may hold when a call comes. */
  type Seed = (now: number) => { value: string; expiresAt: number };

  /**
   * States a flat script may meet: those its algorithm writes, at any age, and
   * those left by the same rule with other numbers (a changed windowMs or
   * limit), by a sliding window of more segments, or by another algorithm
   * under the rule's name (which read as no state, as in the memory store).
   */
  function seedOf(algorithm: FlatAlgorithm, rule: CompiledRule, others = true): fc.Arbitrary<Seed | null> {
    const horizon = ruleHorizon(rule);
    const expiresIn = fc.integer({ min: 0, max: 2 * horizon + 5 });
    let seed: fc.Arbitrary<Seed>;
    switch (algorithm) {
      case 'fixed-window': {
        const W = rule.windowMs;
        // The expiry tells the window: that of now's window, or of any other (another windowMs, an earlier or later window).
        const expiry = fc.oneof(fc.constant(null), expiresIn);
        seed = fc.tuple(fc.integer({ min: 0, max: rule.limit + 3 }), expiry).map(([count, ms]) => (now) => ({
          value: String(count),
          expiresAt: ms === null ? now - (now % W) + W - 1 : now + ms,
        }));
        break;
      }
      case 'gcra': {
        const fraction = fc
          .integer({ min: 1, max: 12 })
          .chain((perMs) => fc.tuple(fc.integer({ min: 1, max: Math.max(1, perMs - 1) }), fc.constant(perMs)))
          .map(([f, perMs]) => `${f}:${perMs}`);
        const value = fc.oneof(
          fc.constant('0'),
          fraction,
          fc.integer({ min: 1, max: Math.max(1, rule.unitsPerMs - 1) }).map((f) => `${f}:${rule.unitsPerMs}`),
        );
        seed = fc.tuple(value, expiresIn).map(([v, ms]) => (now) => ({ value: v, expiresAt: now + ms }));
        break;
      }
      case 'sliding-window': {
        const G = rule.segmentMs;
        const counts = fc.array(fc.integer({ min: 0, max: rule.limit + 2 }), { minLength: 2, maxLength: 4 });
        seed = fc.tuple(fc.constantFrom(G, G, G, 2 * G, G + 1), fc.integer({ min: -3, max: 1 }), counts, expiresIn).map(([stored, age, c, ms]) => (now) => ({
          value: [stored, Math.floor(now / G) + age, ...c].join(':'),
          expiresAt: now + ms,
        }));
        break;
      }
      default: {
        const room = rule.burst * rule.unitsPerToken;
        seed = fc
          .tuple(
            fc.integer({ min: 0, max: 2 * room }),
            fc.integer({ min: -2 * horizon - 5, max: 20 }),
            fc.constantFrom(rule.unitsPerToken, rule.unitsPerToken, rule.unitsPerToken + 1, 1, 7),
            expiresIn,
          )
          .map(([x, age, unit, ms]) => (now) => ({ value: `${x}:${now + age}:${unit}`, expiresAt: now + ms }));
      }
    }
    if (others) {
      const other = fc
        .constantFrom(...flatAlgorithms.filter((a) => a !== algorithm))
        .chain((a) => seedOf(a, compileRule({ algorithm: a, limit: rule.limit, windowMs: rule.windowMs }, 'rule', 'default'), false))
        .filter((seeded): seeded is Seed => seeded !== null);
      seed = fc.oneof({ arbitrary: seed, weight: 4 }, { arbitrary: other, weight: 1 });
    }
    return fc.option(seed, { freq: 5 });
  }

  /** Rules of every size the arbitraries make (down to many tokens per ms), of one segment for sliding-window. */
  const twinRule = (algorithm: FlatAlgorithm) =>
    ruleOptions(algorithm).map((options) => compileRule(algorithm === 'sliding-window' ? { ...options, segments: 1 } : options, 'rule', 'default'));

  /**
   * One state written to two keys; then, in one MULTI, the flat script
   * consumes on one and the general script on the other. Where Redis TIME
   * reads the same ms before and after, both decided at that ms, so their
   * decisions, the values they leave and the keys' expiries must be identical.
   */
  it.each(flatAlgorithms)(
    '%s: decides, stores and expires exactly as the general script, from any state it may meet',
    async (algorithm) => {
      for (const script of Object.values(SCRIPTS)) await redis.script('LOAD', script.source);
      let compared = 0;
      await fc.assert(
        fc.asyncProperty(
          twinRule(algorithm).chain((rule) =>
            fc.record({ rule: fc.constant(rule), cost: fc.integer({ min: 1, max: rule.capacity + 2 }), seed: seedOf(algorithm, rule) }),
          ),
          async ({ rule, cost, seed }) => {
            const flat = flatConsume(rule) as FlatConsume;
            expect(flat.script.sha1).toBe(SCRIPTS[algorithm.endsWith('-bucket') ? 'consume:bucket' : (`consume:${algorithm}` as keyof typeof SCRIPTS)].sha1);
            const prefix = fresh(`twin-${algorithm}`);
            const [flatKey, generalKey] = [`${prefix}flat`, `${prefix}general`];
            if (seed !== null) {
              const { value, expiresAt } = seed(Date.now());
              for (const key of [flatKey, generalKey]) await redis.set(key, value, 'PXAT', expiresAt);
            }
            const results = (await redis
              .multi()
              .time()
              .evalsha(flat.script.sha1, 1, flatKey, String(cost), ...flat.args)
              .evalsha(SCRIPTS[algorithm].sha1, 1, generalKey, 'consume', '', String(cost), ...ruleArguments(rule))
              .get(flatKey)
              .get(generalKey)
              .pexpiretime(flatKey)
              .pexpiretime(generalKey)
              .time()
              .exec()) as [Error | null, unknown][];
            const [before, flatReply, generalReply, flatValue, generalValue, flatExpiry, generalExpiry, after] = results.map(([error, value]) => {
              if (error) throw error;
              return value;
            });
            const ms = (time: unknown) => Number((time as string[])[0]) * 1000 + Math.floor(Number((time as string[])[1]) / 1000);
            if (ms(before) !== ms(after)) return; // the ms changed between the scripts: not comparable
            compared++;
            const general = generalReply as number[];
            expect(general[5]).toBe(ms(before));
            const got = createVerdict();
            flat.verdict(flatReply, rule, cost, got);
            expect({
              allowed: got.allowed,
              remaining: got.remaining,
              resetMs: got.resetMs,
              retryAfterMs: got.retryAfterMs,
              delayMs: got.allowed ? got.delayMs : 0,
            }).toEqual({
              allowed: general[0] === 1,
              remaining: general[1],
              resetMs: general[2],
              retryAfterMs: (general[3] as number) < 0 ? Number.POSITIVE_INFINITY : general[3],
              delayMs: general[4],
            });
            expect(flatValue).toBe(generalValue);
            expect(flatExpiry).toBe(generalExpiry);
          },
        ),
        { numRuns: 400 },
      );
      // Most MULTIs run within one ms: the comparison must not have been skipped.
      expect(compared).toBeGreaterThan(200);
    },
    120_000,
  );

  it('gcra: counts calls that come within one ms (a rule of many tokens per ms keeps sub-ms state)', async () => {
    // 10 tokens per ms, room for 50: 300 calls queued in one MULTI, as many on the general script's twin key.
    const rule = compileRule({ algorithm: 'gcra', limit: 10_000, windowMs: 1_000, burst: 50 }, 'rule', 'default');
    const flat = SCRIPTS['consume:gcra'];
    const general = SCRIPTS.gcra;
    await redis.script('LOAD', flat.source);
    await redis.script('LOAD', general.source);
    const keyFlat = `${fresh('ms')}flat`;
    const keyGeneral = `${fresh('ms')}general`;
    const args = [String(rule.burst * rule.unitsPerToken), String(rule.unitsPerToken), String(rule.unitsPerMs)];
    const calls = 300;
    const multi = redis.multi().time();
    for (let i = 0; i < calls; i++) multi.evalsha(flat.sha1, 1, keyFlat, '1', ...args);
    for (let i = 0; i < calls; i++) multi.evalsha(general.sha1, 1, keyGeneral, 'consume', '', '1', String(rule.burst), ...args.slice(1), 'police');
    multi.time();
    const results = (await multi.exec()) as [Error | null, unknown][];
    const [seconds0, micros0] = (results[0] as [Error | null, unknown])[1] as [string, string];
    const [seconds1, micros1] = (results[results.length - 1] as [Error | null, unknown])[1] as [string, string];
    const elapsedMs = (Number(seconds1) - Number(seconds0)) * 1000 + (Number(micros1) - Number(micros0)) / 1000;
    const admittedFlat = results.slice(1, 1 + calls).filter(([, level]) => (level as number) + rule.unitsPerToken <= rule.burst * rule.unitsPerToken).length;
    const admittedGeneral = results.slice(1 + calls, 1 + 2 * calls).filter(([, reply]) => (reply as number[])[0] === 1).length;
    // At most the burst plus what drains while the MULTI runs (10 per ms), and never fewer than the burst.
    const most = 50 + 10 * (Math.ceil(elapsedMs) + 1);
    for (const admitted of [admittedFlat, admittedGeneral]) {
      expect(admitted).toBeGreaterThanOrEqual(50);
      expect(admitted).toBeLessThanOrEqual(Math.min(most, calls));
    }
    if (most < calls) expect(admittedFlat).toBeLessThan(calls); // the assertion that bites: sub-ms state was kept
  });

  it.each(flatAlgorithms)('%s: reads integer replies a client hands over as strings (ioredis stringNumbers)', async (algorithm) => {
    const strings = redis.duplicate({ stringNumbers: true });
    try {
      const store = new RedisStore({ client: strings });
      const ruleSet = { prefix: fresh('strings'), rules: [compileRule({ algorithm, limit: 5, windowMs: 3_600_000 }, 'rule', 'default')] };
      expect(await strings.eval('return 7', 0)).toBe('7'); // the client does hand over strings
      for (const remaining of [3, 1]) expect((await store.consume('k', ruleSet, 2, 0))[0]).toMatchObject({ allowed: true, remaining });
      expect((await store.consume('k', ruleSet, 2, 0))[0]).toMatchObject({ allowed: false, remaining: 1 });
    } finally {
      strings.disconnect();
    }
  });

  it.each(flatAlgorithms)('%s: a key of another type, or a foreign value, reads as no state in either script', async (algorithm) => {
    const store = new RedisStore({ client: redis });
    const ruleSet = { prefix: fresh('foreign'), rules: [compileRule({ algorithm, limit: 5, windowMs: 3_600_000 }, 'rule', 'default')] };
    const [key] = store.keysOf('k', ruleSet) as [string];
    // As many numbers as the algorithm's state holds, and one field that is not a number.
    const fields = { 'fixed-window': 1, gcra: 2, 'sliding-window': 4, 'token-bucket': 3, 'leaky-bucket': 3 }[algorithm];
    const values = ['not-a-state', `${Array(fields).fill('7').join(':')}:x`, `x:${Array(fields).fill('7').join(':')}`];
    for (const value of [null, ...values]) {
      for (const path of ['flat', 'general'] as const) {
        await redis.del(key);
        if (value === null) await redis.zadd(key, 1, 'member');
        else await redis.set(key, value, 'PX', 3_600_000);
        const [decision] = path === 'flat' ? await store.consume('k', ruleSet, 2, 0) : (await store.evaluate('consume', 'k', ruleSet, 2, 0)).decisions;
        expect(decision, `${path} on ${value ?? 'a sorted set'}`).toMatchObject({ allowed: true, remaining: 3 });
      }
    }
  });

  it('fixed-window: reads back every count and ms the script packs into one integer', () => {
    fc.assert(
      fc.property(
        fc
          .integer({ min: 1, max: Number.MAX_SAFE_INTEGER - 1 })
          .chain((windowMs) =>
            fc.tuple(
              fc.constant(windowMs),
              fc.integer({ min: 0, max: Math.floor((Number.MAX_SAFE_INTEGER - windowMs) / (windowMs + 1)) }),
              fc.integer({ min: 0, max: windowMs }),
            ),
          ),
        ([windowMs, count, ms]) => {
          const packed = count * (windowMs + 1) + ms;
          fc.pre(packed <= Number.MAX_SAFE_INTEGER);
          expect(unpackCount(packed, windowMs)).toBe(count);
          expect(packed - unpackCount(packed, windowMs) * (windowMs + 1)).toBe(ms);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('fixed-window: counts too large to pack come back as two numbers', async () => {
    const store = new RedisStore({ client: redis });
    const limit = 2 ** 50;
    const ruleSet = { prefix: fresh('big'), rules: [compileRule({ algorithm: 'fixed-window', limit, windowMs: 365 * 86_400_000 }, 'rule', 'default')] };
    const cost = 2 ** 45;
    for (let i = 1; i <= 3; i++) {
      expect((await store.consume('k', ruleSet, cost, 0))[0]).toMatchObject({ allowed: true, remaining: limit - i * cost });
    }
  });

  it('gcra: a rule whose rate changed reads a stored fraction of a ms as the general script does', async () => {
    const store = new RedisStore({ client: redis });
    // 2 per ms before, 7 after: the stored 1/2 ms is 4/7 ms now (rounded up), which moves resetMs by 1 ms.
    const before = compileRule({ algorithm: 'gcra', limit: 2, windowMs: 3_600_001 }, 'rule', 'default');
    const after = compileRule({ algorithm: 'gcra', limit: 7, windowMs: 3_600_007 }, 'rule', 'default');
    // The flat script tells no time: an attempt counts when the call is sent and answered in one ms.
    for (let attempt = 0; attempt < 50; attempt++) {
      const prefix = fresh('rerate');
      const { now } = await store.evaluate('consume', 'k', { prefix, rules: [before] }, 1, 0);
      const tat = [0, 0, 0];
      gcra.decide(before, null, 0, now, 1, createVerdict(), tat);
      expect(tat[1]).toBeGreaterThan(0);
      const t0 = Date.now();
      const [got] = await store.consume('k', { prefix, rules: [after] }, 1, 0);
      if (Date.now() !== t0) continue;
      const want = createVerdict();
      gcra.decide(after, tat, 0, t0, 1, want, [0, 0, 0]);
      expect(got).toMatchObject({ allowed: want.allowed, remaining: want.remaining, resetMs: want.resetMs });
      return;
    }
    expect.fail('no attempt was sent and answered within one ms');
  });

  /**
   * One call of `cost` under `before`, then the same key under `after`: the general script's peek and the flat
   * script's consume, which must agree but for the ms between them (`elapsed`).
   */
  async function carriedOver(before: RuleOptions, cost: number, after: RuleOptions) {
    const store = new RedisStore({ client: redis });
    const prefix = fresh('carried');
    const ruleSet = (options: RuleOptions) => ({ prefix, rules: [compileRule(options, 'rule', 'default')] });
    expect((await store.consume('k', ruleSet(before), cost, 0))[0]?.allowed).toBe(true);
    const t0 = Date.now();
    const [peeked] = (await store.evaluate('peek', 'k', ruleSet(after), 1, 0)).decisions as [RuleDecision];
    const [consumed] = (await store.consume('k', ruleSet(after), 1, 0)) as [RuleDecision];
    const elapsed = Date.now() - t0 + 1;
    for (const decision of [peeked, consumed]) expect(decision).toMatchObject({ allowed: false, remaining: 0 });
    expect(Math.abs(peeked.retryAfterMs - consumed.retryAfterMs)).toBeLessThanOrEqual(elapsed);
    expect(Math.abs(peeked.resetMs - consumed.resetMs)).toBeLessThanOrEqual(elapsed);
    return [peeked, consumed];
  }

  it('leaky-bucket: a level carried over to a much slower rule is at most a full bucket, in both scripts', async () => {
    // A full bucket of 10^8 tokens, then a rule of 1 token per 10^8 ms: the level rescaled is 10^16 units, past 2^53.
    const decisions = await carriedOver({ algorithm: 'leaky-bucket', limit: 100_000_000, windowMs: 100_000_000 }, 100_000_000, {
      algorithm: 'leaky-bucket',
      limit: 1,
      windowMs: 100_000_000,
    });
    for (const decision of decisions) {
      // A full bucket of the new rule: the call fits once one token has drained, 10^8 ms (less what drained already).
      expect(decision.retryAfterMs).toBeLessThanOrEqual(100_000_000);
      expect(decision.retryAfterMs).toBeGreaterThanOrEqual(100_000_000 - 1_000);
    }
  });

  it('gcra: a TAT that stands for a level past 2^53 under a faster rule decides as in the general script', async () => {
    // One call of 1 per 10^8 ms leaves a TAT 10^8 ms ahead; 100000001 units per ms make that 10^16 units.
    const decisions = await carriedOver({ algorithm: 'gcra', limit: 1, windowMs: 100_000_000 }, 1, {
      algorithm: 'gcra',
      limit: 100_000_001,
      windowMs: 1_000_000,
    });
    for (const decision of decisions) expect(decision.retryAfterMs).toBeGreaterThan(98_000_000);
  });

  it('fixed-window: a rule whose windowMs changed keeps the count as the general script does', async () => {
    const store = new RedisStore({ client: redis });
    const prefix = fresh('resize');
    const hour = { prefix, rules: [compileRule({ algorithm: 'fixed-window', limit: 10, windowMs: 3_600_000 }, 'rule', 'default')] };
    const minute = { prefix, rules: [compileRule({ algorithm: 'fixed-window', limit: 10, windowMs: 60_000 }, 'rule', 'default')] };
    for (const [from, to] of [
      [hour, minute],
      [minute, hour],
    ] as const) {
      await store.reset('k', from);
      await store.consume('k', from, 4, 0);
      // The general script's view, then the flat script's call: the same count, one call apart.
      const [peeked] = (await store.evaluate('peek', 'k', to, 1, 0)).decisions;
      const [consumed] = await store.consume('k', to, 1, 0);
      expect(consumed?.remaining).toBe((peeked?.remaining ?? 0) - 1);
    }
  });
});

describe('RedisStore', () => {
  it('decides all rules of a call with one EVALSHA', async () => {
    const limiter = createLimiter({
      store: new RedisStore({ client: redis }),
      prefix: fresh('one'),
      rules: algorithmNames.map((algorithm, i) => ({ name: `r${i}`, algorithm, limit: 5, windowMs: 60_000 })),
      timeoutMs,
    });
    await limiter.consume('warm-up'); // loads the script
    const commands = await commandsSent(() => limiter.consume('k'));
    expect(commands.map(([name]) => name)).toEqual(['evalsha']);
  });

  it('keeps the state of a denied multi-rule call byte-identical (DUMP)', async () => {
    const prefix = fresh('dump');
    const limiter = createLimiter({
      // The limiter's clock stands still: the 'tight' window cannot end between the 3rd and the 4th call.
      store: new RedisStore({ client: redis, clock: 'client' }),
      now: frozen,
      timeoutMs,
      prefix,
      rules: [
        { name: 'loose', algorithm: 'sliding-window', limit: 100, windowMs: 60_000, segments: 6 },
        { name: 'bucket', algorithm: 'token-bucket', limit: 10, windowMs: 60_000 },
        { name: 'log', algorithm: 'sliding-log', limit: 50, windowMs: 60_000 },
        { name: 'tight', algorithm: 'fixed-window', limit: 3, windowMs: 60_000 },
        { name: 'cell', algorithm: 'gcra', limit: 20, windowMs: 60_000 },
      ],
    });
    for (let i = 0; i < 3; i++) expect((await limiter.consume('k')).allowed).toBe(true);
    const keys = (limiter.store as RedisStore).keysOf('k', { prefix, rules: limiter.rules });
    const before = await Promise.all(keys.map((key) => redis.dumpBuffer(key)));
    expect(before.every((dump) => dump !== null)).toBe(true);
    const denied = await limiter.consume('k');
    expect(denied).toMatchObject({ allowed: false, rule: 'tight' });
    const after = await Promise.all(keys.map((key) => redis.dumpBuffer(key)));
    expect(after.map((b) => b?.toString('hex'))).toEqual(before.map((b) => b?.toString('hex')));
  });

  it('puts a TTL on every key, never longer than the state needs', async () => {
    for (const algorithm of algorithms) {
      const prefix = fresh('ttl');
      // On the server clock a fixed window ends at a multiple of windowMs: a 30 s one may end
      // a few ms after the call, and its key with it. One of 10^12 ms ends in 2033.
      const windowMs = algorithm === 'fixed-window' ? 1_000_000_000_000 : 30_000;
      const limiter = createLimiter({ algorithm, limit: 5, windowMs, store: new RedisStore({ client: redis }), prefix, timeoutMs });
      const decision = await limiter.consume('k', { cost: 2 });
      const [key] = (limiter.store as RedisStore).keysOf('k', { prefix, rules: limiter.rules });
      const ttl = await redis.pttl(key as string);
      expect(ttl, algorithm).toBeGreaterThan(0);
      expect(ttl, algorithm).toBeLessThanOrEqual(decision.resetMs);
      expect(ttl, algorithm).toBeLessThanOrEqual(ruleHorizon(limiter.rules[0] as CompiledRule));
    }
  });

  it('gives every key of a multi-rule limiter the lifetime its rule needs, worked out by hand', async () => {
    // On the client clock a key lives for its rule's whole horizon (Redis cannot know that clock):
    // the longest the state can matter, from each rule's definition.
    const rules: RuleOptions[] = [
      { name: 'fixed', algorithm: 'fixed-window', limit: 5, windowMs: 60_000 }, // one window: 60 s
      { name: 'sliding', algorithm: 'sliding-window', limit: 5, windowMs: 60_000, segments: 4 }, // a window and a segment: 75 s
      { name: 'log', algorithm: 'sliding-log', limit: 5, windowMs: 60_000 }, // one window: 60 s
      { name: 'tokens', algorithm: 'token-bucket', limit: 6, windowMs: 60_000, burst: 3 }, // 3 tokens at 6 a minute: 30 s
      { name: 'leaky', algorithm: 'leaky-bucket', limit: 2, windowMs: 60_000, burst: 4 }, // 4 units at 2 a minute: 120 s
      { name: 'cell', algorithm: 'gcra', limit: 10, windowMs: 60_000, burst: 5 }, // 5 cells at 10 a minute: 30 s
    ];
    const needs = [60_000, 75_000, 60_000, 30_000, 120_000, 30_000];
    const prefix = fresh('horizon');
    const store = new RedisStore({ client: redis, clock: 'client' });
    const limiter = createLimiter({ rules, store, prefix, now: () => Date.UTC(2026, 0, 1, 0, 0, 30), timeoutMs });
    expect((await limiter.consume('k')).allowed).toBe(true);
    const keys = store.keysOf('k', { prefix, rules: limiter.rules });
    const ttls = await Promise.all(keys.map((key) => redis.pttl(key)));
    ttls.forEach((ttl, i) => {
      expect(ttl, rules[i]?.name).toBeGreaterThan((needs[i] as number) - 5_000);
      expect(ttl, rules[i]?.name).toBeLessThanOrEqual(needs[i] as number);
    });
  });

  it('decides with Redis TIME: limiters with wildly wrong clocks share one state', async () => {
    const prefix = fresh('clock');
    const store = new RedisStore({ client: redis });
    const rules: RuleOptions[] = [
      { name: 'minute', algorithm: 'fixed-window', limit: 4, windowMs: 60_000 },
      { name: 'cell', algorithm: 'gcra', limit: 4, windowMs: 60_000 },
    ];
    // The minute may end during the test: the cell (one call per 15 s) still denies the 5th call.
    const past = createLimiter({ rules, store, prefix, now: () => 0, timeoutMs });
    const future = createLimiter({ rules, store, prefix, now: () => Date.now() + 10 * 365 * 86_400_000, timeoutMs });
    await past.consume('k');
    await future.consume('k');
    await past.consume('k');
    expect((await future.peek('k')).remaining).toBe(1);
    await future.consume('k');
    const denied = await past.consume('k');
    expect(denied.allowed).toBe(false);
    expect(denied.retryAfterMs).toBeGreaterThan(0);
    expect(denied.retryAfterMs).toBeLessThanOrEqual(60_000);
  });

  it('recovers from SCRIPT FLUSH (NOSCRIPT -> EVAL) without losing state', async () => {
    const limiter = createLimiter({
      algorithm: 'sliding-log',
      limit: 2,
      windowMs: 60_000,
      store: new RedisStore({ client: redis }),
      prefix: fresh('flush'),
      timeoutMs,
    });
    expect((await limiter.consume('k')).allowed).toBe(true);
    await redis.script('FLUSH');
    expect((await limiter.consume('k')).allowed).toBe(true);
    await redis.script('FLUSH');
    expect((await limiter.consume('k')).allowed).toBe(false);
    expect((await redis.script('EXISTS', SCRIPTS['sliding-log'].sha1)) as number[]).toEqual([1]);
  });

  it('starts over after FLUSHALL without an error (the state is gone, the script is still loaded)', async () => {
    const limiter = createLimiter({
      algorithm: 'gcra',
      limit: 1,
      windowMs: 60_000,
      store: new RedisStore({ client: redis }),
      prefix: fresh('flushall'),
      timeoutMs,
    });
    expect((await limiter.consume('k')).allowed).toBe(true);
    expect((await limiter.consume('k')).allowed).toBe(false);
    await redis.flushall();
    const after = await limiter.consume('k');
    expect(after.storeError).toBeUndefined();
    expect(after.allowed).toBe(true);
  });

  it('keeps keys with braces, colons and the prefix apart (no hash-tag or prefix injection)', async () => {
    const prefix = fresh('inject');
    const store = new RedisStore({ client: redis, clock: 'client' });
    const limiter = createLimiter({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000, store, prefix, now: frozen, timeoutMs });
    const keys = ['a', 'a}', '{a}', 'a}:default', `}${prefix}{a`, '}', '{}', '%7D', 'a%'];
    for (const key of keys) expect((await limiter.consume(key)).allowed, key).toBe(true);
    for (const key of keys) expect((await limiter.consume(key)).allowed, key).toBe(false);
    expect(await redis.keys(`${prefix}*`)).toHaveLength(keys.length);
  });

  it('never loses or double counts sliding-log entries admitted in the same ms', async () => {
    const store = new RedisStore({ client: redis, clock: 'client' });
    const limiter = createLimiter({ algorithm: 'sliding-log', limit: 50, windowMs: 60_000, store, prefix: fresh('same-ms'), now: () => 1_000_000, timeoutMs });
    const decisions = await Promise.all(Array.from({ length: 60 }, (_, i) => limiter.consume('k', { cost: 1 + (i % 2) })));
    const admitted = decisions.filter((d) => d.allowed);
    const units = decisions.reduce((sum, d, i) => sum + (d.allowed ? 1 + (i % 2) : 0), 0);
    expect(units).toBeLessThanOrEqual(50);
    expect(admitted.length).toBeGreaterThan(0);
    expect((await limiter.peek('k')).remaining).toBe(50 - units);
    await limiter.refund('k', { cost: 3 });
    expect((await limiter.peek('k')).remaining).toBe(53 - units);
    const filled = await limiter.consume('k', { cost: 53 - units });
    expect(filled.allowed).toBe(true);
    expect((await limiter.peek('k')).remaining).toBe(0);
  });

  it('answers a clear error for a client it cannot drive, and for unknown options', () => {
    expect(() => new RedisStore({ client: {} as never })).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
    expect(() => new RedisStore({ client: redis, clock: 'local' as never })).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
    expect(() => new RedisStore({ client: redis, keyPrefix: 'x' } as never)).toThrow(expect.objectContaining({ code: 'ERR_FG_UNKNOWN_OPTION' }));
  });
});

describe('RedisStore with the server clock', () => {
  /** Small windows so that they roll over while the trace runs on real time. */
  const smallRule = (algorithm: (typeof algorithmNames)[number], name: string) =>
    fc
      .record({ limit: fc.integer({ min: 1, max: 6 }), windowMs: fc.integer({ min: 4, max: 60 }), burst: fc.integer({ min: 1, max: 8 }) })
      .map(({ limit, windowMs, burst }) => {
        const base = { name, algorithm, limit, windowMs };
        return algorithm === 'token-bucket' || algorithm === 'gcra' || algorithm === 'leaky-bucket' ? { ...base, burst } : base;
      });

  it('decides like the reference at the times Redis reports (expiry-encoded state included)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom(...algorithmNames), { minLength: 1, maxLength: 3 }).chain((names) => fc.tuple(...names.map((a, i) => smallRule(a, `r${i}`)))),
        fc.array(
          fc.record({
            pause: fc.oneof(fc.constant(0), fc.constant(0), fc.integer({ min: 1, max: 25 })),
            cost: fc.integer({ min: 1, max: 4 }),
            refund: fc.boolean(),
          }),
          {
            minLength: 1,
            maxLength: 25,
          },
        ),
        async (rules, steps) => {
          const store = new RedisStore({ client: redis });
          const compiled = rules.map((r, i) => compileRule(r, `rules[${i}]`));
          const ruleSet = { prefix: fresh('server'), rules: compiled };
          const reference = referenceLimiter(compiled);
          let last = 0;
          let leases = 0;
          for (const { pause, cost, refund } of steps) {
            if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause));
            if (refund) {
              const { now } = await store.evaluate('refund', 'k', ruleSet, cost, 0);
              reference.refund('k', now, cost);
              continue;
            }
            const leaseId = `${cost}.lease${leases++}`;
            const { decisions, now } = await store.evaluate('consume', 'k', ruleSet, cost, 0, leaseId);
            expect(now).toBeGreaterThanOrEqual(last);
            last = now;
            expect(expectedDecision(decisions)).toEqual(expectedDecision(reference.consume('k', now, cost, leaseId)));
          }
        },
      ),
      { numRuns: 40 },
    );
  }, 120_000); // real pauses and round trips: a loaded machine runs it several times slower than vitest's default 5 s allows for
});

describe('RedisStore under concurrency', () => {
  const worker = fileURLToPath(new URL('../test-support/consume-worker.ts', import.meta.url));

  it.each(['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket', 'leaky-bucket', 'gcra'] as const)(
    '%s: 4 processes x 3000 calls, 32 in flight each, admit exactly the limit of 1000',
    async (algorithm) => {
      const prefix = fresh(`race-${algorithm}`);
      const results = await Promise.all(
        Array.from({ length: 4 }, () =>
          run(process.execPath, ['--import', 'tsx', worker, String(redisServer.server.port), algorithm, prefix, '3000', '32'], {
            timeout: 60_000,
            cwd: fileURLToPath(new URL('../..', import.meta.url)),
          }),
        ),
      );
      const admitted = results.map(({ stdout }) => Number(JSON.parse(stdout.trim().split('\n').pop() as string).admitted));
      expect(admitted.reduce((a, b) => a + b, 0)).toBe(1000);
    },
    120_000,
  );
});

describe('RedisStore on a 3-master Redis Cluster', () => {
  let cluster: RedisClusterServers;

  beforeAll(async () => {
    cluster = await startCluster();
  }, 60_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  it('runs multi-rule limiters over keys in every slot, without CROSSSLOT, all-or-nothing', async () => {
    const client = cluster.client();
    const limiter = createLimiter({
      // The limiter's clock stands still: 'per-second' denies the 4th call however long the calls take.
      store: new RedisStore({ client, clock: 'client' }),
      now: frozen,
      timeoutMs,
      prefix: 'cluster:',
      rules: [
        { name: 'per-second', algorithm: 'gcra', limit: 3, windowMs: 1000, burst: 3 },
        { name: 'per-minute', algorithm: 'fixed-window', limit: 5, windowMs: 60_000 },
        { name: 'log', algorithm: 'sliding-log', limit: 10, windowMs: 60_000 },
        { name: 'window', algorithm: 'sliding-window', limit: 10, windowMs: 60_000, segments: 4 },
      ],
    });
    const users = Array.from({ length: 30 }, (_, i) => `user:${i}`).concat(['}', '{}', 'x{y}z']);
    for (const user of users) {
      for (let i = 0; i < 3; i++) expect((await limiter.consume(user)).allowed, user).toBe(true);
      const keys = (limiter.store as RedisStore).keysOf(user, { prefix: 'cluster:', rules: limiter.rules });
      const before = await Promise.all(keys.map((key) => client.dumpBuffer(key)));
      const denied = await limiter.consume(user);
      expect(denied).toMatchObject({ allowed: false, rule: 'per-second' });
      const after = await Promise.all(keys.map((key) => client.dumpBuffer(key)));
      expect(after.map((b) => b?.toString('hex'))).toEqual(before.map((b) => b?.toString('hex')));
    }
    // The users' keys are spread over all three masters.
    const slots = new Set(users.map((user) => clusterKeySlot(`cluster:{${user.replace(/[{}]/g, (c) => (c === '{' ? '%7B' : '%7D'))}}:log`)));
    expect(slots.size).toBeGreaterThan(10);
    const perNode = await Promise.all(cluster.nodes.map((node) => node.client().dbsize()));
    expect(perNode.every((n) => n > 0)).toBe(true);
  });
});

/** CRC16 (XMODEM) slot of a key, with Redis's hash-tag rule. */
function clusterKeySlot(key: string): number {
  const open = key.indexOf('{');
  let tagged = key;
  if (open >= 0) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) tagged = key.slice(open + 1, close);
  }
  let crc = 0;
  for (const byte of Buffer.from(tagged)) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % 16384;
}
