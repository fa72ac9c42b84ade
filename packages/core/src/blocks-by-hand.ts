/*
 * The blocks a limiter lists (limiter.blocked()): the ones made by hand,
 * with their reasons, and the ones rules started (blockMs), each kept as a
 * record of the store (StoreRecords) beside the states that enforce it. A
 * record only tells about a block; the rules' states decide (a record
 * outlived by nothing: it expires with the block).
 */
import type { Keys } from './keys.js';
import type { StoreRecords } from './stores/types.js';

/** A block as limiter.blocked() lists it. */
export interface BlockedKey {
  /** The key the rule counts under (for a rule of another scope, that scope's key). */
  key: string;
  scope: string;
  rule: string;
  /** When it ends, on the clock of the limiter that made it (ms since the epoch). */
  untilMs: number;
  /** The reason given to block(); undefined for a block a rule started. */
  reason?: string;
  /** Whether it was made by hand (limiter.block) rather than by a rule's blockMs. */
  manual: boolean;
}

/** The longest reason block() takes. */
export const MAX_REASON_LENGTH = 500;

/** The key a rule of `scope` counts a call's keys under. */
export function scopeKeyOf(keys: Keys, scope: string): string | undefined {
  if (scope === 'global') return '';
  if (typeof keys === 'string') return scope === 'key' ? keys : undefined;
  return keys[scope];
}

/** The name of a block's record: by limiter prefix, rule and key, so that a listing pages through a limiter's blocks in order. */
export const blockRecordName = (prefix: string, rule: string, key: string): string => `${prefix}block:${JSON.stringify([rule, key])}`;

/** The prefix of every block record of a limiter. */
export const blockRecordPrefix = (prefix: string): string => `${prefix}block:`;

/** Writes the record of a block. */
export function recordBlock(records: StoreRecords, prefix: string, block: BlockedKey, ttlMs: number): unknown {
  return records.set(blockRecordName(prefix, block.rule, block.key), JSON.stringify(block), ttlMs);
}

/** A block from its record, or undefined for a record this module did not write. */
export function parseBlock(value: string): BlockedKey | undefined {
  let block: unknown;
  try {
    block = JSON.parse(value);
  } catch {
    return undefined;
  }
  const b = block as Partial<BlockedKey> | null;
  if (typeof b !== 'object' || b === null || typeof b.key !== 'string' || typeof b.scope !== 'string' || typeof b.rule !== 'string') return undefined;
  if (!Number.isSafeInteger(b.untilMs) || typeof b.manual !== 'boolean' || (b.reason !== undefined && typeof b.reason !== 'string')) return undefined;
  return b as BlockedKey;
}
