import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type CompiledRule, compileRule } from '../rules.js';
import { algorithmNames, ruleAndTrace, ruleOptions, type TraceStep, trace } from '../test-support/arbitraries.js';
import { modelFor } from '../test-support/models.js';
import { type RuleState, refundStep, step } from './index.js';

const runs = { numRuns: 1000 };

/**
 * Runs a trace through one rule, call by call: the time, the cost, the
 * verdict, a copy of the state before (so a step that mutated its input
 * would show), and the state after.
 */
function* walk(rule: CompiledRule, steps: TraceStep[], start: number) {
  let state: RuleState = null;
  let now = start;
  for (const { gap, cost } of steps) {
    now += gap;
    const before = structuredClone(state);
    const { verdict, state: after } = step(rule, state, now, cost);
    state = after;
    yield { now, cost, verdict, before, after };
  }
}

/**
 * The calls a trace gets admitted, each at the time it counts at: when the
 * clock goes back behind the key's last admitted call, time stands still for
 * the key, and its promises hold on that clock.
 */
function admittedCalls(rule: CompiledRule, steps: TraceStep[], start: number) {
  const admitted: { at: number; cost: number }[] = [];
  for (const { now, cost, verdict } of walk(rule, steps, start)) {
    if (verdict.allowed) admitted.push({ at: Math.max(now, admitted[admitted.length - 1]?.at ?? now), cost });
  }
  return admitted;
}

/** A trace whose clock now and then jumps back, by up to a day. */
const jumpingBack = (arbitrary: fc.Arbitrary<{ rule: CompiledRule; steps: TraceStep[]; start: number }>) =>
  fc.tuple(arbitrary, fc.array(fc.integer({ min: -86_400_000, max: -1 }), { minLength: 1, maxLength: 20 })).map(([trace, jumps]) => ({
    ...trace,
    steps: trace.steps.map((step, i) => (i % 3 === 2 ? { ...step, gap: jumps[i % jumps.length] as number } : step)),
  }));

/** Traces on a steady clock, and on one that jumps back. */
const clocks = [
  ['on a steady clock', (a: fc.Arbitrary<{ rule: CompiledRule; steps: TraceStep[]; start: number }>) => a],
  ['when the clock jumps back', jumpingBack],
] as const;

/** Units admitted in the window (end - windowMs, end]. */
const unitsIn = (admitted: { at: number; cost: number }[], end: number, windowMs: number) =>
  admitted.filter((a) => a.at > end - windowMs && a.at <= end).reduce((sum, a) => sum + a.cost, 0);

describe.each(algorithmNames)('%s', (algorithm) => {
  it('decides every call of a random trace exactly as its definition (reference model)', () => {
    fc.assert(
      fc.property(ruleAndTrace(algorithm), ({ rule, steps, start }) => {
        const model = modelFor(rule);
        for (const { now, cost, verdict: v } of walk(rule, steps, start)) {
          const expected = model.consume(now, cost);
          expect({
            allowed: v.allowed,
            retryAfterMs: v.retryAfterMs,
            remaining: v.remaining,
            resetMs: v.resetMs,
            delayMs: v.delayMs,
          }).toEqual(expected);
        }
      }),
      runs,
    );
  });

  it('is exact about retryAfterMs: the same call passes at now + retryAfterMs and fails 1 ms earlier', () => {
    fc.assert(
      fc.property(ruleAndTrace(algorithm), ({ rule, steps, start }) => {
        for (const { now, cost, verdict, before } of walk(rule, steps, start)) {
          if (!verdict.allowed && Number.isFinite(verdict.retryAfterMs)) {
            const retry = verdict.retryAfterMs;
            expect(retry).toBeGreaterThan(0);
            expect(step(rule, before, now + retry, cost).verdict.allowed).toBe(true);
            expect(step(rule, before, now + retry - 1, cost).verdict.allowed).toBe(false);
          }
          if (!verdict.allowed && !Number.isFinite(verdict.retryAfterMs)) expect(cost).toBeGreaterThan(rule.capacity);
        }
      }),
      runs,
    );
  });

  it('is exact about resetMs: full capacity at now + resetMs, not 1 ms earlier', () => {
    fc.assert(
      fc.property(ruleAndTrace(algorithm), ({ rule, steps, start }) => {
        for (const { now, verdict, after } of walk(rule, steps, start)) {
          const reset = verdict.resetMs;
          expect(step(rule, after, now + reset, 1).verdict.remainingNow).toBe(rule.capacity);
          if (reset > 0) expect(step(rule, after, now + reset - 1, 1).verdict.remainingNow).toBeLessThan(rule.capacity);
          else expect(verdict.remaining).toBe(rule.capacity);
        }
      }),
      runs,
    );
  });

  it('changes no state on a denied call and reports what was available', () => {
    fc.assert(
      fc.property(ruleAndTrace(algorithm), ({ rule, steps, start }) => {
        for (const { cost, verdict, before, after } of walk(rule, steps, start)) {
          if (!verdict.allowed) {
            expect(after).toEqual(before);
            expect(verdict.remaining).toBe(verdict.remainingNow);
            expect(verdict.remainingNow).toBeLessThan(cost);
          } else {
            expect(verdict.remaining).toBe(verdict.remainingNow - cost);
          }
        }
      }),
      runs,
    );
  });

  it('gives refunded units back, never above capacity, and forgets state that has expired', () => {
    fc.assert(
      fc.property(ruleAndTrace(algorithm), fc.integer({ min: 1, max: 20 }), ({ rule, steps, start }, refund) => {
        const calls = [...walk(rule, steps, start)];
        const { now, after: state } = calls[calls.length - 1] as (typeof calls)[number];
        const before = step(rule, state, now, 1).verdict.remainingNow;
        const after = refundStep(rule, state, now, refund);
        const available = step(rule, after, now, 1).verdict.remainingNow;
        expect(available).toBeGreaterThanOrEqual(before);
        expect(available).toBeLessThanOrEqual(rule.capacity);
        // Long after everything expired, a refund leaves nothing behind.
        const later = now + 3 * rule.windowMs + rule.burst * rule.windowMs;
        expect(refundStep(rule, state, later, refund)).toBeNull();
      }),
      runs,
    );
  });
});

describe.each(clocks)('what the algorithms never admit, %s', (_, clock) => {
  it('fixed-window: at most limit units in any one window', () => {
    fc.assert(
      fc.property(clock(ruleAndTrace('fixed-window', 80)), ({ rule, steps, start }) => {
        const used = new Map<number, number>();
        for (const { at, cost } of admittedCalls(rule, steps, start)) {
          const window = Math.floor(at / rule.windowMs);
          used.set(window, (used.get(window) ?? 0) + cost);
        }
        for (const units of used.values()) expect(units).toBeLessThanOrEqual(rule.limit);
      }),
      runs,
    );
  });

  it('sliding-log: at most limit units in any window (t - windowMs, t]', () => {
    fc.assert(
      fc.property(clock(ruleAndTrace('sliding-log', 80)), ({ rule, steps, start }) => {
        const admitted = admittedCalls(rule, steps, start);
        for (const end of admitted) expect(unitsIn(admitted, end.at, rule.windowMs)).toBeLessThanOrEqual(rule.limit);
      }),
      runs,
    );
  });

  it('sliding-window: never more than twice the limit in any window', () => {
    fc.assert(
      fc.property(clock(ruleAndTrace('sliding-window', 80)), ({ rule, steps, start }) => {
        const admitted = admittedCalls(rule, steps, start);
        for (const end of admitted) expect(unitsIn(admitted, end.at, rule.windowMs)).toBeLessThanOrEqual(2 * rule.limit);
      }),
      runs,
    );
  });

  it.each(['token-bucket', 'leaky-bucket', 'gcra'] as const)('%s: at most burst + elapsed · limit / windowMs units between any two calls', (algorithm) => {
    fc.assert(
      fc.property(clock(ruleAndTrace(algorithm, 80)), ({ rule, steps, start }) => {
        const admitted = admittedCalls(rule, steps, start);
        for (let i = 0; i < admitted.length; i++) {
          let units = 0;
          for (let j = i; j < admitted.length; j++) {
            units += (admitted[j] as { cost: number }).cost;
            const elapsed = (admitted[j] as { at: number }).at - (admitted[i] as { at: number }).at;
            expect(units * rule.windowMs).toBeLessThanOrEqual(rule.burst * rule.windowMs + elapsed * rule.limit);
          }
        }
      }),
      runs,
    );
  });
});

describe('token-bucket, leaky-bucket (police) and gcra', () => {
  it('make identical decisions, field by field, with equal limit, windowMs and burst, also when the clock goes back', () => {
    const numbers = ruleOptions('gcra').chain((options) =>
      fc.record({
        options: fc.constant(options),
        steps: trace(options.windowMs, options.burst ?? options.limit, 60),
        start: fc.integer({ min: 0, max: 2_000_000_000_000 }),
      }),
    );
    fc.assert(
      fc.property(numbers, ({ options, steps, start }) => {
        const rules = (['token-bucket', 'leaky-bucket', 'gcra'] as const).map((algorithm) => compileRule({ ...options, algorithm }, algorithm, 'default'));
        const states: RuleState[] = [null, null, null];
        let now = start;
        for (const [i, { gap, cost }] of steps.entries()) {
          now += i % 5 === 4 ? -gap : gap; // the clock goes back now and then
          const verdicts = rules.map((rule, i) => {
            const result = step(rule, states[i] ?? null, now, cost);
            states[i] = result.state;
            return result.verdict;
          });
          expect(verdicts[1]).toEqual(verdicts[0]);
          expect(verdicts[2]).toEqual(verdicts[0]);
        }
      }),
      runs,
    );
  });
});

describe('when the clock goes back', () => {
  it.each(['token-bucket', 'leaky-bucket', 'gcra'] as const)(
    '%s stands still for the key: one call, then the clock 1 h back, admits with what was left',
    (algorithm) => {
      const rule = compileRule({ algorithm, limit: 5, windowMs: 60_000 }, 'rule', 'default');
      const now = 1_700_000_000_000;
      const first = step(rule, null, now, 1);
      const later = step(rule, first.state, now - 3_600_000, 1);
      expect(later.verdict).toMatchObject({ allowed: true, remaining: 3, retryAfterMs: 0 });
    },
  );
});

describe('leaky-bucket in shape mode', () => {
  it('serves a burst at a constant rate: each call waits one emission interval more than the last', () => {
    const rule = compileRule({ algorithm: 'leaky-bucket', mode: 'shape', limit: 5, windowMs: 1000, burst: 5 }, 'rule', 'default');
    let state: RuleState = null;
    const delays: number[] = [];
    for (let i = 0; i < 6; i++) {
      const { verdict, state: next } = step(rule, state, 0, 1);
      state = next;
      delays.push(verdict.allowed ? verdict.delayMs : -1);
    }
    expect(delays).toEqual([0, 200, 400, 600, 800, -1]);
  });

  it('never lets two served calls start closer than their emission intervals', () => {
    fc.assert(
      fc.property(
        ruleAndTrace('leaky-bucket', 60).filter(({ rule }) => rule.mode === 'shape'),
        ({ rule, steps, start }) => {
          let state: RuleState = null;
          let now = start;
          const served: { at: number; cost: number }[] = [];
          for (const { gap, cost } of steps) {
            now += gap;
            const { verdict, state: next } = step(rule, state, now, cost);
            state = next;
            if (verdict.allowed) served.push({ at: now + verdict.delayMs, cost });
          }
          for (let i = 1; i < served.length; i++) {
            const previous = served[i - 1] as { at: number; cost: number };
            const current = served[i] as { at: number; cost: number };
            expect(current.at).toBeGreaterThanOrEqual(previous.at);
            expect(current.at - previous.at).toBeGreaterThanOrEqual(Math.floor((previous.cost * rule.windowMs) / rule.limit));
          }
        },
      ),
      runs,
    );
  });
});
