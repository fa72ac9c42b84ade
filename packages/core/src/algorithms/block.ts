import type { CompiledRule } from '../rules.js';
import type { Verdict } from './types.js';

/*
 * Blocking after a breach (rule options `blockMs`, `maxBlockMs`). When a
 * rule's own numbers deny a consume, the key is blocked under that rule for
 * `blockMs`: every call is denied until the block ends, and none extends it.
 * Escalation: a block that starts while the previous one is remembered (less
 * than `maxBlockMs` after it ended) is twice as long as that one, at least
 * `blockMs` and at most `maxBlockMs`; its strike is the previous one's + 1.
 *
 * A block is part of the rule's state for the key, beside the algorithm's
 * (memory: the rule's table; Redis: the rule's own key), so any rule of that
 * name and algorithm honours it, whatever its own options: a plan without
 * blockMs does not lift a block another plan started. The same functions
 * decide on the memory store and, from the numbers the Redis library reads,
 * on Redis (lua/prelude.lua mirrors blockLeft and the start below).
 */

/** A block of one key under one rule; times are absolute, on the clock that decides. */
export interface Block {
  /** The first ms the block no longer holds. */
  until: number;
  /** Its length: ms from the denial that started it to `until`. */
  length: number;
  /** 1 for a first block, then +1 for each block that starts while the previous one is remembered; 0 for a block by hand (limiter.block). */
  strike: number;
  /** The first ms the block is forgotten: `until` + the maxBlockMs of the rule that started it (`until` without escalation). */
  forgetAt: number;
}

/**
 * ms left of a block at `now` (0 once it has ended). A clock that went back
 * stands still at the block's start: a block never holds longer than its
 * length, as windows and buckets never count from before they were written.
 */
export function blockLeft(block: Block, now: number): number {
  if (now >= block.until) return 0;
  return Math.min(block.until - now, block.length);
}

/** Denies for `leftMs` a call the rule's numbers decided in `v` (or for longer, when the rule itself needs longer). */
function hold(v: Verdict, leftMs: number): void {
  const ruleNeeds = v.allowed ? 0 : v.retryAfterMs;
  v.allowed = false;
  v.retryAfterMs = Math.max(ruleNeeds, leftMs);
  v.delayMs = 0;
  // Nothing can be taken while the key is blocked; it is back to full capacity once both the block and the state are over.
  v.remainingNow = 0;
  v.remaining = 0;
  v.resetMsNow = Math.max(v.resetMsNow, leftMs);
  v.resetMs = v.resetMsNow;
  v.ttlMs = 0;
}

/**
 * Completes a verdict the rule's numbers made with the key's block:
 * `leftMs` (> 0: the block holds, and denies), and the length and strike of
 * the block remembered (0 when none is). Every store calls it after the
 * algorithm decided.
 */
export function applyBlock(v: Verdict, leftMs: number, blockMs: number, strike: number): void {
  v.blockLeftMs = leftMs;
  v.blockMs = blockMs;
  v.strike = strike;
  v.blockStarted = false;
  if (leftMs > 0) hold(v, leftMs);
}

/**
 * Whether a denied consume starts a block under `rule`: the rule has
 * blockMs, its own numbers deny (no block holds already), and the call could
 * ever pass (a cost above the capacity is a bad call, not a breach). If so,
 * fills `v` as the start of that block: its length, strike, and the wait.
 * A peek never starts a block.
 */
export function startBlock(rule: CompiledRule, v: Verdict): boolean {
  if (rule.blockMs === 0 || v.allowed || v.blockLeftMs > 0 || v.retryAfterMs === Number.POSITIVE_INFINITY) return false;
  const escalates = rule.maxBlockMs > 0 && v.strike > 0;
  const length = escalates ? Math.min(Math.max(2 * v.blockMs, rule.blockMs), rule.maxBlockMs) : rule.blockMs;
  v.strike = escalates ? v.strike + 1 : 1;
  v.blockMs = length;
  hold(v, length);
  v.blockLeftMs = length;
  v.blockStarted = true;
  return true;
}

/**
 * A block by hand (`limiter.block`): `ms` from `now`, strike 0, forgotten
 * as it ends (it counts for no escalation). It replaces the block the key
 * held under the rule, if any.
 */
export function manualBlock(now: number, ms: number): Block {
  return { until: now + ms, length: ms, strike: 0, forgetAt: now + ms };
}

/** The block `v` started at `now` under `rule` (after startBlock). */
export function blockStartedAt(rule: CompiledRule, v: Verdict, now: number): Block {
  const until = now + v.blockMs;
  return { until, length: v.blockMs, strike: v.strike, forgetAt: until + rule.maxBlockMs };
}
