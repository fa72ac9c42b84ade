import { describe, expect, it } from 'vitest';
import { formatDuration, parseDuration } from './duration.js';

describe('parseDuration', () => {
  it('reads a number and a unit, or parts from the largest unit down', () => {
    expect(parseDuration('500ms')).toBe(500);
    expect(parseDuration('30s')).toBe(30_000);
    expect(parseDuration('15m')).toBe(900_000);
    expect(parseDuration('2h')).toBe(7_200_000);
    expect(parseDuration('7d')).toBe(604_800_000);
    expect(parseDuration('1h30m')).toBe(5_400_000);
    expect(parseDuration('1m500ms')).toBe(60_500);
  });

  it.each(['', '15', '1.5m', '15 m', ' 15m', '-5m', '15min', '30s15m', '1m1m', '0s', '0m0s', 'm', '1e3ms', '15M'])(
    'refuses %j with ERR_FG_DURATION',
    (text) => {
      expect(() => parseDuration(text)).toThrow(expect.objectContaining({ code: 'ERR_FG_DURATION', exitCode: 2 }));
    },
  );

  it('refuses a duration too long to be exact', () => {
    expect(() => parseDuration('999999999999999d')).toThrow(/too long/);
  });
});

describe('formatDuration', () => {
  it('shows the two largest units, rounded up to the second', () => {
    expect(formatDuration(899_375)).toBe('15m');
    expect(formatDuration(898_718)).toBe('14m 59s');
    expect(formatDuration(86_400_000 + 3 * 3_600_000)).toBe('1d 3h');
    expect(formatDuration(350)).toBe('350ms');
    expect(formatDuration(0)).toBe('0s');
    expect(formatDuration(Number.POSITIVE_INFINITY)).toBe('never');
  });
});
