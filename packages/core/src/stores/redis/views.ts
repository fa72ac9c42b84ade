/*
 * What the Redis library tells about each rule of a call, and how the rest
 * of the decision follows from it. The library reads a rule's state and
 * answers with its view: the few numbers the state stands for now. The
 * decision's fields are then worked out here, by the arithmetic the memory
 * store decides with, so the two stores cannot drift apart in how they
 * report a decision; what they could disagree on, which state they read and
 * whether they admit, the conformance suite checks.
 */
import { applyBlock } from '../../algorithms/block.js';
import { countInWindow } from '../../algorithms/fixed-window.js';
import { decideLevel } from '../../algorithms/meter.js';
import { slidingWindow } from '../../algorithms/sliding-window.js';
import type { Verdict } from '../../algorithms/types.js';
import type { CompiledRule } from '../../rules.js';

/** How the library and this side speak about one rule. */
export interface RuleView {
  /** The rule as the library takes it (see `rule` in lua/<algorithm>.lua). */
  readonly spec: string;
  /** Numbers in the rule's view. */
  readonly size: number;
  /** Whether lua/fast.lua can decide a consume of this rule alone: a plain rule (no blockMs) of fixed-window, sliding-window or a meter. */
  readonly fast: boolean;
  /** Fills `out` for a call of `cost` from the view in `reply[at..at + size)` (numbers, already checked). */
  verdict(reply: readonly number[], at: number, cost: number, out: Verdict): void;
}

/** Units in use out of `limit`, for the algorithms that count units (sliding-log, concurrency). */
function countedUnits(rule: CompiledRule, used: number, resetNow: number, retryMs: number, admittedResetMs: number, cost: number, out: Verdict): void {
  const after = used + cost;
  out.remainingNow = used < rule.limit ? rule.limit - used : 0;
  out.resetMsNow = resetNow;
  out.delayMs = 0;
  out.ttlMs = 0;
  if (after <= rule.limit) {
    out.allowed = true;
    out.retryAfterMs = 0;
    out.remaining = rule.limit - after;
    out.resetMs = admittedResetMs;
    return;
  }
  out.allowed = false;
  out.retryAfterMs = cost > rule.limit ? Number.POSITIVE_INFINITY : retryMs;
  out.remaining = out.remainingNow;
  out.resetMs = resetNow;
}

/**
 * The view of a rule under the Redis library: its algorithm's numbers, then
 * (for every algorithm that can block, so all but concurrency) three for its
 * block: ms it holds the key, and the length and strike of the block
 * remembered (0s: none). The spec names blockMs and maxBlockMs after a `|`.
 */
export function viewOf(rule: CompiledRule): RuleView {
  const view = algorithmView(rule);
  if (rule.algorithm === 'concurrency') return view;
  const at = view.size;
  return {
    spec: rule.blockMs > 0 ? `${view.spec}|${rule.blockMs}:${rule.maxBlockMs}` : view.spec,
    size: at + 3,
    fast: view.fast && rule.blockMs === 0,
    verdict: (reply, from, cost, out) => {
      view.verdict(reply, from, cost, out);
      const left = reply[from + at] as number;
      const strike = reply[from + at + 2] as number;
      if (left > 0 || strike > 0) applyBlock(out, left, reply[from + at + 1] as number, strike);
    },
  };
}

function algorithmView(rule: CompiledRule): RuleView {
  switch (rule.algorithm) {
    case 'fixed-window':
      return {
        spec: `fw:${rule.limit}:${rule.windowMs}`,
        size: 2, // count, ms to the window's end
        fast: true,
        verdict: (reply, at, cost, out) => {
          countInWindow(rule, reply[at] as number, reply[at + 1] as number, cost, out);
        },
      };
    case 'sliding-window':
      return {
        spec: `sw:${rule.limit}:${rule.windowMs}:${rule.segments}`,
        size: rule.segments + 2, // phase, counts oldest first
        fast: true,
        verdict: (reply, at, cost, out) => {
          // The memory store's state at segment 0 ([segmentMs, 0, counts...]), decided `phase` ms into it.
          const state = [rule.segmentMs, 0, ...reply.slice(at + 1, at + rule.segments + 2)];
          slidingWindow.decide(rule, state, 0, reply[at] as number, cost, out, new Array<number>(state.length));
        },
      };
    case 'sliding-log':
      return {
        spec: `sl:${rule.limit}:${rule.windowMs}`,
        size: 3, // units in the window, ms until they have left it, ms until the call fits
        fast: false,
        verdict: (reply, at, cost, out) => {
          countedUnits(rule, reply[at] as number, reply[at + 1] as number, reply[at + 2] as number, rule.windowMs, cost, out);
        },
      };
    case 'concurrency':
      return {
        spec: `cc:${rule.limit}:${rule.windowMs}`,
        size: 3, // units in use, ms until the last lease ends, ms until the call fits
        fast: false,
        verdict: (reply, at, cost, out) => {
          const resetNow = reply[at + 1] as number;
          countedUnits(rule, reply[at] as number, resetNow, reply[at + 2] as number, Math.max(resetNow, rule.windowMs), cost, out);
        },
      };
    default:
      // token-bucket, leaky-bucket and gcra: one meter (src/algorithms/meter.ts).
      return {
        spec: `m:${rule.burst}:${rule.unitsPerToken}:${rule.unitsPerMs}`,
        size: 1, // the level now
        fast: true,
        verdict: (reply, at, cost, out) => {
          decideLevel(rule, reply[at] as number, cost, out);
        },
      };
  }
}
