/*
 * One text encoding of an entry (engine.ts: a rule's state, when it ends,
 * and its block), the same in every store that keeps text: SQL rows,
 * Durable Object storage, the example store of docs/writing-a-store.md.
 *
 *   <tag>:<expiresAt>:<state>[|<until>:<length>:<strike>:<forgetAt>]
 *
 *   tag        the algorithm (its codec's tag: fw sw sl tb lb gc cc)
 *   expiresAt  when the state ends, on the clock that decides (0: no state)
 *   state      the algorithm's own text (its folder's codec): for fixed-size
 *              states their numbers, comma-separated; empty when only a
 *              block is kept
 *   block      the key's block under the rule (algorithms/block.ts), while remembered
 *
 * Every number is an integer of ms or units below 2^53. STATE_VERSION names
 * this encoding; a store keeps it in the key of every state (the SQL stores
 * and the Durable Object store put it in the row's or the storage key), so
 * that two builds that encode differently never read, or overwrite, each
 * other's states: each counts on its own while both run (see the store API
 * guide). Text that does not decode under a rule (another algorithm's state,
 * a sliding window of other segments, anything else) reads as no state, and
 * the next write replaces it.
 */
import type { Block } from './algorithms/block.js';
import { ALGORITHMS } from './algorithms/registry.js';
import type { Entry } from './engine.js';
import type { CompiledRule } from './rules.js';

/** The version of the state encoding; stores keep it in the key of every state. */
export const STATE_VERSION = 2;

const integer = (text: string | undefined): number => (text !== undefined && /^(?:0|[1-9]\d{0,15})$/.test(text) ? Number(text) : Number.NaN);
const isCount = (n: number): boolean => Number.isSafeInteger(n) && n >= 0;

function decodeBlock(text: string): Block | undefined {
  const [until, length, strike, forgetAt, ...extra] = text.split(':').map(integer);
  if (extra.length > 0 || ![until, length, strike, forgetAt].every((n) => isCount(n as number))) return undefined;
  // strike 0: a block by hand.
  if (length === 0 || (forgetAt as number) < (until as number)) return undefined;
  return { until: until as number, length: length as number, strike: strike as number, forgetAt: forgetAt as number };
}

/** An entry as text, for a store that keeps text. */
export function encodeEntry(rule: CompiledRule, entry: Entry): string {
  const codec = ALGORITHMS[rule.algorithm].codec;
  const text = `${codec.tag}:${entry.state === null ? 0 : entry.expiresAt}:${entry.state === null ? '' : codec.encode(entry.state)}`;
  const block = entry.block;
  return block === undefined ? text : `${text}|${block.until}:${block.length}:${block.strike}:${block.forgetAt}`;
}

/**
 * An entry from its text, as `rule` reads it; null when the text holds no
 * state of this rule's algorithm, or nothing this encoding could have
 * written: such a key reads as empty, and its next write replaces it.
 */
export function decodeEntry(rule: CompiledRule, text: string | null | undefined): Entry | null {
  if (typeof text !== 'string') return null;
  const bar = text.indexOf('|');
  const head = bar < 0 ? text : text.slice(0, bar);
  const first = head.indexOf(':');
  const second = head.indexOf(':', first + 1);
  const codec = ALGORITHMS[rule.algorithm].codec;
  if (first < 0 || second < 0 || head.slice(0, first) !== codec.tag) return null;
  const expiresAt = integer(head.slice(first + 1, second));
  const stateText = head.slice(second + 1);
  const block = bar < 0 ? undefined : decodeBlock(text.slice(bar + 1));
  if (!isCount(expiresAt) || (bar >= 0 && block === undefined)) return null;
  if (stateText === '') return block === undefined ? null : { state: null, expiresAt: 0, block };
  const state = codec.decode(rule, stateText);
  if (state === undefined) return null;
  return block === undefined ? { state, expiresAt } : { state, expiresAt, block };
}
