/*
 * problem+json denials with the problem types of
 * draft-ietf-httpapi-ratelimit-headers-10, Section 5 (registered in Section 10.2).
 */
import { describe, expect, it } from 'vitest';
import { createLimiter, type LimiterOptions } from '../index.js';
import type { PolicyReport } from './headers.js';
import { PROBLEM_CONTENT_TYPE, problemResponse, problemTypes, rateLimitProblem } from './problem.js';

function limiterAt(options: LimiterOptions) {
  let now = 0;
  const limiter = createLimiter({ ...options, now: () => now });
  return {
    set: (ms: number) => {
      now = ms;
    },
    report: async (key = 'k', cost = 1): Promise<PolicyReport> => {
      const decidedAt = limiter.now();
      return { decision: await limiter.consume(key, cost === 1 ? undefined : { cost }), rules: limiter.rules, decidedAt };
    },
  };
}

describe('rateLimitProblem', () => {
  it('uses the type URIs the draft registers (Section 10.2)', () => {
    expect(problemTypes).toEqual({
      quotaExceeded: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
      temporaryReducedCapacity: 'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity',
    });
  });

  it('draft-10 Appendix B.1.4, a throttled response: quota-exceeded, status 429, "violated-policies": ["default"]', async () => {
    const { set, report } = limiterAt({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000 });
    await report('k', 100);
    set(55_000);
    expect(problemResponse([await report()], 429)).toEqual({
      contentType: 'application/problem+json',
      body: '{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota Exceeded","status":429,"detail":"Too many requests. Retry in 5 seconds.","violated-policies":["default"]}',
    });
  });

  it('draft-10 Section 5.1: "violated-policies": ["daily","bandwidth"], every rule that denied, in rule order', async () => {
    const { report } = limiterAt({
      rules: [
        { name: 'daily', algorithm: 'fixed-window', limit: 2, windowMs: 86_400_000 },
        { name: 'hourly', algorithm: 'fixed-window', limit: 10, windowMs: 3_600_000 },
        { name: 'bandwidth', algorithm: 'token-bucket', limit: 2, windowMs: 60_000 },
      ],
    });
    await report('k', 2);
    expect(rateLimitProblem([await report()], 429)).toMatchObject({ type: problemTypes.quotaExceeded, 'violated-policies': ['daily', 'bandwidth'] });
  });

  it('names the policies as the RateLimit headers do when several limiters answer', async () => {
    const site = limiterAt({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000 });
    const route = limiterAt({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000 });
    await route.report();
    const reports = [await site.report(), await route.report()];
    expect(rateLimitProblem(reports, 429)['violated-policies']).toEqual(['2:default']);
    expect(rateLimitProblem([reports[0] as PolicyReport, { ...(reports[1] as PolicyReport), label: 'route' }], 429)['violated-policies']).toEqual([
      'route:default',
    ]);
  });

  it('temporary-reduced-capacity for the 503 of a store that failed closed, without violated-policies', async () => {
    const down = () => Promise.reject(new Error('down'));
    const limiter = createLimiter({ limit: 5, windowMs: 60_000, store: { consume: down, peek: down, refund: down, reset: down }, onStoreError: 'deny' });
    limiter.on('error', () => {});
    const failed: PolicyReport = { decision: await limiter.consume('k'), rules: limiter.rules, decidedAt: 0 };
    expect(JSON.parse(problemResponse([failed], 503).body)).toEqual({
      type: 'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity',
      title: 'Temporary Reduced Capacity',
      status: 503,
      detail: 'The rate limiter cannot count requests right now. Retry in 1 second.',
    });
  });

  it('temporary-reduced-capacity when an insurance limiter denied during an outage', async () => {
    const down = () => Promise.reject(new Error('down'));
    const insurance = createLimiter({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000, now: () => 0 });
    const limiter = createLimiter({ limit: 5, windowMs: 60_000, store: { consume: down, peek: down, refund: down, reset: down }, onStoreError: insurance });
    limiter.on('error', () => {});
    await limiter.consume('k');
    const decision = await limiter.consume('k');
    expect([decision.allowed, decision.storeError === undefined]).toEqual([false, false]);
    expect(rateLimitProblem([{ decision, rules: limiter.rules, decidedAt: 0 }], 429)).toEqual({
      type: problemTypes.temporaryReducedCapacity,
      title: 'Temporary Reduced Capacity',
      status: 429,
      detail: 'The rate limiter cannot count requests right now. Retry in 60 seconds.',
    });
  });

  it("takes the detail from the caller (the user's message), and says when a call can never pass", async () => {
    const { report } = limiterAt({ algorithm: 'fixed-window', limit: 10, windowMs: 60_000 });
    expect(rateLimitProblem([await report('k', 11)], 429).detail).toBe(
      'Too many requests. This request is larger than the quota allows and cannot succeed as it is.',
    );
    expect(rateLimitProblem([await report('k', 11)], 429, { detail: 'Slow down' }).detail).toBe('Slow down');
    expect(PROBLEM_CONTENT_TYPE).toBe('application/problem+json');
  });

  it("adds the caller's extension members after the standard ones, never over them", async () => {
    const { report } = limiterAt({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000 });
    await report();
    const extensions = { plans: 'https://example.com/plans', type: 'about:blank', status: 200, 'violated-policies': [] };
    expect(problemResponse([await report()], 429, { extensions }).body).toBe(
      '{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota Exceeded","status":429,"detail":"Too many requests. Retry in 60 seconds.","plans":"https://example.com/plans","violated-policies":["default"]}',
    );
  });
});
