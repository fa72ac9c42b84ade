/*
 * What the Redis library tells about each rule of a call, and how the rest
 * of the decision follows from it. The library reads a rule's state and
 * answers with its view: the few numbers the state stands for now (each
 * algorithm's own, from its folder). The decision's fields are then worked
 * out by the arithmetic the memory store decides with, so the two stores
 * cannot drift apart in how they report a decision; what they could disagree
 * on, which state they read and whether they admit, the conformance suite
 * checks.
 */
import { applyBlock } from '../../algorithms/block.js';
import { ALGORITHMS } from '../../algorithms/registry.js';
import type { RuleView } from '../../algorithms/types.js';
import type { CompiledRule } from '../../rules.js';

export type { RuleView } from '../../algorithms/types.js';

/**
 * The view of a rule under the Redis library: its algorithm's numbers, then
 * (for every algorithm whose rules can block) three for its block: ms it
 * holds the key, and the length and strike of the block remembered (0s:
 * none). The spec names blockMs and maxBlockMs after a `|`.
 */
export function viewOf(rule: CompiledRule): RuleView {
  const definition = ALGORITHMS[rule.algorithm];
  const view = definition.view(rule);
  if (!definition.blocks) return view;
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
