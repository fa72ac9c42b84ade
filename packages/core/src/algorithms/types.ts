import type { CompiledRule } from '../rules.js';

/**
 * What one rule says about one call. Algorithms fill a caller-owned Verdict
 * instead of returning a fresh object, so the memory store decides without
 * allocating.
 */
export interface Verdict {
  /** Whether this rule admits the call. */
  allowed: boolean;
  /** 0 when allowed; else ms until the same call would be admitted; Infinity when the cost exceeds the capacity. */
  retryAfterMs: number;
  /** Shaping only: ms the admitted call waits before it is served. */
  delayMs: number;
  /** Units left once the call is admitted (equals remainingNow when denied). */
  remaining: number;
  /** ms until full capacity once the call is admitted (equals resetMsNow when denied). */
  resetMs: number;
  /** Units available before the call. */
  remainingNow: number;
  /** ms until full capacity before the call. */
  resetMsNow: number;
  /** ms the state after admitting must be kept; after that it equals no state at all. */
  ttlMs: number;
  /** ms left of the block that holds the key (see algorithms/block.ts); 0 when none does. */
  blockLeftMs: number;
  /** The length of that block, or of the last block still remembered (escalation); 0 when none. */
  blockMs: number;
  /** That block's strike: 1 for a first block, 2 for one that followed it within maxBlockMs, ...; 0 when none. */
  strike: number;
  /** Whether this call starts the block. */
  blockStarted: boolean;
}

export function createVerdict(): Verdict {
  return {
    allowed: false,
    retryAfterMs: 0,
    delayMs: 0,
    remaining: 0,
    resetMs: 0,
    remainingNow: 0,
    resetMsNow: 0,
    ttlMs: 0,
    blockLeftMs: 0,
    blockMs: 0,
    strike: 0,
    blockStarted: false,
  };
}

/** Numbers indexable like an array: a number[] or a Float64Array. */
export interface StateVector {
  [index: number]: number;
  readonly length: number;
}

/**
 * An algorithm whose state per key is a fixed number of numbers (all but
 * sliding-log). Functions are pure: they read `state[base..base+size)` (or
 * `null` for a key without state) and write their results into `out` and `next`.
 */
export interface VectorAlgorithm {
  readonly name: CompiledRule['algorithm'];
  /** How many numbers of state a key needs under this rule. */
  stateSize(rule: CompiledRule): number;
  /**
   * Decides a call of `cost` units at `now`. Fills `out`; when `out.allowed`,
   * writes the state after admitting into `next[0..size)`.
   */
  decide(rule: CompiledRule, state: StateVector | null, base: number, now: number, cost: number, out: Verdict, next: StateVector): void;
  /**
   * Gives `cost` units back. Writes the new state into `next` and returns how
   * many ms it must be kept, or 0 when the key has nothing left to keep (its
   * state has expired or is back to full capacity), or -1 when the state is
   * not one this rule reads (another rule's, under the same name): it is left
   * as it is.
   */
  refund(rule: CompiledRule, state: StateVector, base: number, now: number, cost: number, next: StateVector): number;
}

export const ceilDiv = (a: number, b: number): number => Math.ceil(a / b);
export const floorDiv = (a: number, b: number): number => Math.floor(a / b);
