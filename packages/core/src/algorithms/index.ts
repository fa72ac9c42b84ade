import type { AlgorithmName, CompiledRule } from '../rules.js';
import { concurrency, type LeaseState } from './concurrency.js';
import { fixedWindow } from './fixed-window.js';
import { gcra, leakyBucket, tokenBucket } from './meter.js';
import { type LogState, slidingLog } from './sliding-log.js';
import { slidingWindow } from './sliding-window.js';
import { createVerdict, type VectorAlgorithm, type Verdict } from './types.js';

export { concurrency, type LeaseState, leaseCost } from './concurrency.js';
export { createLog, type LogState, slidingLog } from './sliding-log.js';
export { createVerdict, type StateVector, type VectorAlgorithm, type Verdict } from './types.js';
export { fixedWindow, gcra, leakyBucket, slidingWindow, tokenBucket };

/** The algorithms whose state is a fixed-size vector, by name (all but sliding-log and concurrency). */
export const vectorAlgorithms: Readonly<Record<Exclude<AlgorithmName, 'sliding-log' | 'concurrency'>, VectorAlgorithm>> = {
  'fixed-window': fixedWindow,
  'sliding-window': slidingWindow,
  'token-bucket': tokenBucket,
  'leaky-bucket': leakyBucket,
  gcra,
};

/** The state of one key under one rule, as the pure `step` function sees it. */
export type RuleState = number[] | LogState | LeaseState | null;

let leases = 0;

/**
 * One call of one rule as a pure function: (state, now, rule, cost) ->
 * (verdict, state). The state after is the state after admitting, or the same
 * state when the call is denied; `null` means "no state". Allocates; the
 * stores use the allocation-free functions it wraps. Used by the simulator and
 * the property tests.
 *
 * @example
 * ```ts
 * let state: RuleState = null;
 * const first = step(rule, state, 0, 1); // { verdict: { allowed: true, ... }, state: [...] }
 * state = first.state;
 * ```
 */
export function step(rule: CompiledRule, state: RuleState, now: number, cost: number, leaseId?: string): { verdict: Verdict; state: RuleState } {
  const verdict = createVerdict();
  if (rule.algorithm === 'concurrency') {
    const held = state as LeaseState | null;
    concurrency.decide(rule, held, now, cost, verdict);
    return { verdict, state: verdict.allowed ? concurrency.commit(rule, held, now, cost, leaseId ?? `${cost}.step${leases++}`) : state };
  }
  if (rule.algorithm === 'sliding-log') {
    const log = state as LogState | null;
    slidingLog.decide(rule, log, now, cost, verdict);
    if (!verdict.allowed) return { verdict, state };
    return { verdict, state: slidingLog.commit(rule, log === null ? null : cloneLog(log), now, cost) };
  }
  const algorithm = vectorAlgorithms[rule.algorithm];
  const vector = state as number[] | null;
  const next = new Array<number>(algorithm.stateSize(rule)).fill(0);
  algorithm.decide(rule, vector, 0, now, cost, verdict, next);
  return { verdict, state: verdict.allowed ? next : state };
}

/** Pure refund: the state after giving `cost` units back (`null` once nothing is left). */
export function refundStep(rule: CompiledRule, state: RuleState, now: number, cost: number): RuleState {
  if (state === null) return null;
  // Leases are given back by release(), not by refunds; expired ones are forgotten.
  if (rule.algorithm === 'concurrency') return (state as LeaseState).expires.some((e) => e > now) ? state : null;
  if (rule.algorithm === 'sliding-log') {
    const log = cloneLog(state as LogState);
    return slidingLog.refund(rule, log, now, cost) === 0 ? null : log;
  }
  const algorithm = vectorAlgorithms[rule.algorithm];
  const next = new Array<number>(algorithm.stateSize(rule)).fill(0);
  const kept = algorithm.refund(rule, state as number[], 0, now, cost, next);
  return kept === 0 ? null : kept < 0 ? state : next;
}

/** Pure release of a concurrency lease: the state after (`null` once no lease is left). */
export function releaseStep(state: RuleState, leaseId: string, now: number): RuleState {
  if (state === null) return null;
  const held = structuredClone(state as LeaseState);
  return concurrency.release(held, leaseId, now) === 0 ? null : held;
}

function cloneLog(log: LogState): LogState {
  return { times: log.times.slice(), counts: log.counts.slice(), head: log.head, total: log.total };
}
