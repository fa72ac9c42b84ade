/*
 * From the keys a call names to the keys stores keep state under. A call
 * names one key (`'user:42'`, the scope `key`) or one per scope its rules use
 * (`{ ip, user }`); `global` rules take none. Each becomes a store key:
 * checked, made well-formed, hashed when long, and qualified by its scope,
 * so that no two (scope, key) pairs share a store key:
 *
 *   scope key:     the key, with `{`, `}` and `%` percent-encoded
 *   other scopes:  %<scope>:<the key, encoded the same way>
 *   global:        %global
 *   a long key:    %sha256=<hex> in place of the key
 *
 * A key can hold no bare `%`, so the forms above cannot meet. Store keys hold
 * no braces either: RedisStore puts each one in a Cluster hash tag as is.
 */
import { describe, ErrorCodes, FloodgateError } from './errors.js';
import type { CompiledRule } from './rules.js';
import type { StoreKeys } from './stores/types.js';

/** The key(s) a call is limited under: one key (scope `key`), or one per scope of the rules. */
export type Keys = string | Readonly<Record<string, string>>;

/** Keys longer than this many UTF-8 bytes are stored as their SHA-256, so a client cannot bloat the store. */
export const MAX_KEY_BYTES = 256;

const GLOBAL = '%global';

/** How a rule set turns a call's keys into store keys. */
export interface Keying {
  /** The scopes its rules use, in the order they first appear. */
  readonly scopes: readonly string[];
  /** Per rule: the index of its scope in `scopes`. */
  readonly ruleScopes: readonly number[];
  /**
   * Rules of the one scope `key`: the last key found to be its own store key.
   * A client calling again (the hot path) is not checked again.
   */
  lastPlainKey?: string;
  /**
   * Rules of several scopes: the keys the last call gave, per scope (none for
   * `global`), and the store keys they made; the same client again gets them
   * as they are.
   */
  lastKeys?: readonly (string | undefined)[];
  lastStoreKeys?: StoreKeys;
}

export function keyingOf(rules: readonly CompiledRule[]): Keying {
  const scopes: string[] = [];
  const ruleScopes = rules.map((rule) => {
    const at = scopes.indexOf(rule.scope);
    if (at >= 0) return at;
    scopes.push(rule.scope);
    return scopes.length - 1;
  });
  return { scopes, ruleScopes, lastPlainKey: undefined, lastKeys: undefined, lastStoreKeys: undefined };
}

async function sha256Hex(text: string): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
  let hex = '';
  for (const byte of new Uint8Array(digest)) hex += byte.toString(16).padStart(2, '0');
  return hex;
}

const encode = (key: string): string => (/[{}%]/.test(key) ? key.replace(/[{}%]/g, (c) => (c === '{' ? '%7B' : c === '}' ? '%7D' : '%25')) : key);

/**
 * A lone surrogate is not text: it travels to Redis as U+FFFD, so it is one
 * here too, and both stores see the same bytes.
 */
const wellFormed = (key: string): string => {
  const text = key as string & { isWellFormed(): boolean; toWellFormed(): string };
  return text.isWellFormed() ? key : text.toWellFormed();
};

function missing(scope: string, keys: unknown): FloodgateError {
  if (typeof keys === 'object' && keys !== null && !Array.isArray(keys)) {
    const value = (keys as Record<string, unknown>)[scope];
    return new FloodgateError(
      ErrorCodes.KEY,
      value === undefined
        ? `A rule counts under scope '${scope}', and the call has no key for it: pass consume({ ${scope}: '...' }) (it has ${Object.keys(keys)
            .map((k) => `'${k}'`)
            .join(', ')}).`
        : `The key for scope '${scope}' must be a non-empty string, got ${describe(value)}.`,
    );
  }
  if (typeof keys === 'string' && keys.length > 0) {
    return new FloodgateError(ErrorCodes.KEY, `A rule counts under scope '${scope}': pass an object of keys, like consume({ ${scope}: '...' }).`);
  }
  return new FloodgateError(
    ErrorCodes.KEY,
    `The key must be a non-empty string (or an object of keys by scope), got ${describe(keys)}. Check the key function or the value passed to the limiter.`,
  );
}

/**
 * A key that is its own store key: short enough never to need hashing, with
 * no character to encode and no surrogate (so no lone one). One scan decides
 * for the usual key (an address, an id); any other goes the long way.
 */
const plainKey = /^[^{}%\uD800-\uDFFF]{1,85}$/;

/** The key a call gives for a scope (not checked yet). */
const givenKey = (scope: string, keys: Keys): unknown =>
  typeof keys === 'string' ? (scope === 'key' ? keys : undefined) : typeof keys === 'object' && keys !== null ? keys[scope] : undefined;

/** The store key of one scope of a call. */
function storeKey(scope: string, keys: Keys): string | Promise<string> {
  if (scope === 'global') return GLOBAL;
  const given = givenKey(scope, keys);
  if (typeof given !== 'string' || given.length === 0) throw missing(scope, keys);
  const key = wellFormed(given);
  const head = scope === 'key' ? '' : `%${scope}:`;
  // A UTF-16 unit is at most 3 UTF-8 bytes: only long keys need measuring.
  if (key.length * 3 <= MAX_KEY_BYTES || new TextEncoder().encode(key).length <= MAX_KEY_BYTES) return head + encode(key);
  return sha256Hex(key).then((hex) => `${head}%sha256=${hex}`);
}

/**
 * The store keys of a call under a rule set: one string when its rules share
 * one scope, else one per rule. A promise only when a key must be hashed.
 * Throws ERR_FG_KEY for a missing or empty key, naming its scope.
 */
export function storeKeys(keying: Keying, keys: Keys): StoreKeys | Promise<StoreKeys> {
  const scopes = keying.scopes;
  if (scopes.length === 1) {
    if (typeof keys === 'string' && scopes[0] === 'key') {
      if (keys === keying.lastPlainKey) return keys;
      if (plainKey.test(keys)) {
        keying.lastPlainKey = keys;
        return keys;
      }
    }
    return storeKey(scopes[0] as string, keys);
  }
  return storeKeysOfScopes(keying, keys);
}

/** The store keys of a call under rules of several scopes (kept apart, so that storeKeys stays small enough to inline). */
function storeKeysOfScopes(keying: Keying, keys: Keys): StoreKeys | Promise<StoreKeys> {
  const { scopes, ruleScopes } = keying;
  const last = keying.lastKeys;
  if (last !== undefined && scopes.every((scope, i) => scope === 'global' || givenKey(scope, keys) === last[i])) return keying.lastStoreKeys as StoreKeys;
  const byScope = scopes.map((scope) => storeKey(scope, keys));
  const perRule = (resolved: readonly string[]) => ruleScopes.map((i) => resolved[i] as string);
  if (!byScope.every((key) => typeof key === 'string')) return Promise.all(byScope).then(perRule);
  const ids = perRule(byScope as string[]);
  keying.lastKeys = scopes.map((scope) => (scope === 'global' ? undefined : (givenKey(scope, keys) as string)));
  keying.lastStoreKeys = ids;
  return ids;
}

/** One string for all the store keys of a call (the local deny cache's key): `}` cannot occur in a store key. */
export const joinedKeys = (keys: StoreKeys): string => (typeof keys === 'string' ? keys : keys.join('}'));
