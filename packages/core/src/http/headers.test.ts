import { describe, expect, it } from 'vitest';
import type { Decision } from '../decision.js';
import { createLimiter } from '../limiter.js';
import { compileRule } from '../rules.js';
import { legacyHeaders, rateLimitHeaders, retryAfterSeconds } from './headers.js';

const rules = [compileRule({ name: 'per-minute', limit: 10, windowMs: 60_000 }, 'rule')];
const decision: Decision = {
  allowed: false,
  limit: 10,
  remaining: 0,
  resetMs: 12_345,
  retryAfterMs: 2_001,
  delayMs: 0,
  rule: 'per-minute',
  rules: [],
};
const now = 1_700_000_000_500;

describe('rateLimitHeaders', () => {
  it('legacy: limit, remaining, reset as Unix epoch seconds, and Retry-After on a denial', () => {
    expect(rateLimitHeaders(decision, 'legacy', rules, now, 429)).toEqual([
      ['X-RateLimit-Limit', '10'],
      ['X-RateLimit-Remaining', '0'],
      ['X-RateLimit-Reset', '1700000013'],
      ['Retry-After', '3'],
    ]);
  });

  it('draft-8: RateLimit-Policy and RateLimit for the binding rule', () => {
    expect(rateLimitHeaders({ ...decision, allowed: true, remaining: 4, retryAfterMs: 0 }, 'draft-8', rules, now, undefined)).toEqual([
      ['RateLimit-Policy', '"per-minute";q=10;w=60'],
      ['RateLimit', '"per-minute";r=4;t=13'],
    ]);
  });

  it('both, or none', () => {
    expect(rateLimitHeaders(decision, 'both', rules, now, undefined).map(([name]) => name)).toEqual([
      'X-RateLimit-Limit',
      'X-RateLimit-Remaining',
      'X-RateLimit-Reset',
      'RateLimit-Policy',
      'RateLimit',
    ]);
    expect(rateLimitHeaders(decision, false, rules, now, 429)).toEqual([['Retry-After', '3']]);
  });

  it('sends no Retry-After when the call can never pass', () => {
    expect(rateLimitHeaders({ ...decision, retryAfterMs: Number.POSITIVE_INFINITY }, false, rules, now, 429)).toEqual([]);
  });

  it('sends only Retry-After: 1 when the store failed and the limiter failed closed', async () => {
    const down = () => Promise.reject(new Error('down'));
    const store = { consume: down, peek: down, refund: down, reset: down };
    const closed = createLimiter({ limit: 5, windowMs: 60_000, store, onStoreError: 'deny' });
    const open = createLimiter({ limit: 5, windowMs: 60_000, store, prefix: 'open:' });
    closed.on('error', () => {});
    open.on('error', () => {});
    const failed = await closed.consume('k');
    expect(failed.storeError).toBeDefined();
    expect(rateLimitHeaders(failed, 'both', closed.rules, now, 503)).toEqual([['Retry-After', '1']]);
    expect(rateLimitHeaders(await open.consume('k'), 'both', open.rules, now, undefined)).toEqual([]);
  });

  it('gives a 503 the user chose for denials the real wait and the numbers', () => {
    expect(rateLimitHeaders(decision, 'legacy', rules, now, 503)).toEqual([...legacyHeaders(decision, now), ['Retry-After', '3']]);
  });

  it('Retry-After is whole seconds, rounded up, at least 1', () => {
    expect([1, 999, 1000, 1001, 59_999].map(retryAfterSeconds)).toEqual([1, 1, 1, 2, 60]);
  });
});
