/*
 * One text encoding of an entry (engine.ts: a rule's state, when it ends,
 * and its block), the same in every store that keeps text: SQL rows,
 * Durable Object storage, the example store of docs/writing-a-store.md.
 *
 *   <tag>:<expiresAt>:<state>[|<until>:<length>:<strike>:<forgetAt>]
 *
 *   tag        the algorithm: fw sw sl tb lb gc cc
 *   expiresAt  when the state ends, on the clock that decides (0: no state)
 *   state      fixed-size states (fw, sw, tb, lb, gc): their numbers, comma-separated;
 *              sliding-log: <ms>/<units> per admitted ms, oldest first;
 *              concurrency: <lease id>/<units>/<expires> per lease;
 *              empty when only a block is kept
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
import type { LeaseState, LogState, RuleState } from './algorithms/index.js';
import { vectorAlgorithms } from './algorithms/index.js';
import type { Entry } from './engine.js';
import type { AlgorithmName, CompiledRule } from './rules.js';

/** The version of the state encoding; stores keep it in every state's key. */
export const STATE_VERSION = 2;

const TAGS: Readonly<Record<AlgorithmName, string>> = {
  'fixed-window': 'fw',
  'sliding-window': 'sw',
  'sliding-log': 'sl',
  'token-bucket': 'tb',
  'leaky-bucket': 'lb',
  gcra: 'gc',
  concurrency: 'cc',
};

const METERS: ReadonlySet<AlgorithmName> = new Set(['token-bucket', 'leaky-bucket', 'gcra']);
const LEASE_ID = /^[A-Za-z0-9._~-]{1,128}$/;

const integer = (text: string | undefined): number => (text !== undefined && /^(?:0|[1-9]\d{0,15})$/.test(text) ? Number(text) : Number.NaN);
const isCount = (n: number): boolean => Number.isSafeInteger(n) && n >= 0;

function encodeState(rule: CompiledRule, state: RuleState): string {
  if (state === null) return '';
  if (rule.algorithm === 'sliding-log') {
    const log = state as LogState;
    const parts: string[] = [];
    for (let i = log.head; i < log.times.length; i++) parts.push(`${log.times[i]}/${log.counts[i]}`);
    return parts.join(',');
  }
  if (rule.algorithm === 'concurrency') {
    const leases = state as LeaseState;
    return leases.ids.map((id, i) => `${id}/${leases.costs[i]}/${leases.expires[i]}`).join(',');
  }
  return (state as number[]).join(',');
}

/** A state's text as the rule's algorithm reads it, or undefined when it is not one. */
function decodeState(rule: CompiledRule, text: string): RuleState | undefined {
  const parts = text.split(',');
  if (rule.algorithm === 'sliding-log') {
    const log: LogState = { times: [], counts: [], head: 0, total: 0 };
    for (const part of parts) {
      const [at, units, extra] = part.split('/');
      const time = integer(at);
      const count = integer(units);
      if (extra !== undefined || !isCount(time) || !isCount(count) || count === 0) return undefined;
      if (log.times.length > 0 && time <= (log.times[log.times.length - 1] as number)) return undefined;
      log.times.push(time);
      log.counts.push(count);
      log.total += count;
    }
    return Number.isSafeInteger(log.total) ? log : undefined;
  }
  if (rule.algorithm === 'concurrency') {
    const leases: LeaseState = { ids: [], costs: [], expires: [] };
    for (const part of parts) {
      const [id, units, until, extra] = part.split('/');
      const cost = integer(units);
      const expires = integer(until);
      if (extra !== undefined || id === undefined || !LEASE_ID.test(id) || !isCount(cost) || cost === 0 || !isCount(expires)) return undefined;
      leases.ids.push(id);
      leases.costs.push(cost);
      leases.expires.push(expires);
    }
    return leases;
  }
  const algorithm = vectorAlgorithms[rule.algorithm];
  const numbers = parts.map(integer);
  if (numbers.length !== algorithm.stateSize(rule) || !numbers.every(isCount)) return undefined;
  // Numbers that divide: a sliding window's segment length, a meter's units per token and per ms.
  if (rule.algorithm === 'sliding-window' && numbers[0] === 0) return undefined;
  if (METERS.has(rule.algorithm) && (numbers[2] === 0 || numbers[3] === 0)) return undefined;
  return numbers;
}

function decodeBlock(text: string): Block | undefined {
  const [until, length, strike, forgetAt, ...extra] = text.split(':').map(integer);
  if (extra.length > 0 || ![until, length, strike, forgetAt].every((n) => isCount(n as number))) return undefined;
  if (length === 0 || strike === 0 || (forgetAt as number) < (until as number)) return undefined;
  return { until: until as number, length: length as number, strike: strike as number, forgetAt: forgetAt as number };
}

/** An entry as text, for a store that keeps text. */
export function encodeEntry(rule: CompiledRule, entry: Entry): string {
  const text = `${TAGS[rule.algorithm]}:${entry.state === null ? 0 : entry.expiresAt}:${encodeState(rule, entry.state)}`;
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
  if (first < 0 || second < 0 || head.slice(0, first) !== TAGS[rule.algorithm]) return null;
  const expiresAt = integer(head.slice(first + 1, second));
  const stateText = head.slice(second + 1);
  const block = bar < 0 ? undefined : decodeBlock(text.slice(bar + 1));
  if (!isCount(expiresAt) || (bar >= 0 && block === undefined)) return null;
  if (stateText === '') return block === undefined ? null : { state: null, expiresAt: 0, block };
  const state = decodeState(rule, stateText);
  if (state === undefined) return null;
  return block === undefined ? { state, expiresAt } : { state, expiresAt, block };
}
