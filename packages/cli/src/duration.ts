import { CliError, CliErrorCodes, ExitCodes } from './errors.js';

const UNITS = { d: 86_400_000, h: 3_600_000, m: 60_000, s: 1_000, ms: 1 } as const;
const ORDER = Object.keys(UNITS) as (keyof typeof UNITS)[];

/**
 * A duration as an operator types it, in ms: `500ms`, `30s`, `15m`, `2h`, `7d`, or parts of them
 * from the largest unit down (`1h30m`, `2m30s`). Strict: every part needs its unit (a bare `15`
 * could mean seconds or minutes), no decimals, no signs, no spaces, each unit at most once; the
 * total is a positive whole number of ms. Anything else is `ERR_FG_DURATION`.
 *
 * @example
 * ```ts
 * parseDuration('15m'); // 900000
 * parseDuration('1h30m'); // 5400000
 * ```
 */
export function parseDuration(text: string): number {
  const fail = (why: string) =>
    new CliError(CliErrorCodes.DURATION, `'${text}' is not a duration: ${why}. Write a number and a unit: 500ms, 30s, 15m, 2h, 7d, or 1h30m.`, ExitCodes.USAGE);
  if (typeof text !== 'string' || text === '') throw fail('it is empty');
  const parts = /^(?:\d+(?:ms|s|m|h|d))+$/.test(text) ? text.match(/\d+(?:ms|s|m|h|d)/g) : null;
  if (parts === null) throw fail(/^\d+$/.test(text) ? 'it has no unit' : 'it is not digits followed by a unit');
  let total = 0;
  let last = -1;
  for (const part of parts) {
    const unit = /(ms|s|m|h|d)$/.exec(part)?.[1] as keyof typeof UNITS;
    const at = ORDER.indexOf(unit);
    if (at <= last) throw fail('its units must go from the largest down, each at most once');
    last = at;
    total += Number(part.slice(0, -unit.length)) * UNITS[unit];
  }
  if (!Number.isSafeInteger(total)) throw fail('it is too long');
  if (total < 1) throw fail('it must be longer than 0');
  return total;
}

/** ms as a person reads them, rounded up to the second: `14m 59s`, `2h`, `1d 3h`; below a second, `350ms`. */
export function formatDuration(ms: number): string {
  if (ms === Number.POSITIVE_INFINITY) return 'never';
  if (!Number.isFinite(ms) || ms <= 0) return '0s';
  if (ms < 1_000) return `${Math.ceil(ms)}ms`;
  const rounded = Math.ceil(ms / 1_000) * 1_000;
  const first = ORDER.findIndex((unit) => rounded >= UNITS[unit]);
  const unit = ORDER[first] as keyof typeof UNITS;
  const whole = Math.floor(rounded / UNITS[unit]);
  const next = ORDER[first + 1];
  const rest = next === undefined || next === 'ms' ? 0 : Math.floor((rounded - whole * UNITS[unit]) / UNITS[next]);
  return rest > 0 ? `${whole}${unit} ${rest}${next}` : `${whole}${unit}`;
}
