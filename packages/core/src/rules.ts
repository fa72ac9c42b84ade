import { ALGORITHMS, type AlgorithmName } from './algorithms/registry.js';
import type { RuleNumbers } from './algorithms/types.js';
import { describe, ErrorCodes, FloodgateError, orDefault } from './errors.js';

export type { AlgorithmName } from './algorithms/registry.js';

/** The six rate algorithms, and `concurrency` (requests in flight). See the package README for when to choose which. */
export const algorithms = Object.freeze(Object.keys(ALGORITHMS) as AlgorithmName[]);

/** A rule as the user writes it. */
export interface RuleOptions {
  /**
   * Names the rule in decisions, headers and store keys. Required when a
   * limiter has several rules; the shorthand rule is called `'default'`.
   * Letters, digits, `_`, `-` and `.`, at most 64 characters.
   */
  name?: string;
  /** @defaultValue `'sliding-window'` */
  algorithm?: AlgorithmName;
  /** Units admitted per window (for buckets: units refilled/drained per window; for concurrency: units in flight at once). Positive integer. */
  limit: number;
  /** Window length in milliseconds (for concurrency: how long a lease lives unless released). Positive integer. */
  windowMs: number;
  /** token-bucket, leaky-bucket and gcra: capacity, the largest burst admitted at once. @defaultValue `limit` */
  burst?: number;
  /** sliding-window: number of segments the window is split into; must divide `windowMs`. @defaultValue 1 */
  segments?: number;
  /** leaky-bucket: `'police'` rejects what overflows; `'shape'` delays calls to a constant rate. @defaultValue `'police'` */
  mode?: 'police' | 'shape';
  /**
   * Whose key the rule counts under. `'key'`: the call's key (`consume('user:42')`
   * or `consume({ key: 'user:42' })`); `'global'`: one count for everyone, no key;
   * any other name: the key the call gives under that name
   * (`consume({ ip: '203.0.113.9', user: 'u42' })`). Letters, digits, `_` and
   * `-`, starting with a letter, at most 32. @defaultValue `'key'`
   */
  scope?: string;
  /**
   * Once this rule denies a call, deny the key for this many ms from that
   * denial, whatever the rule's own numbers say (five failed logins, then
   * nothing for 15 minutes). Calls during a block do not extend it;
   * `reset()` lifts it, `refund()` does not. A call whose cost exceeds the
   * capacity starts no block. Not for `concurrency`. Positive integer, at
   * most 100 years.
   */
  blockMs?: number;
  /**
   * Escalation for repeat offenders: a block that starts less than
   * `maxBlockMs` after the previous one ended is twice as long as that one,
   * up to `maxBlockMs`; once `maxBlockMs` passes without a block, the next
   * is `blockMs` again. Needs `blockMs`, and at least as much.
   */
  maxBlockMs?: number;
}

/**
 * A validated rule with every default filled in and the constants the
 * algorithms need precomputed once.
 */
export interface CompiledRule extends RuleNumbers {
  readonly name: string;
  readonly scope: string;
  readonly algorithm: AlgorithmName;
  /** ms a denial blocks the key for (the first block, under escalation); 0: no blocks. */
  readonly blockMs: number;
  /** Escalation's longest block; 0: no escalation. */
  readonly maxBlockMs: number;
}

const ruleKeys = new Set(['name', 'algorithm', 'limit', 'windowMs', 'burst', 'segments', 'mode', 'scope', 'blockMs', 'maxBlockMs']);
/**
 * The longest block: 100 years. Not a timer (no 2^31 - 1 bound), but a
 * bound keeps block ends exact integers in doubles (JS and Redis Lua) for
 * any clock up to 2^50.
 */
export const MAX_BLOCK_MS = 100 * 365 * 86_400_000;
const scopePattern = /^[A-Za-z][A-Za-z0-9_-]{0,31}$/;
const namePattern = /^[A-Za-z0-9_.-]{1,64}$/;

/** The algorithms that take an option, as messages name them: "token-bucket, leaky-bucket and gcra". */
function takers(option: 'burst' | 'segments' | 'mode'): string {
  const names = algorithms.filter((name) => ALGORITHMS[name].takes.includes(option));
  return names.length === 1 ? (names[0] as string) : `${names.slice(0, -1).join(', ')} and ${names[names.length - 1]}`;
}
/** Internal arithmetic stays below this so that doubles (JS and Redis Lua) compute it exactly. */
const exactLimit = 2 ** 50;
/**
 * The largest `limit` and `burst`: the IETF RateLimit headers carry them (and
 * the units remaining) as structured-field integers, which have at most 15 digits.
 */
export const MAX_LIMIT = 999_999_999_999_999;

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

function isPositiveInteger(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value > 0;
}

/** Validates one rule and fills in its defaults. `where` names it in error messages. */
export function compileRule(options: unknown, where: string, defaultName?: string): CompiledRule {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new FloodgateError(ErrorCodes.RULES, `${where} must be an object like { limit: 100, windowMs: 60_000 }, got ${describe(options)}.`);
  }
  const rule = options as Record<string, unknown>;
  for (const key of Object.keys(rule)) {
    if (!ruleKeys.has(key)) {
      throw new FloodgateError(ErrorCodes.UNKNOWN_OPTION, `${where} has an unknown field '${key}'; a rule takes ${[...ruleKeys].join(', ')}.`);
    }
  }

  const name = orDefault(rule.name, defaultName);
  if (typeof name !== 'string' || !namePattern.test(name)) {
    throw new FloodgateError(
      ErrorCodes.RULES,
      name === undefined
        ? `${where} needs a name: several rules share one key, and the name keeps their state apart (e.g. name: 'per-minute').`
        : `${where}.name must be 1 to 64 letters, digits, '_', '-' or '.', got ${describe(name)}.`,
    );
  }

  const scope = orDefault<unknown>(rule.scope, 'key');
  if (typeof scope !== 'string' || !scopePattern.test(scope)) {
    throw new FloodgateError(
      ErrorCodes.RULES,
      `${where}.scope must be 'key', 'global' or a name of letters, digits, '_' and '-' starting with a letter (at most 32), like 'ip' or 'user', got ${describe(scope)}.`,
    );
  }

  const algorithm = orDefault<unknown>(rule.algorithm, 'sliding-window');
  if (typeof algorithm !== 'string' || !(algorithms as readonly string[]).includes(algorithm)) {
    throw new FloodgateError(
      ErrorCodes.ALGORITHM,
      `${where}.algorithm must be one of ${algorithms.map((a) => `'${a}'`).join(', ')}, got ${describe(algorithm)}.`,
    );
  }

  const limit = rule.limit;
  if (!isPositiveInteger(limit)) {
    throw new FloodgateError(ErrorCodes.LIMIT, `${where}.limit must be a positive integer (units per window), got ${describe(limit)}.`);
  }
  if (limit > MAX_LIMIT) {
    throw new FloodgateError(
      ErrorCodes.LIMIT,
      `${where}.limit must be at most 999_999_999_999_999 (15 digits, what rate-limit headers can carry), got ${describe(limit)}.`,
    );
  }
  const windowMs = rule.windowMs;
  if (!isPositiveInteger(windowMs)) {
    throw new FloodgateError(ErrorCodes.WINDOW, `${where}.windowMs must be a positive integer number of milliseconds, got ${describe(windowMs)}.`);
  }

  const definition = ALGORITHMS[algorithm as AlgorithmName];
  const isBucket = definition.takes.includes('burst');
  if (rule.burst !== undefined && !isBucket) {
    throw new FloodgateError(ErrorCodes.BURST, `${where}.burst only applies to ${takers('burst')}; remove it or change the algorithm (it is '${algorithm}').`);
  }
  const burst = orDefault<unknown>(rule.burst, limit);
  if (!isPositiveInteger(burst)) {
    throw new FloodgateError(ErrorCodes.BURST, `${where}.burst must be an integer >= 1 (the bucket's capacity), got ${describe(burst)}.`);
  }
  if (burst > MAX_LIMIT) {
    throw new FloodgateError(
      ErrorCodes.BURST,
      `${where}.burst must be at most 999_999_999_999_999 (15 digits, what rate-limit headers can carry), got ${describe(burst)}.`,
    );
  }

  if (rule.segments !== undefined && !definition.takes.includes('segments')) {
    throw new FloodgateError(
      ErrorCodes.SEGMENTS,
      `${where}.segments only applies to ${takers('segments')}; remove it or change the algorithm (it is '${algorithm}').`,
    );
  }
  const segments = orDefault<unknown>(rule.segments, 1);
  if (!isPositiveInteger(segments) || windowMs % segments !== 0) {
    throw new FloodgateError(
      ErrorCodes.SEGMENTS,
      `${where}.segments must be a positive integer that divides windowMs (${windowMs}), got ${describe(segments)}.`,
    );
  }

  if (rule.mode !== undefined && !definition.takes.includes('mode')) {
    throw new FloodgateError(ErrorCodes.MODE, `${where}.mode only applies to ${takers('mode')}; remove it or change the algorithm (it is '${algorithm}').`);
  }
  const mode = orDefault<unknown>(rule.mode, 'police');
  if (mode !== 'police' && mode !== 'shape') {
    throw new FloodgateError(ErrorCodes.MODE, `${where}.mode must be 'police' or 'shape', got ${describe(mode)}.`);
  }

  const blockMs = orDefault<unknown>(rule.blockMs, 0);
  const maxBlockMs = orDefault<unknown>(rule.maxBlockMs, 0);
  if (rule.blockMs !== undefined) {
    if (!definition.blocks) {
      throw new FloodgateError(
        ErrorCodes.OPTION,
        `${where}.blockMs does not apply to ${algorithm}: its denials end when a request ends, they are no breach of a rate. Put blockMs on a rate rule beside it.`,
      );
    }
    if (!isPositiveInteger(blockMs) || blockMs > MAX_BLOCK_MS) {
      throw new FloodgateError(
        ErrorCodes.OPTION,
        `${where}.blockMs must be a positive integer number of ms, at most ${MAX_BLOCK_MS} (100 years), got ${describe(rule.blockMs)}.`,
      );
    }
  }
  if (rule.maxBlockMs !== undefined) {
    if (rule.blockMs === undefined) {
      throw new FloodgateError(
        ErrorCodes.OPTION,
        `${where}.maxBlockMs caps escalating blocks and needs blockMs (the first block), like { blockMs: 60_000, maxBlockMs: 3_600_000 }.`,
      );
    }
    if (!isPositiveInteger(maxBlockMs) || maxBlockMs < (blockMs as number) || maxBlockMs > MAX_BLOCK_MS) {
      throw new FloodgateError(
        ErrorCodes.OPTION,
        `${where}.maxBlockMs must be an integer number of ms from blockMs (${blockMs}) to ${MAX_BLOCK_MS} (100 years), got ${describe(rule.maxBlockMs)}.`,
      );
    }
  }

  const divisor = gcd(windowMs, limit);
  const unitsPerToken = windowMs / divisor;
  const unitsPerMs = limit / divisor;
  const capacity = isBucket ? burst : limit;
  const numbers: RuleNumbers = {
    limit,
    windowMs,
    burst: isBucket ? (burst as number) : limit,
    segments: segments as number,
    mode: mode as 'police' | 'shape',
    capacity: capacity as number,
    unitsPerToken,
    unitsPerMs,
    segmentMs: windowMs / (segments as number),
  };
  if ((definition.largest?.(numbers) ?? 0) > exactLimit) {
    throw new FloodgateError(
      ErrorCodes.RULE_TOO_LARGE,
      `${where} is too large to compute exactly (limit ${limit}, windowMs ${windowMs}${isBucket ? `, burst ${burst}` : ''}); use a shorter window or a smaller limit.`,
    );
  }

  return Object.freeze({ name, scope, algorithm: algorithm as AlgorithmName, ...numbers, blockMs: blockMs as number, maxBlockMs: maxBlockMs as number });
}

/** Validates a list of rules: at least one, names unique. */
export function compileRules(rules: unknown, where = 'rules'): readonly CompiledRule[] {
  if (!Array.isArray(rules) || rules.length === 0) {
    throw new FloodgateError(ErrorCodes.RULES, `${where} must be a non-empty array of rules, got ${describe(rules)}.`);
  }
  const compiled = rules.map((rule, i) => compileRule(rule, `${where}[${i}]`, rules.length === 1 ? 'default' : undefined));
  const seen = new Set<string>();
  for (const rule of compiled) {
    if (seen.has(rule.name)) {
      throw new FloodgateError(ErrorCodes.DUPLICATE_RULE, `${where} has two rules named '${rule.name}'; give each rule its own name.`);
    }
    seen.add(rule.name);
  }
  return Object.freeze(compiled);
}

/**
 * A compiled rule as the options that compile to it again: its name, scope,
 * algorithm, limit and window, the options its algorithm takes, and its
 * blocks. For those who pass a rule on (a Durable Object, a rule rebuilt with
 * another limit).
 */
export function optionsOf(rule: CompiledRule): RuleOptions {
  const options: Record<string, unknown> = { name: rule.name, scope: rule.scope, algorithm: rule.algorithm, limit: rule.limit, windowMs: rule.windowMs };
  for (const option of ALGORITHMS[rule.algorithm].takes) options[option] = rule[option];
  if (rule.blockMs > 0) options.blockMs = rule.blockMs;
  if (rule.maxBlockMs > 0) options.maxBlockMs = rule.maxBlockMs;
  return options as unknown as RuleOptions;
}
