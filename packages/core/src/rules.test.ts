import { describe, expect, it } from 'vitest';
import { compileRules, MAX_LIMIT } from './rules.js';

const compile = (rule: object) => compileRules([rule])[0];

describe('compileRules: numbers every rate-limit header can carry', () => {
  it('takes a limit of 15 digits (999_999_999_999_999), and bursts as large as exact arithmetic allows', () => {
    expect(compile({ algorithm: 'fixed-window', limit: MAX_LIMIT, windowMs: 1000 })?.limit).toBe(999_999_999_999_999);
    expect(compile({ algorithm: 'sliding-log', limit: MAX_LIMIT, windowMs: 1000 })?.limit).toBe(MAX_LIMIT);
    expect(compile({ algorithm: 'token-bucket', limit: 1, windowMs: 1, burst: 2 ** 40 })?.burst).toBe(2 ** 40);
  });

  it('rejects a limit of 16 digits with ERR_FG_LIMIT, saying what headers can carry', () => {
    for (const algorithm of ['fixed-window', 'sliding-log', 'concurrency'] as const) {
      expect(() => compile({ algorithm, limit: MAX_LIMIT + 1, windowMs: 1000 })).toThrow(
        expect.objectContaining({
          code: 'ERR_FG_LIMIT',
          message: expect.stringContaining('rules[0].limit must be at most 999_999_999_999_999 (15 digits'),
        }),
      );
    }
    expect(() => compile({ algorithm: 'fixed-window', limit: 1e15, windowMs: 1000 })).toThrow(expect.objectContaining({ code: 'ERR_FG_LIMIT' }));
  });

  it('rejects a burst of 16 digits with ERR_FG_BURST', () => {
    expect(() => compile({ algorithm: 'token-bucket', limit: 1, windowMs: 1, burst: 1e15 })).toThrow(
      expect.objectContaining({ code: 'ERR_FG_BURST', message: expect.stringContaining('rules[0].burst must be at most 999_999_999_999_999') }),
    );
  });
});
