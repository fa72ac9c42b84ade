import fc from 'fast-check';
import { ALGORITHMS } from '../algorithms/registry.js';
import { type AlgorithmName, algorithms, type CompiledRule, compileRule, type RuleOptions } from '../rules.js';

/** Small rules, so that the brute-force models stay fast while every branch is reached; with the options their algorithm takes. */
export function ruleOptions(algorithm: AlgorithmName, name = 'default'): fc.Arbitrary<RuleOptions> {
  const takes = ALGORITHMS[algorithm].takes;
  return fc
    .record({
      limit: fc.integer({ min: 1, max: 12 }),
      windowMs: fc.integer({ min: 1, max: 240 }),
      segments: fc.integer({ min: 1, max: 6 }),
      burst: fc.integer({ min: 1, max: 15 }),
      mode: fc.constantFrom('police' as const, 'shape' as const),
    })
    .map(({ limit, windowMs, segments, burst, mode }): RuleOptions => {
      const rule: RuleOptions = { name, algorithm, limit, windowMs };
      // A window that the segments divide.
      if (takes.includes('segments')) Object.assign(rule, { segments, windowMs: Math.max(segments, windowMs - (windowMs % segments)) });
      if (takes.includes('burst')) rule.burst = burst;
      if (takes.includes('mode')) rule.mode = mode;
      return rule;
    });
}

export function compiledRule(algorithm: AlgorithmName): fc.Arbitrary<CompiledRule> {
  return ruleOptions(algorithm).map((options) => compileRule(options, 'rule', 'default'));
}

export interface TraceStep {
  /** ms since the previous call (0: the same ms). */
  gap: number;
  cost: number;
}

/** Calls with gaps from "same ms" to "well past the window", and costs that sometimes exceed the capacity. */
export function trace(windowMs: number, capacity: number, maxLength = 40): fc.Arbitrary<TraceStep[]> {
  const gap = fc.oneof(
    { weight: 3, arbitrary: fc.constant(0) },
    { weight: 6, arbitrary: fc.integer({ min: 1, max: Math.max(1, Math.ceil(windowMs / 4)) }) },
    { weight: 2, arbitrary: fc.integer({ min: 1, max: 3 * windowMs }) },
  );
  const cost = fc.oneof({ weight: 8, arbitrary: fc.constant(1) }, { weight: 4, arbitrary: fc.integer({ min: 1, max: capacity + 2 }) });
  return fc.array(fc.record({ gap, cost }), { minLength: 1, maxLength });
}

/** A rule and a trace fitted to it. */
export function ruleAndTrace(algorithm: AlgorithmName, maxLength?: number): fc.Arbitrary<{ rule: CompiledRule; steps: TraceStep[]; start: number }> {
  return compiledRule(algorithm).chain((rule) =>
    fc.record({
      rule: fc.constant(rule),
      steps: trace(rule.windowMs, rule.capacity, maxLength),
      start: fc.oneof(fc.integer({ min: 0, max: 10_000 }), fc.integer({ min: 1_700_000_000_000, max: 1_800_000_000_000 })),
    }),
  );
}

/** Every algorithm (the registry's). */
export const algorithmNames: AlgorithmName[] = [...algorithms];
