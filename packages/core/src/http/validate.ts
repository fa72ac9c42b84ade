/*
 * Runtime checks of a limiter's setup, in the spirit of express-rate-limit's
 * validations: each looks at live requests for a setup that limits the wrong
 * clients, warns at most once per limiter naming the fix, and can be turned
 * off (`validate: false`, or per check). Built once; per request, each live
 * check costs a comparison or two and allocates nothing.
 */
import { describe, ErrorCodes, FloodgateError } from '../errors.js';
import { joinHeader, keyReadsClientIp, unreadAddressOf } from './keys.js';
import type { ProxyTrust } from './proxy-trust.js';

/**
 * The code of every warning Floodgate emits: stable, match on it rather than on the message.
 *
 * @example
 * ```ts
 * process.on('warning', (warning) => {
 *   if ((warning as FloodgateWarning).code === WarningCodes.SINGLE_KEY) metrics.increment('floodgate.single_key');
 * });
 * ```
 */
export const WarningCodes = {
  /** X-Forwarded-For arrives while the framework trusts no proxy: every client shares the proxy's bucket. */
  X_FORWARDED_FOR: 'WRN_FG_X_FORWARDED_FOR',
  /** The framework trusts every proxy: a client picks its own key with X-Forwarded-For. */
  TRUST_PROXY: 'WRN_FG_TRUST_PROXY',
  /** One key made most of the requests: the key probably does not tell clients apart. */
  SINGLE_KEY: 'WRN_FG_SINGLE_KEY',
  /** A proxy header entry that is no address: the request was keyed by the proxy's address. */
  FORWARDED_ADDRESS: 'WRN_FG_FORWARDED_ADDRESS',
} as const;

export type WarningCode = (typeof WarningCodes)[keyof typeof WarningCodes];

/**
 * What Floodgate warns with: on Node, Bun and Deno through `process.emitWarning`
 * (listen with `process.on('warning')`, silence with `--no-warnings`), elsewhere
 * through `console.warn`.
 *
 * @example
 * ```ts
 * process.on('warning', (warning) => {
 *   if (warning.name === 'FloodgateWarning') log.warn({ code: (warning as FloodgateWarning).code }, warning.message);
 * });
 * ```
 */
export class FloodgateWarning extends Error {
  override readonly name = 'FloodgateWarning';
  readonly code: WarningCode;

  constructor(code: WarningCode, message: string) {
    super(message);
    this.code = code;
  }
}

/** The one sink of Floodgate's warnings. */
export function emitWarning(warning: FloodgateWarning): void {
  const process = (globalThis as { process?: { emitWarning?: (warning: Error) => void } }).process;
  if (typeof process?.emitWarning === 'function') process.emitWarning(warning);
  else console.warn(`[${warning.code}] ${warning.name}: ${warning.message}`);
}

/** The checks `validate` turns on and off by name. */
type ValidationName = 'xForwardedFor' | 'trustProxy' | 'singleKey' | 'forwardedAddress';
const validationNames: readonly ValidationName[] = ['xForwardedFor', 'trustProxy', 'singleKey', 'forwardedAddress'];

/** What the checks need to know about the adapter: how it reads a request, and how far its framework trusts proxies. */
export interface ValidationFacts<Args extends unknown[]> {
  /** A request header (lower-case name), as the key extractors read it. */
  header?: (name: string, ...args: Args) => string | readonly string[] | undefined;
  /** How far the framework trusts X-Forwarded-For for this request; undefined when the adapter cannot tell (the proxy checks are skipped). */
  trust?: (...args: Args) => ProxyTrust | undefined;
}

/** Requests in one window of the singleKey check. */
export const SINGLE_KEY_WINDOW = 1000;

/**
 * Reads `validate` and returns the per-request check, or undefined when no
 * check is on. The check is called once per request with the key it got; each
 * warning is emitted at most once, then that check stops.
 *
 * `key` is the limiter's key (a function or an object of them): the proxy
 * checks run only when it reads the framework's client address.
 */
export function createValidations<Args extends unknown[]>(
  options: unknown,
  key: unknown,
  facts: ValidationFacts<Args>,
): ((args: Args, key: string) => void) | undefined {
  const enabled = parseValidate(options);
  const reads = keyReadsClientIp(key);
  const checks: ((args: Args, key: string) => boolean)[] = [];
  const { trust } = facts;
  const given = facts.header;
  const header = given && ((name: string, ...args: Args) => joinHeader(given(name, ...args)));

  // Both proxy checks look at requests that carry X-Forwarded-For: without it, the client address is the
  // connection's whatever the setting. One header read per request; the setting is read only with the header.
  let untrusted = enabled.has('xForwardedFor') && reads === true; // keyBy.ip(), or keyBy.header() falling back to it
  let trustsAll = enabled.has('trustProxy') && reads !== false; // a key function of your own may read the client address too
  if ((untrusted || trustsAll) && header !== undefined && trust !== undefined) {
    checks.push(function proxies(args) {
      if (header('x-forwarded-for', ...args) === undefined) return false;
      const setting = trust(...args);
      if (untrusted && setting?.level === 'none') {
        untrusted = false;
        emitWarning(
          new FloodgateWarning(
            WarningCodes.X_FORWARDED_FOR,
            `A request carries X-Forwarded-For, but ${setting.setting}: the limiter keys it by the address of the proxy that sent it, so every client behind that proxy shares one bucket. If the app is behind proxies, ${setting.fix} (see docs/behind-a-proxy.md). If it is not, the client sent the header itself: turn this check off with validate: { xForwardedFor: false }.`,
          ),
        );
      } else if (trustsAll && setting?.level === 'all') {
        trustsAll = false;
        emitWarning(
          new FloodgateWarning(
            WarningCodes.TRUST_PROXY,
            `${setting.setting}: the client address is the left-most X-Forwarded-For entry, which the client writes, so a client picks its own key and escapes the limit by changing it. Trust only your own proxies: ${setting.fix} (see docs/behind-a-proxy.md). To keep this setting, turn this check off with validate: { trustProxy: false }.`,
          ),
        );
      }
      return !untrusted && !trustsAll;
    });
  }

  if (enabled.has('forwardedAddress')) {
    checks.push(function forwardedAddress(args) {
      const unread = unreadAddressOf(args[0]);
      if (unread === undefined) return false;
      emitWarning(
        new FloodgateWarning(
          WarningCodes.FORWARDED_ADDRESS,
          `${unread.extractor} found no IP address in ${unread.source} (${describe(unread.value)}), so it keyed the request by the connection's address, which every request through that proxy shares. Check what your proxies write there (an IP address, with or without a port) and, for forwardedFor/forwarded, that hops is the number of proxies in front of the app (see docs/behind-a-proxy.md). Turn this check off with validate: { forwardedAddress: false }.`,
        ),
      );
      return true;
    });
  }

  if (enabled.has('singleKey')) checks.push(singleKeyCheck());

  if (checks.length === 0) return undefined;
  return function validate(args, key) {
    for (let i = 0; i < checks.length; i++) {
      if ((checks[i] as (args: Args, key: string) => boolean)(args, key)) checks.splice(i--, 1);
    }
  };
}

/**
 * One key that makes most requests usually means the key does not tell
 * clients apart: every client behind one proxy, or a key function that
 * returns the same value for everyone it cannot identify ('anonymous').
 * Boyer-Moore's majority vote over windows of SINGLE_KEY_WINDOW requests: a
 * candidate and a counter, no allocation. A window ending with the counter at
 * half the window or more proves that the candidate made at least half of its
 * requests; a key making three quarters or more of a window always gets there.
 */
function singleKeyCheck<Args extends unknown[]>(): (args: Args, key: string) => boolean {
  let candidate = '';
  let votes = 0;
  let seen = 0;
  return function singleKey(_args, key) {
    if (votes === 0) {
      candidate = key;
      votes = 1;
    } else votes += key === candidate ? 1 : -1;
    if (++seen < SINGLE_KEY_WINDOW) return false;
    const dominant = votes * 2 >= SINGLE_KEY_WINDOW;
    seen = 0;
    votes = 0;
    if (!dominant) return false;
    emitWarning(
      new FloodgateWarning(
        WarningCodes.SINGLE_KEY,
        `One key, ${describe(candidate)}, made most of the last ${SINGLE_KEY_WINDOW} requests this limiter saw: the key probably does not tell clients apart, and they all share one limit. Behind a proxy, make the framework trust it or use a keyBy preset (see docs/behind-a-proxy.md); with a key function, give each client its own key. If one client making most requests is expected (a load test, a single consumer), turn this check off with validate: { singleKey: false }.`,
      ),
    );
    return true;
  };
}

function parseValidate(options: unknown): Set<ValidationName> {
  if (options === undefined || options === true) return new Set(validationNames);
  if (options === false) return new Set();
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `validate must be true, false or an object like { singleKey: false } that turns single checks off, got ${describe(options)}.`,
    );
  }
  const enabled = new Set<ValidationName>(validationNames);
  for (const [name, value] of Object.entries(options)) {
    if (!(validationNames as readonly string[]).includes(name)) {
      throw new FloodgateError(ErrorCodes.UNKNOWN_OPTION, `validate has no check '${name}'. Known checks: ${validationNames.join(', ')}.`);
    }
    if (typeof value !== 'boolean') throw new FloodgateError(ErrorCodes.OPTION, `validate.${name} must be true or false, got ${describe(value)}.`);
    if (!value) enabled.delete(name as ValidationName);
  }
  return enabled;
}
