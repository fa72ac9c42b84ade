import type { CompiledRule } from '../rules.js';
import { concurrency, type LeaseState } from './concurrency/index.js';
import { fixedWindow } from './fixed-window/index.js';
import { gcra, leakyBucket, tokenBucket } from './meter/index.js';
import { ALGORITHMS } from './registry.js';
import { type LogState, slidingLog } from './sliding-log/index.js';
import { slidingWindow } from './sliding-window/index.js';
import { createVerdict, type Verdict } from './types.js';

export { concurrency, type LeaseState, leaseCost } from './concurrency/index.js';
export { ALGORITHMS, type AlgorithmName } from './registry.js';
export { createLog, type LogState, slidingLog } from './sliding-log/index.js';
export { type AlgorithmDefinition, createVerdict, type RuleNumbers, type StateVector, type VectorAlgorithm, type Verdict } from './types.js';
export { fixedWindow, gcra, leakyBucket, slidingWindow, tokenBucket };

/** The state of one key under one rule, as the pure `step` function sees it. */
export type RuleState = number[] | LogState | LeaseState | null;

/** How many numbers of state a key keeps under a rule of a fixed-size state (0 for the others): what tells apart the states of rules of one name. */
export function stateSizeOf(rule: CompiledRule): number {
  const state = ALGORITHMS[rule.algorithm].state;
  return state.kind === 'vector' ? state.algorithm.stateSize(rule) : 0;
}

let leases = 0;

/**
 * One call of one rule as a pure function: (state, now, rule, cost) ->
 * (verdict, state). The state after is the state after admitting, or the same
 * state when the call is denied; `null` means "no state". Allocates; the
 * stores use the allocation-free functions it wraps. Used by the engine, the
 * simulator and the property tests.
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
  const kind = ALGORITHMS[rule.algorithm].state;
  if (kind.kind === 'leases') {
    const held = state as LeaseState | null;
    concurrency.decide(rule, held, now, cost, verdict);
    return { verdict, state: verdict.allowed ? concurrency.commit(rule, held, now, cost, leaseId ?? `${cost}.step${leases++}`) : state };
  }
  if (kind.kind === 'log') {
    const log = state as LogState | null;
    slidingLog.decide(rule, log, now, cost, verdict);
    if (!verdict.allowed) return { verdict, state };
    return { verdict, state: slidingLog.commit(rule, log === null ? null : cloneLog(log), now, cost) };
  }
  const vector = state as number[] | null;
  const next = new Array<number>(kind.algorithm.stateSize(rule)).fill(0);
  kind.algorithm.decide(rule, vector, 0, now, cost, verdict, next);
  return { verdict, state: verdict.allowed ? next : state };
}

/** Pure refund: the state after giving `cost` units back (`null` once nothing is left). */
export function refundStep(rule: CompiledRule, state: RuleState, now: number, cost: number): RuleState {
  if (state === null) return null;
  const kind = ALGORITHMS[rule.algorithm].state;
  // Leases are given back by release(), not by refunds; expired ones are forgotten.
  if (kind.kind === 'leases') return (state as LeaseState).expires.some((e: number) => e > now) ? state : null;
  if (kind.kind === 'log') {
    const log = cloneLog(state as LogState);
    return slidingLog.refund(rule, log, now, cost) === 0 ? null : log;
  }
  const next = new Array<number>(kind.algorithm.stateSize(rule)).fill(0);
  const kept = kind.algorithm.refund(rule, state as number[], 0, now, cost, next);
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
