/*
 * Exact bytes of every headers mode. Where a draft shows an example, the test
 * rebuilds it from a real limiter and quotes it with its section:
 *   draft-06: draft-ietf-httpapi-ratelimit-headers-06
 *   draft-07: draft-ietf-httpapi-ratelimit-headers-07
 *   draft-08: draft-ietf-httpapi-ratelimit-headers-08
 *   draft-10: draft-ietf-httpapi-ratelimit-headers-10
 * Lists are serialized as RFC 9651 (Section 4.1.1) does, items joined by ", ";
 * the drafts' examples write some lists with "," alone, which parses the same.
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type RuleState, step } from '../algorithms/index.js';
import type { Decision } from '../decision.js';
import { createLimiter, type Limiter } from '../limiter.js';
import { type AlgorithmName, compileRule, compileRules, MAX_LIMIT } from '../rules.js';
import type { RuleDecision } from '../stores/types.js';
import { algorithmNames, ruleAndTrace } from '../test-support/arbitraries.js';
import {
  type HeadersMode,
  headersModes,
  legacyHeaders,
  moreQuotaMs,
  type PolicyReport,
  partitionKeys,
  policyNames,
  rateLimitHeaders,
  retryAfterSeconds,
  sfString,
} from './headers.js';

function manualClock(start = 0) {
  let now = start;
  return { now: () => now, advance: (ms: number) => (now += ms), set: (ms: number) => (now = ms) };
}

/** A limiter on a manual clock whose calls come back as reports, as the request flow builds them. */
function limiterAt(options: Parameters<typeof createLimiter>[0], start = 0) {
  const clock = manualClock(start);
  const limiter: Limiter = createLimiter({ ...options, now: clock.now });
  const report = async (key = 'k', cost = 1, extra: Partial<PolicyReport> = {}): Promise<PolicyReport> => {
    const decidedAt = limiter.now();
    const decision = await limiter.consume(key, cost === 1 ? undefined : { cost });
    return { decision, rules: limiter.rules, decidedAt, ...extra };
  };
  const peek = async (key = 'k'): Promise<PolicyReport> => ({ decision: await limiter.peek(key), rules: limiter.rules, decidedAt: limiter.now() });
  return { clock, limiter, report, peek };
}

const headerMap = (headers: readonly (readonly [string, string])[]) => Object.fromEntries(headers);

const rules = [compileRule({ name: 'per-minute', limit: 10, windowMs: 60_000 }, 'rule')];
const denied: Decision = {
  allowed: false,
  limit: 10,
  remaining: 0,
  resetMs: 12_345,
  retryAfterMs: 2_001,
  delayMs: 0,
  rule: 'per-minute',
  rules: [{ name: 'per-minute', scope: 'key', allowed: false, limit: 10, remaining: 0, resetMs: 12_345, retryAfterMs: 2_001, delayMs: 0 }],
};
const now = 1_700_000_000_500;
const deniedReport: PolicyReport = { decision: denied, rules, decidedAt: now };

describe('rateLimitHeaders: legacy', () => {
  it('limit, remaining, reset as Unix epoch seconds, and Retry-After on a denial', () => {
    expect(rateLimitHeaders([deniedReport], 'legacy', 429)).toEqual([
      ['X-RateLimit-Limit', '10'],
      ['X-RateLimit-Remaining', '0'],
      ['X-RateLimit-Reset', '1700000013'],
      ['Retry-After', '3'],
    ]);
  });

  it('gives a 503 the user chose for denials the real wait and the numbers', () => {
    expect(rateLimitHeaders([deniedReport], 'legacy', 503)).toEqual([...legacyHeaders(denied, now), ['Retry-After', '3']]);
  });

  it('the one-decision form the flow used before stacked limiters gives the same bytes in every mode', () => {
    for (const mode of headersModes) {
      for (const status of [undefined, 429]) {
        expect(rateLimitHeaders(denied, mode, rules, now, status)).toEqual(rateLimitHeaders([deniedReport], mode, status));
      }
    }
  });
});

describe('rateLimitHeaders: draft-6 (RateLimit-Policy, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset)', () => {
  it('draft-06 Appendix A.2.1: "RateLimit-Limit: 100 / RateLimit-Policy: 100;w=60 / Ratelimit-Remaining: 99 / Ratelimit-Reset: 50"', async () => {
    const { clock, report } = limiterAt({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000 });
    clock.set(10_000); // 50 s left in the window
    expect(rateLimitHeaders([await report()], 'draft-6', undefined)).toEqual([
      ['RateLimit-Policy', '100;w=60'],
      ['RateLimit-Limit', '100'],
      ['RateLimit-Remaining', '99'],
      ['RateLimit-Reset', '50'],
    ]);
  });

  it('draft-06 Appendix A.1.4, a throttled response: "Retry-After: <5 s later> / RateLimit-Reset: 5 / RateLimit-Limit: 100 / Ratelimit-Remaining: 0"', async () => {
    const { clock, report } = limiterAt({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000 });
    await report('k', 100);
    clock.set(55_000);
    expect(headerMap(rateLimitHeaders([await report()], 'draft-6', 429))).toEqual({
      'RateLimit-Policy': '100;w=60',
      'RateLimit-Limit': '100',
      'RateLimit-Remaining': '0',
      'RateLimit-Reset': '5',
      'Retry-After': '5',
    });
  });

  it('on a denial, RateLimit-Reset names the moment Retry-After names (draft-06 Section 4: "SHOULD reference the same point in time")', async () => {
    // A token bucket is full again in 60 s, but one token comes back in 6 s.
    const { report } = limiterAt({ algorithm: 'token-bucket', limit: 10, windowMs: 60_000 });
    await report('k', 10);
    const headers = headerMap(rateLimitHeaders([await report()], 'draft-6', 429));
    expect([headers['RateLimit-Reset'], headers['Retry-After']]).toEqual(['6', '6']);
    const allowed = headerMap(
      rateLimitHeaders([await limiterAt({ algorithm: 'token-bucket', limit: 10, windowMs: 60_000 }).report('k', 4)], 'draft-6', undefined),
    );
    expect(allowed['RateLimit-Reset']).toBe('24'); // allowed: seconds until the quota is back to full
  });
});

describe('rateLimitHeaders: draft-7 (RateLimit: limit, remaining, reset)', () => {
  it('draft-07 Appendix A.2.1: "RateLimit: limit=100, remaining=99, reset=50 / RateLimit-Policy: 100;w=60"', async () => {
    const { clock, report } = limiterAt({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000 });
    clock.set(10_000);
    expect(rateLimitHeaders([await report()], 'draft-7', undefined)).toEqual([
      ['RateLimit-Policy', '100;w=60'],
      ['RateLimit', 'limit=100, remaining=99, reset=50'],
    ]);
  });

  it('draft-07 Section 3.5: "RateLimit-Policy: 100;w=10 / RateLimit: limit=100, remaining=50, reset=5"', async () => {
    const { clock, report } = limiterAt({ algorithm: 'fixed-window', limit: 100, windowMs: 10_000 });
    clock.set(5_000);
    expect(rateLimitHeaders([await report('k', 50)], 'draft-7', undefined)).toEqual([
      ['RateLimit-Policy', '100;w=10'],
      ['RateLimit', 'limit=100, remaining=50, reset=5'],
    ]);
  });

  it('draft-07 Appendix A.1.4, a throttled response: "RateLimit: limit=100, remaining=0, reset=5" with Retry-After 5 s later', async () => {
    const { clock, report } = limiterAt({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000 });
    await report('k', 100);
    clock.set(55_000);
    expect(headerMap(rateLimitHeaders([await report()], 'draft-7', 429))).toEqual({
      'RateLimit-Policy': '100;w=60',
      RateLimit: 'limit=100, remaining=0, reset=5',
      'Retry-After': '5',
    });
  });
});

describe('rateLimitHeaders: draft-8 (each limiter\'s binding rule: "<rule>";q=;w= and "<rule>";r=;t=)', () => {
  it('RateLimit-Policy and RateLimit for the binding rule, t = seconds until the rule is back to full capacity', () => {
    const allowed = { ...denied, allowed: true, remaining: 4, retryAfterMs: 0 };
    expect(rateLimitHeaders([{ decision: allowed, rules, decidedAt: now }], 'draft-8', undefined)).toEqual([
      ['RateLimit-Policy', '"per-minute";q=10;w=60'],
      ['RateLimit', '"per-minute";r=4;t=13'],
    ]);
  });

  it('draft-08 Sections 3.2 and 4.2: "RateLimit-Policy: "default";q=100;w=10" and "RateLimit: "default";r=50;t=30"', async () => {
    const policy = limiterAt({ algorithm: 'fixed-window', limit: 100, windowMs: 10_000 });
    expect(rateLimitHeaders([await policy.report()], 'draft-8', undefined)[0]).toEqual(['RateLimit-Policy', '"default";q=100;w=10']);
    const limit = limiterAt({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000 });
    limit.clock.set(30_000);
    expect(rateLimitHeaders([await limit.report('k', 50)], 'draft-8', undefined)[1]).toEqual(['RateLimit', '"default";r=50;t=30']);
  });

  it('draft-08 Section 3.2, several policies: "RateLimit-Policy: "permin";q=50;w=60,"perhr";q=1000;w=3600" (a site-wide and a route limiter)', async () => {
    const perMinute = limiterAt({ rules: [{ name: 'permin', algorithm: 'fixed-window', limit: 50, windowMs: 60_000 }] });
    const perHour = limiterAt({ rules: [{ name: 'perhr', algorithm: 'fixed-window', limit: 1000, windowMs: 3_600_000 }] });
    expect(rateLimitHeaders([await perMinute.report(), await perHour.report()], 'draft-8', undefined)).toEqual([
      ['RateLimit-Policy', '"permin";q=50;w=60, "perhr";q=1000;w=3600'],
      ['RateLimit', '"permin";r=49;t=60, "perhr";r=999;t=3600'],
    ]);
  });

  it('lists one policy per limiter, its binding rule, as draft-8 always did', async () => {
    const sms = limiterAt({
      rules: [
        { name: 'per-minute', algorithm: 'fixed-window', limit: 1, windowMs: 60_000 },
        { name: 'per-hour', algorithm: 'fixed-window', limit: 5, windowMs: 3_600_000 },
      ],
    });
    expect(rateLimitHeaders([await sms.report()], 'draft-8', undefined)).toEqual([
      ['RateLimit-Policy', '"per-minute";q=1;w=60'],
      ['RateLimit', '"per-minute";r=0;t=60'],
    ]);
  });

  it('draft-08 Appendix B.1.4, a throttled response: "Retry-After: <5 s later> / RateLimit: "default";r=0;t=5"', async () => {
    // A token bucket of 12 a minute: empty, one token comes back in 5 s, full again in 60 s.
    const { report } = limiterAt({ algorithm: 'token-bucket', limit: 12, windowMs: 60_000 });
    await report('k', 12);
    expect(headerMap(rateLimitHeaders([await report()], 'draft-8', 429))).toEqual({
      'RateLimit-Policy': '"default";q=12;w=60',
      RateLimit: '"default";r=0;t=5',
      'Retry-After': '5',
    });
  });

  it('both: legacy, then draft-8; false: none, and Retry-After stays', () => {
    expect(rateLimitHeaders([deniedReport], 'both', undefined).map(([name]) => name)).toEqual([
      'X-RateLimit-Limit',
      'X-RateLimit-Remaining',
      'X-RateLimit-Reset',
      'RateLimit-Policy',
      'RateLimit',
    ]);
    expect(rateLimitHeaders([deniedReport], false, 429)).toEqual([['Retry-After', '3']]);
  });
});

describe('rateLimitHeaders: draft-10 (every rule; t = seconds until more quota; pk; qu)', () => {
  it('draft-10 Appendix B.2.1: "RateLimit: "fixedwindow";r=99;t=50 / RateLimit-Policy: "fixedwindow";q=100;w=60"', async () => {
    const { clock, report } = limiterAt({ rules: [{ name: 'fixedwindow', algorithm: 'fixed-window', limit: 100, windowMs: 60_000 }] });
    clock.set(10_000);
    expect(rateLimitHeaders([await report()], 'draft-10', undefined)).toEqual([
      ['RateLimit-Policy', '"fixedwindow";q=100;w=60'],
      ['RateLimit', '"fixedwindow";r=99;t=50'],
    ]);
  });

  it('draft-10 Appendix B.1.3: after 2 s and 40 units, "RateLimit-Policy: "basic";q=100;w=60 / RateLimit: "basic";r=60;t=58"', async () => {
    const { clock, report } = limiterAt({ rules: [{ name: 'basic', algorithm: 'fixed-window', limit: 100, windowMs: 60_000 }] });
    clock.set(2_000);
    expect(rateLimitHeaders([await report('k', 40)], 'draft-10', undefined)).toEqual([
      ['RateLimit-Policy', '"basic";q=100;w=60'],
      ['RateLimit', '"basic";r=60;t=58'],
    ]);
  });

  it('draft-10 Appendix B.1.4, a throttled response: "Retry-After: <5 s later> / RateLimit: "default";r=0;t=5"', async () => {
    const { clock, report } = limiterAt({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000 });
    await report('k', 100);
    clock.set(55_000);
    expect(headerMap(rateLimitHeaders([await report()], 'draft-10', 429))).toEqual({
      'RateLimit-Policy': '"default";q=100;w=60',
      RateLimit: '"default";r=0;t=5',
      'Retry-After': '5',
    });
  });

  it('draft-10 Appendix B.2.5, several windows: "RateLimit-Policy: "hour";q=1000;w=3600, "day";q=5000;w=86400" and "day";r=100;t=36000', async () => {
    const hour = 3_600_000;
    const { clock, report } = limiterAt({
      rules: [
        { name: 'hour', algorithm: 'fixed-window', limit: 1000, windowMs: hour },
        { name: 'day', algorithm: 'fixed-window', limit: 5000, windowMs: 24 * hour },
      ],
    });
    for (let h = 0; h < 13; h++) {
      clock.set(h * hour);
      await report('k', 350);
    }
    clock.set(14 * hour); // 4900 units in 14 hours, 10 hours left in the day
    expect(rateLimitHeaders([await report('k', 350)], 'draft-10', undefined)).toEqual([
      ['RateLimit-Policy', '"hour";q=1000;w=3600, "day";q=5000;w=86400'],
      ['RateLimit', '"hour";r=650;t=3600, "day";r=100;t=36000'],
    ]);
  });

  it('draft-10 Section 3.2, a partition key and a quota unit: "RateLimit-Policy: "peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:"', async () => {
    const { report } = limiterAt({ rules: [{ name: 'peruser', algorithm: 'fixed-window', limit: 65_535, windowMs: 10_000 }] });
    const policy = rateLimitHeaders([await report('k', 1, { quotaUnit: 'content-bytes', partitionKeys: { key: 'sdfjLJUOUH==' } })], 'draft-10', undefined);
    expect(policy).toEqual([
      ['RateLimit-Policy', '"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:'],
      ['RateLimit', '"peruser";r=65534;t=10;pk=:sdfjLJUOUH==:'],
    ]);
  });

  it('draft-10 Section 4.2, "RateLimit: "default";r=999;pk=:dHJpYWwxMjEzMjM=:": no t while the quota is full (no more can come)', async () => {
    const { peek } = limiterAt({ algorithm: 'sliding-log', limit: 999, windowMs: 60_000 });
    const full = { ...(await peek()), partitionKeys: { key: 'dHJpYWwxMjEzMjM=' } };
    expect(rateLimitHeaders([full], 'draft-10', undefined)[1]).toEqual(['RateLimit', '"default";r=999;pk=:dHJpYWwxMjEzMjM=:']);
    expect(rateLimitHeaders([full], 'draft-8', undefined)[1]).toEqual(['RateLimit', '"default";r=999;t=0']);
  });

  it('lists every rule of every limiter, named uniquely', async () => {
    const site = limiterAt({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000 });
    const sms = limiterAt({
      rules: [
        { name: 'default', algorithm: 'fixed-window', limit: 1, windowMs: 60_000 },
        { name: 'per-day', algorithm: 'fixed-window', limit: 10, windowMs: 86_400_000 },
      ],
    });
    expect(rateLimitHeaders([await site.report(), await sms.report()], 'draft-10', undefined)).toEqual([
      ['RateLimit-Policy', '"default";q=100;w=60, "2:default";q=1;w=60, "per-day";q=10;w=86400'],
      ['RateLimit', '"default";r=99;t=60, "2:default";r=0;t=60, "per-day";r=9;t=86400'],
    ]);
  });

  it('a concurrency rule: qu="concurrent-requests", and no w (its windowMs is how long a lease lives)', async () => {
    const { report } = limiterAt({ rules: [{ name: 'in-flight', algorithm: 'concurrency', limit: 10, windowMs: 30_000 }] });
    expect(rateLimitHeaders([await report('k', 3)], 'draft-10', undefined)).toEqual([
      ['RateLimit-Policy', '"in-flight";q=10;qu="concurrent-requests"'],
      ['RateLimit', '"in-flight";r=7;t=30'],
    ]);
  });
});

describe('t: seconds until more quota (draft-10) or until full capacity (draft-8), and on a denial the Retry-After wait, for every algorithm', () => {
  // limit 10 per 60 s; at 15 s a call of cost 3 on an empty key.
  const cases: [AlgorithmName, draft10: string, draft8: string, why: string][] = [
    ['fixed-window', '"default";r=7;t=45', '"default";r=7;t=45', 'the window ends in 45 s and gives everything back at once'],
    ['token-bucket', '"default";r=7;t=6', '"default";r=7;t=18', 'a token comes back every 6 s; full after 18 s'],
    ['leaky-bucket', '"default";r=7;t=6', '"default";r=7;t=18', 'drains one unit every 6 s'],
    ['gcra', '"default";r=7;t=6', '"default";r=7;t=18', 'one emission interval is 6 s'],
    ['sliding-window', '"default";r=7;t=105', '"default";r=7;t=105', 'an upper bound: units leave as the window slides'],
    ['sliding-log', '"default";r=7;t=60', '"default";r=7;t=60', 'an upper bound: each call leaves 60 s after it came'],
    ['concurrency', '"default";r=7;t=60', '"default";r=7;t=60', 'an upper bound: leases end when released, at the latest in 60 s'],
  ];
  it.each(cases)('%s: draft-10 %s, draft-8 %s (%s)', async (algorithm, draft10, draft8) => {
    const { clock, report } = limiterAt({ algorithm, limit: 10, windowMs: 60_000 });
    clock.set(15_000);
    const r = await report('k', 3);
    expect(headerMap(rateLimitHeaders([r], 'draft-10', undefined)).RateLimit).toBe(draft10);
    expect(headerMap(rateLimitHeaders([r], 'draft-8', undefined)).RateLimit).toBe(draft8);
  });

  it.each(algorithmNames)('%s: on a denial, t is the wait Retry-After names (draft-10 Section 6: Retry-After never earlier than t)', async (algorithm) => {
    const { report } = limiterAt({ algorithm, limit: 10, windowMs: 60_000 }, 15_000);
    await report('k', 10);
    const headers = headerMap(rateLimitHeaders([await report()], 'draft-10', 429));
    expect(headers.RateLimit).toMatch(/^"default";r=0;t=\d+$/);
    expect(headers.RateLimit?.split('t=')[1]).toBe(headers['Retry-After']);
  });

  it.each(algorithmNames)(
    '%s: on a denial, draft-8 t is the wait Retry-After names (draft-08 Section 5: "SHOULD reference the same point in time")',
    async (algorithm) => {
      const { report } = limiterAt({ algorithm, limit: 10, windowMs: 60_000 }, 15_000);
      await report('k', 10);
      const headers = headerMap(rateLimitHeaders([await report()], 'draft-8', 429));
      expect(headers.RateLimit).toMatch(/^"default";r=0;t=\d+$/);
      expect(headers.RateLimit?.split('t=')[1]).toBe(headers['Retry-After']);
    },
  );

  /** What one rule says about a call, from the pure algorithm's verdict. */
  const asDecision = (verdict: ReturnType<typeof step>['verdict'], rule: { name: string; limit: number }): RuleDecision => ({
    name: rule.name,
    scope: 'key',
    allowed: verdict.allowed,
    limit: rule.limit,
    remaining: verdict.remaining,
    resetMs: verdict.resetMs,
    retryAfterMs: verdict.retryAfterMs,
    delayMs: verdict.delayMs,
  });

  it.each(algorithmNames)('%s: after t, more than r units are there; t is left out only at full capacity; exact for windows and meters', (algorithm) => {
    fc.assert(
      fc.property(ruleAndTrace(algorithm, 25), ({ rule, steps, start }) => {
        let state: RuleState = null;
        let at = start;
        for (const { gap, cost } of steps) {
          at += gap;
          const { verdict, state: after } = step(rule, state, at, cost);
          state = after;
          const decision = asDecision(verdict, rule);
          const t = moreQuotaMs(decision, rule);
          const available = (ms: number) => step(rule, state, at + ms, 1).verdict.remainingNow;
          if (t === undefined) {
            expect(decision.remaining).toBe(rule.capacity);
            continue;
          }
          expect(available(Math.ceil(t))).toBeGreaterThan(decision.remaining);
          if (!decision.allowed) continue;
          if (algorithm === 'fixed-window' && t > 0) expect(available(t - 1)).toBe(decision.remaining);
          // Meters: derived from resetMs, which the algorithm rounds up to a whole ms: at most 1 ms late.
          if (['token-bucket', 'leaky-bucket', 'gcra'].includes(algorithm) && t >= 2) expect(available(Math.ceil(t) - 2)).toBe(decision.remaining);
        }
      }),
      { numRuns: 150 },
    );
  });
});

describe('several limiters in one response', () => {
  const site = () => limiterAt({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000 });
  const route = () => limiterAt({ algorithm: 'fixed-window', limit: 5, windowMs: 10_000 });

  it('legacy, draft-6 and draft-7 show the most restrictive limiter: the fewest remaining when both admit', async () => {
    const reports = [await site().report(), await route().report()];
    expect(rateLimitHeaders(reports, 'legacy', undefined)).toEqual([
      ['X-RateLimit-Limit', '5'],
      ['X-RateLimit-Remaining', '4'],
      ['X-RateLimit-Reset', '10'],
    ]);
    expect(headerMap(rateLimitHeaders(reports, 'draft-7', undefined))).toEqual({ 'RateLimit-Policy': '5;w=10', RateLimit: 'limit=5, remaining=4, reset=10' });
    expect(headerMap(rateLimitHeaders(reports.reverse(), 'draft-6', undefined))['RateLimit-Limit']).toBe('5');
  });

  it('the denying limiter over one that admits, and of two that deny the longer wait, for the numbers and Retry-After', async () => {
    const first = site();
    await first.report('k', 99);
    const second = route();
    await second.report('k', 5);
    const admits = await first.report(); // remaining 0, admitted
    const deniesFor10s = await second.report();
    expect(rateLimitHeaders([admits, deniesFor10s], 'legacy', 429)).toEqual([
      ['X-RateLimit-Limit', '5'],
      ['X-RateLimit-Remaining', '0'],
      ['X-RateLimit-Reset', '10'],
      ['Retry-After', '10'],
    ]);
    const deniesFor60s = await first.report();
    expect(headerMap(rateLimitHeaders([deniesFor10s, deniesFor60s], 'legacy', 429))).toMatchObject({ 'X-RateLimit-Limit': '100', 'Retry-After': '60' });
  });

  it('draft-8 and draft-10 list each limiter; a rule name taken by an earlier limiter becomes <label>:<rule>, or <position>:<rule>', async () => {
    const reports = [await site().report(), await route().report()];
    expect(rateLimitHeaders(reports, 'draft-8', undefined)).toEqual([
      ['RateLimit-Policy', '"default";q=100;w=60, "2:default";q=5;w=10'],
      ['RateLimit', '"default";r=99;t=60, "2:default";r=4;t=10'],
    ]);
    const labelled = [reports[0] as PolicyReport, { ...(reports[1] as PolicyReport), label: 'sms' }];
    expect(headerMap(rateLimitHeaders(labelled, 'draft-10', undefined)).RateLimit).toBe('"default";r=99;t=60, "sms:default";r=4;t=10');
  });

  describe('of different headers modes (issue #29.6)', () => {
    /** A site-wide limiter that admits (99 left of 100 a minute) and a route limiter that denies (5 per 10 s, for 10 s more), each with its mode. */
    async function siteAndRoute(siteMode: HeadersMode, routeMode: HeadersMode): Promise<[PolicyReport, PolicyReport]> {
      const second = route();
      await second.report('k', 5);
      return [await site().report('k', 1, { headers: siteMode }), await second.report('k', 1, { headers: routeMode })];
    }

    /** The fields a response ends up with when each limiter sets its headers in turn, a later one overwriting a field of the same name. */
    const written = (...writes: (readonly (readonly [string, string])[])[]) => Object.assign({}, ...writes.map(headerMap));

    it('examples/express-basic, a site-wide "both" and a route "legacy" that denies: every field describes the route limiter, RateLimit included', async () => {
      const [siteReport, routeReport] = await siteAndRoute('both', 'legacy');
      const siteWrites = rateLimitHeaders([siteReport], 'both', undefined);
      const routeWrites = rateLimitHeaders([siteReport, routeReport], 'legacy', 429);
      expect(routeWrites).toEqual([
        ['X-RateLimit-Limit', '5'],
        ['X-RateLimit-Remaining', '0'],
        ['X-RateLimit-Reset', '10'],
        ['RateLimit-Policy', '"default";q=100;w=60, "2:default";q=5;w=10'],
        ['RateLimit', '"default";r=99;t=60, "2:default";r=0;t=10'],
        ['Retry-After', '10'],
      ]);
      // What the client reads: nothing is left of the site limiter's view alone (RateLimit: "default";r=99;t=60).
      expect(written(siteWrites, routeWrites)).toEqual(headerMap(routeWrites));
    });

    it('every pair of modes, either order of writing: the same fields, none left over from an earlier limiter, each about the limiter that denies', async () => {
      /** What each field says about the route limiter (5 per 10 s, denied for 10 s): the most restrictive. */
      const aboutTheRoute: Record<string, (value: string) => boolean> = {
        'X-RateLimit-Limit': (v) => v === '5',
        'X-RateLimit-Remaining': (v) => v === '0',
        'X-RateLimit-Reset': (v) => v === '10',
        'RateLimit-Limit': (v) => v === '5',
        'RateLimit-Remaining': (v) => v === '0',
        'RateLimit-Reset': (v) => v === '10',
        // draft-6/7: the route's policy alone; draft-8/10: a list with each limiter, the route's item among them.
        'RateLimit-Policy': (v) => v === '5;w=10' || v.includes('"2:default";q=5;w=10'),
        RateLimit: (v) => v === 'limit=5, remaining=0, reset=10' || v.includes('"2:default";r=0;t=10'),
        'Retry-After': (v) => v === '10',
      };
      for (const siteMode of headersModes) {
        for (const routeMode of headersModes) {
          const [siteReport, routeReport] = await siteAndRoute(siteMode, routeMode);
          const both = [siteReport, routeReport];
          const siteWrites = rateLimitHeaders([siteReport], siteMode, undefined);
          const routeWrites = rateLimitHeaders(both, routeMode, 429);
          const pair = `site ${siteMode}, route ${routeMode}`;
          // Express, Koa, Hono, Fastify, NestJS: the site limiter writes, then the route limiter.
          expect(written(siteWrites, routeWrites), pair).toEqual(headerMap(routeWrites));
          // fetch: the site limiter writes again once the route's handler has answered.
          expect(written(routeWrites, rateLimitHeaders(both, siteMode, undefined)), pair).toEqual(headerMap(routeWrites));
          for (const [name, value] of routeWrites) expect(aboutTheRoute[name]?.(value), `${pair}: ${name}: ${value}`).toBe(true);
          const asked = [siteMode, routeMode].filter((mode) => mode !== false).length;
          expect(routeWrites.length > 1, pair).toBe(asked > 0);
        }
      }
    });

    it('admitted by both: one-set fields show the one with the fewest remaining, whichever limiter asked for them', async () => {
      const reports = [await site().report('k', 1, { headers: 'legacy' }), await route().report('k', 1, { headers: 'draft-8' })];
      expect(headerMap(rateLimitHeaders(reports, 'draft-8', undefined))).toEqual({
        'X-RateLimit-Limit': '5',
        'X-RateLimit-Remaining': '4',
        'X-RateLimit-Reset': '10',
        'RateLimit-Policy': '"default";q=100;w=60, "2:default";q=5;w=10',
        RateLimit: '"default";r=99;t=60, "2:default";r=4;t=10',
      });
    });

    it('a field two modes write in different formats (RateLimit-Policy, RateLimit) takes the format of the limiter that decided last', async () => {
      const eightThenSeven = [await site().report('k', 1, { headers: 'draft-8' }), await route().report('k', 1, { headers: 'draft-7' })];
      expect(headerMap(rateLimitHeaders(eightThenSeven, 'draft-7', undefined))).toEqual({
        'RateLimit-Policy': '5;w=10',
        RateLimit: 'limit=5, remaining=4, reset=10',
      });
      const sevenThenEight = [await site().report('k', 1, { headers: 'draft-7' }), await route().report('k', 1, { headers: 'draft-8' })];
      expect(headerMap(rateLimitHeaders(sevenThenEight, 'draft-7', undefined))).toEqual({
        'RateLimit-Policy': '"default";q=100;w=60, "2:default";q=5;w=10',
        RateLimit: '"default";r=99;t=60, "2:default";r=4;t=10',
      });
      const sixThenTen = [await site().report('k', 1, { headers: 'draft-6' }), await route().report('k', 1, { headers: 'draft-10' })];
      expect(headerMap(rateLimitHeaders(sixThenTen, 'draft-10', undefined))).toEqual({
        'RateLimit-Limit': '5',
        'RateLimit-Remaining': '4',
        'RateLimit-Reset': '10',
        'RateLimit-Policy': '"default";q=100;w=60, "2:default";q=5;w=10',
        RateLimit: '"default";r=99;t=60, "2:default";r=4;t=10',
      });
    });

    it('headers: false asks for no field, yet a limiter with it counts in the fields the others ask for', async () => {
      const [siteReport, routeReport] = await siteAndRoute('draft-8', false);
      expect(rateLimitHeaders([siteReport, routeReport], false, 429)).toEqual([
        ['RateLimit-Policy', '"default";q=100;w=60, "2:default";q=5;w=10'],
        ['RateLimit', '"default";r=99;t=60, "2:default";r=0;t=10'],
        ['Retry-After', '10'],
      ]);
      expect(rateLimitHeaders([{ ...routeReport, headers: false }], false, 429)).toEqual([['Retry-After', '10']]);
    });
  });

  it("names stay unique whatever the labels: two limiters labelled alike, and a label that is another limiter's position", () => {
    const one = [compileRule({ name: 'default', limit: 1, windowMs: 1000 }, 'rule')];
    const of = (label?: string): PolicyReport => ({ decision: denied, rules: one, decidedAt: 0, ...(label === undefined ? {} : { label }) });
    expect(policyNames([of(), of('a'), of('a'), of(), of('4')])).toEqual([['default'], ['a:default'], ['a:default#2'], ['4:default'], ['4:default#2']]);
  });

  it('a limiter whose store failed adds no numbers, only its Retry-After', async () => {
    const down = () => Promise.reject(new Error('down'));
    const store = { consume: down, peek: down, refund: down, reset: down };
    const closed = createLimiter({ limit: 5, windowMs: 60_000, store, onStoreError: 'deny' });
    closed.on('error', () => {});
    const failed: PolicyReport = { decision: await closed.consume('k'), rules: closed.rules, decidedAt: now };
    const healthy = await site().report();
    for (const mode of ['legacy', 'draft-6', 'draft-7', 'draft-8', 'draft-10', 'both'] as const) {
      expect(rateLimitHeaders([failed], mode, 503)).toEqual([['Retry-After', '1']]);
      expect(rateLimitHeaders([healthy, failed], mode, 503)).toEqual([...rateLimitHeaders([healthy], mode, undefined), ['Retry-After', '1']]);
    }
    const open = createLimiter({ limit: 5, windowMs: 60_000, store, prefix: 'open:' });
    open.on('error', () => {});
    expect(rateLimitHeaders([{ decision: await open.consume('k'), rules: open.rules, decidedAt: now }], 'both', undefined)).toEqual([]);
  });
});

describe('structured-field validity', () => {
  it('names are sf-strings: " and \\ escaped, anything outside printable ASCII replaced', () => {
    expect(sfString('a"b\\c')).toBe('"a\\"b\\\\c"');
    expect(sfString('zürich\n')).toBe('"z?rich?"');
    const one = [compileRule({ name: 'default', limit: 1, windowMs: 1000 }, 'rule')];
    const allowed = { ...denied, allowed: true, limit: 1, remaining: 0, resetMs: 1000, retryAfterMs: 0, rule: 'default' };
    const reports: PolicyReport[] = [
      { decision: allowed, rules: one, decidedAt: 0 },
      { decision: allowed, rules: one, decidedAt: 0, label: 'api "v2" \\ zürich' },
    ];
    expect(rateLimitHeaders(reports, 'draft-8', undefined)[0]).toEqual(['RateLimit-Policy', '"default";q=1;w=1, "api \\"v2\\" \\\\ z?rich:default";q=1;w=1']);
  });

  it('the largest limit a rule takes (15 digits) is printed as the integer it is, in every mode', async () => {
    const { report } = limiterAt({ algorithm: 'fixed-window', limit: MAX_LIMIT, windowMs: 1000 });
    const r = await report();
    expect(headerMap(rateLimitHeaders([r], 'draft-10', undefined))).toEqual({
      'RateLimit-Policy': '"default";q=999999999999999;w=1',
      RateLimit: '"default";r=999999999999998;t=1',
    });
    expect(headerMap(rateLimitHeaders([r], 'legacy', undefined))['X-RateLimit-Limit']).toBe('999999999999999');
    expect(() => compileRules([{ limit: MAX_LIMIT + 1, windowMs: 1000 }])).toThrow(expect.objectContaining({ code: 'ERR_FG_LIMIT' }));
  });

  it('never prints Infinity, NaN, a negative number or more than 15 digits, and sends no Retry-After for a call that can never pass', async () => {
    for (const algorithm of algorithmNames) {
      const { report } = limiterAt({ algorithm, limit: 10, windowMs: 60_000 });
      const tooLarge = await report('k', 11);
      expect(tooLarge.decision.retryAfterMs).toBe(Number.POSITIVE_INFINITY);
      for (const mode of headersModes) {
        const headers = rateLimitHeaders([tooLarge], mode, 429);
        expect(headers.map(([name]) => name)).not.toContain('Retry-After');
        for (const [, value] of headers) expect(value).not.toMatch(/Infinity|NaN|-\d|\d{16}/);
      }
    }
    const absurd: Decision = { ...denied, allowed: true, remaining: -3, resetMs: Number.POSITIVE_INFINITY, retryAfterMs: Number.NaN };
    for (const mode of headersModes) {
      for (const [, value] of rateLimitHeaders([{ decision: absurd, rules, decidedAt: now }], mode, undefined)) {
        expect(value).not.toMatch(/Infinity|NaN|-\d|\d{16}/);
      }
    }
  });

  it('Retry-After is whole seconds, rounded up, at least 1', () => {
    expect([1, 999, 1000, 1001, 59_999].map(retryAfterSeconds)).toEqual([1, 1, 1, 2, 60]);
  });
});

describe('partitionKeys: draft-10 pk, a hash of the key, never the key', () => {
  const expected = (storeKey: string) => createHash('sha256').update(storeKey).digest().subarray(0, 12).toString('base64');

  it('is the first 12 bytes of the SHA-256 of the store key, in base64 (16 characters), per scope; global rules have none', async () => {
    const scoped = compileRules([
      { name: 'all', scope: 'global', limit: 100, windowMs: 60_000 },
      { name: 'per-ip', scope: 'ip', limit: 10, windowMs: 60_000 },
      { name: 'per-user', scope: 'user', limit: 5, windowMs: 60_000 },
    ]);
    const keys = await partitionKeys(scoped, { ip: '203.0.113.9', user: 'u{42}' });
    expect(keys).toEqual({ ip: expected('%ip:203.0.113.9'), user: expected('%user:u%7B42%7D') });
    expect(keys.ip).toMatch(/^[A-Za-z0-9+/]{16}$/);
    expect(await partitionKeys(rules, 'user:42')).toEqual({ key: expected('user:42') });
    const long = 'x'.repeat(300);
    expect(await partitionKeys(rules, long)).toEqual({ key: expected(`%sha256=${createHash('sha256').update(long).digest('hex')}`) });
  });

  it('goes in both fields of each rule of its scope', async () => {
    const { limiter } = limiterAt({
      rules: [
        { name: 'all', scope: 'global', limit: 100, windowMs: 60_000, algorithm: 'fixed-window' },
        { name: 'per-user', scope: 'user', limit: 5, windowMs: 60_000, algorithm: 'fixed-window' },
      ],
    });
    const keys = { user: 'u42' };
    const report: PolicyReport = {
      decision: await limiter.consume(keys),
      rules: limiter.rules,
      decidedAt: 0,
      partitionKeys: await partitionKeys(limiter.rules, keys),
    };
    const pk = expected('%user:u42');
    expect(rateLimitHeaders([report], 'draft-10', undefined)).toEqual([
      ['RateLimit-Policy', `"all";q=100;w=60, "per-user";q=5;w=60;pk=:${pk}:`],
      ['RateLimit', `"all";r=99;t=60, "per-user";r=4;t=60;pk=:${pk}:`],
    ]);
    expect(JSON.stringify(rateLimitHeaders([report], 'draft-10', undefined))).not.toContain('u42');
  });

  it('stays right when its bounded cache of recent keys fills up and empties', async () => {
    const first = await partitionKeys(rules, 'client-0');
    for (let i = 1; i <= 10_001; i++) await partitionKeys(rules, `client-${i}`);
    expect(await partitionKeys(rules, 'client-0')).toEqual(first);
    expect(first).toEqual({ key: expected('client-0') });
    expect(await partitionKeys(rules, 'client-10001')).toEqual({ key: expected('client-10001') });
  });

  it('rejects with ERR_FG_KEY for a call without the key a rule needs, like the limiter', async () => {
    const scoped = compileRules([{ scope: 'user', limit: 1, windowMs: 1000 }]);
    await expect(partitionKeys(scoped, { ip: '1.2.3.4' })).rejects.toMatchObject({ code: 'ERR_FG_KEY' });
  });
});

describe('headersModes', () => {
  it('holds every mode the option takes, legacy first (the default)', () => {
    const modes: HeadersMode[] = ['legacy', 'draft-6', 'draft-7', 'draft-8', 'draft-10', 'both', false];
    expect(headersModes).toEqual(modes);
  });
});
