/**
 * Every error code Floodgate throws or passes to a framework's error path.
 * Codes are stable public API: match on `error.code`, never on the message.
 */
export const ErrorCodes = {
  /** An option has the wrong type or an impossible value. */
  OPTION: 'ERR_FG_OPTION',
  /** An option name Floodgate does not know (often a name from another library). */
  UNKNOWN_OPTION: 'ERR_FG_UNKNOWN_OPTION',
  /** `limit` is not a positive integer of at most 15 digits. */
  LIMIT: 'ERR_FG_LIMIT',
  /** `windowMs` is not a positive integer number of milliseconds. */
  WINDOW: 'ERR_FG_WINDOW',
  /** `algorithm` is not one of the six algorithms. */
  ALGORITHM: 'ERR_FG_ALGORITHM',
  /** `burst` is not an integer from 1 to 15 digits, or is given to an algorithm without a burst. */
  BURST: 'ERR_FG_BURST',
  /** `segments` is not a positive integer that divides `windowMs`. */
  SEGMENTS: 'ERR_FG_SEGMENTS',
  /** `mode` is not 'police' or 'shape', or is given to an algorithm other than leaky-bucket. */
  MODE: 'ERR_FG_MODE',
  /** `rules` is empty, mixed with the shorthand, or holds a rule without a usable name. */
  RULES: 'ERR_FG_RULES',
  /** Two rules of one limiter share a name. */
  DUPLICATE_RULE: 'ERR_FG_DUPLICATE_RULE',
  /** The numbers of a rule are too large to be computed exactly. */
  RULE_TOO_LARGE: 'ERR_FG_RULE_TOO_LARGE',
  /** The key function returned something other than a non-empty string. */
  KEY: 'ERR_FG_KEY',
  /** The cost is not a positive integer. */
  COST: 'ERR_FG_COST',
  /** The store did not answer within `timeoutMs`. */
  STORE_TIMEOUT: 'ERR_FG_STORE_TIMEOUT',
  /** The store was not asked: its client is not connected, or it failed so often that calls pause for a moment. */
  STORE_UNAVAILABLE: 'ERR_FG_STORE_UNAVAILABLE',
  /** The store answered with something Floodgate cannot read. */
  STORE_REPLY: 'ERR_FG_STORE_REPLY',
  /** Another open limiter on the same store counts a rule of the same name and scope under the same prefix: they would share counters. */
  STORE_REUSE: 'ERR_FG_STORE_REUSE',
  /** A call was denied: `limiter.wrap()` and `@rateLimited` reject with a RateLimitedError. */
  RATE_LIMITED: 'ERR_FG_RATE_LIMITED',
  /** `limiter.wait()` cannot be admitted within `maxWaitMs` (a RateLimitedError). */
  WAIT_TIMEOUT: 'ERR_FG_WAIT_TIMEOUT',
  /** The limiter was closed: calls still waiting are rejected, and new waits too. */
  CLOSED: 'ERR_FG_CLOSED',
} as const;

export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

/**
 * The one error type of Floodgate. `code` is stable (`ERR_FG_*`); the message
 * says what to change.
 *
 * @example
 * ```ts
 * try {
 *   createLimiter({ limit: 0, windowMs: 1000 });
 * } catch (error) {
 *   if (error instanceof FloodgateError && error.code === 'ERR_FG_LIMIT') { ... }
 * }
 * ```
 */
export class FloodgateError extends Error {
  override readonly name: string = 'FloodgateError';
  readonly code: ErrorCode;
  /** HTTP status an adapter answers with when this error reaches it at request time. */
  readonly status: number;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown; status?: number }) {
    super(`${message} [${code}]`, { cause: options?.cause });
    this.code = code;
    this.status = options?.status ?? 500;
  }
}

/** Whether a value is a FloodgateError, also across copies of the package. */
export function isFloodgateError(value: unknown): value is FloodgateError {
  if (value instanceof FloodgateError) return true;
  const code = value instanceof Error ? (value as Error & { code?: unknown }).code : undefined;
  return (
    value instanceof Error && (value.name === 'FloodgateError' || value.name === 'RateLimitedError') && typeof code === 'string' && code.startsWith('ERR_FG_')
  );
}

/** Renders a value for an error message: short and unambiguous (`'x'`, `NaN`, `[object]`). */
export function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (typeof value === 'function') return 'a function';
  if (Array.isArray(value)) return 'an array';
  return 'an object';
}

/**
 * An option's value, or its default when it was left out (undefined). Unlike
 * `??`, a `null` stays: it is validated like any value and rejected with a
 * clear error, never silently replaced by the default.
 */
/** A call's cost, checked: every cost a user gives (a number or a function's result) passes here. */
export function checkCost(cost: unknown): number {
  if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 1) {
    throw new FloodgateError(ErrorCodes.COST, `cost must be a positive integer, got ${describe(cost)}.`);
  }
  return cost;
}

/** The options of a listing that pages (limiter.blocked(), overrides.list()), checked; `where` names the method in errors. */
export function checkPage(where: string, options: unknown): { cursor: string; count: number } {
  if (options !== undefined && (typeof options !== 'object' || options === null || Array.isArray(options))) {
    throw new FloodgateError(ErrorCodes.OPTION, `${where} options must be an object like { cursor, count: 100 }, got ${describe(options)}.`);
  }
  for (const name in options) {
    if (name !== 'cursor' && name !== 'count')
      throw new FloodgateError(ErrorCodes.UNKNOWN_OPTION, `${where} has no option '${name}'; it takes cursor and count.`);
  }
  const { cursor = '', count = 100 } = (options ?? {}) as { cursor?: unknown; count?: unknown };
  if (typeof cursor !== 'string')
    throw new FloodgateError(ErrorCodes.OPTION, `${where}'s cursor must be the cursor of the page before, got ${describe(cursor)}.`);
  if (typeof count !== 'number' || !Number.isSafeInteger(count) || count < 1 || count > 10_000) {
    throw new FloodgateError(ErrorCodes.OPTION, `${where}'s count must be an integer from 1 to 10000, got ${describe(count)}.`);
  }
  return { cursor, count };
}

export function orDefault<T>(value: T | undefined, fallback: T): T {
  return value === undefined ? fallback : value;
}
