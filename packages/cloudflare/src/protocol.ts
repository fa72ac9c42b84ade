/*
 * What DurableObjectStore and FloodgateDurableObject say to each other: one
 * POST per call, a JSON body, a JSON answer.
 *
 *   call    { op, now, cost, lease, rules: [[rule options, storage key], ...], undo? }
 *           now: the limiter's clock (clock: 'client'), or null: the object's own
 *   answer  consume, peek: { admitted: 0 | 1, verdicts: [per rule, see encodeVerdict] }
 *           the other operations: {}
 *
 * The object decides with the pure algorithms of @floodgate/core and answers
 * each rule's verdict; the store turns verdicts into decisions exactly as
 * MemoryStore does. Rules travel as their options and are compiled again in
 * the object (validated, cached), so the object holds no configuration of
 * its own and a hot update of the rules reaches it with the next call.
 */
import type { CompiledRule, RuleOptions } from '@floodgate/core';
import type { Verdict } from '@floodgate/core/internal';

/** The operations of an object. `undo`: a refund and a release at once (a call admitted by this object and denied by another). */
export type Operation = 'consume' | 'peek' | 'refund' | 'release' | 'undo' | 'reset';

export interface Call {
  readonly op: Operation;
  /** The clock of the call, or null: the object reads its own. */
  readonly now: number | null;
  readonly cost: number;
  /** The lease id of a call with concurrency rules, else ''. */
  readonly lease: string;
  /** Per rule of the call that this object holds: its options and the key of its state in the object's storage. */
  readonly rules: readonly (readonly [RuleOptions, string])[];
  /**
   * A consume that other objects may still deny names itself, so that its
   * undo can put back the very states it replaced (when no other call has
   * changed them since), not states refunded at a later time.
   */
  readonly undo?: string;
}

export interface Answer {
  /** consume and peek: 1 when every rule admits the call. */
  readonly admitted?: 0 | 1;
  /** consume and peek: per rule, in the order of the call (see encodeVerdict). */
  readonly verdicts?: readonly (readonly number[])[];
}

/** Numbers of a compiled rule that compiling works out from its options: they do not travel. */
const DERIVED = new Set(['capacity', 'unitsPerToken', 'unitsPerMs', 'segmentMs']);
const BUCKETS = new Set(['token-bucket', 'leaky-bucket', 'gcra']);

/**
 * A compiled rule as the options that compile to it again: every field but
 * the derived numbers, and but the defaults that compiling fills in for
 * algorithms that do not take them (burst, segments, mode). A field core
 * adds to rules travels as it is, so the object decides with it, or refuses
 * it loudly when it is an option the object's core does not know.
 */
export function ruleOptionsOf(rule: CompiledRule): RuleOptions {
  const options: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(rule)) {
    if (DERIVED.has(field) || value === undefined) continue;
    if (field === 'burst' && !BUCKETS.has(rule.algorithm)) continue;
    if (field === 'segments' && rule.algorithm !== 'sliding-window') continue;
    if (field === 'mode' && rule.algorithm !== 'leaky-bucket') continue;
    if ((field === 'blockMs' || field === 'maxBlockMs') && value === 0) continue; // 0: the rule blocks nobody
    options[field] = value;
  }
  return options as unknown as RuleOptions;
}

/** A verdict as numbers: [allowed, retryAfterMs (-1: never), delayMs, remaining, resetMs, remainingNow, resetMsNow]. */
export function encodeVerdict(v: Verdict): number[] {
  return [
    v.allowed ? 1 : 0,
    v.retryAfterMs === Number.POSITIVE_INFINITY ? -1 : v.retryAfterMs,
    v.delayMs,
    v.remaining,
    v.resetMs,
    v.remainingNow,
    v.resetMsNow,
  ];
}

/** The verdict numbers of one rule, checked, or undefined when they are not what an object answers. */
export function decodeVerdict(numbers: unknown): Omit<Verdict, 'ttlMs'> | undefined {
  if (!Array.isArray(numbers) || numbers.length !== 7) return undefined;
  if (!numbers.every((n) => typeof n === 'number' && Number.isSafeInteger(n) && n >= -1)) return undefined;
  const [allowed, retryAfterMs, delayMs, remaining, resetMs, remainingNow, resetMsNow] = numbers as number[];
  if (allowed !== 0 && allowed !== 1) return undefined;
  return {
    allowed: allowed === 1,
    retryAfterMs: retryAfterMs === -1 ? Number.POSITIVE_INFINITY : (retryAfterMs as number),
    delayMs: delayMs as number,
    remaining: remaining as number,
    resetMs: resetMs as number,
    remainingNow: remainingNow as number,
    resetMsNow: resetMsNow as number,
    // No blocks in a Durable Object yet: the store refuses rules with blockMs.
    blockLeftMs: 0,
    blockMs: 0,
    strike: 0,
    blockStarted: false,
  };
}

/** The URL a call is posted to: a Durable Object stub takes any URL; this one names the operation in logs. */
export const callUrl = (op: Operation): string => `https://floodgate.internal/${op}`;
