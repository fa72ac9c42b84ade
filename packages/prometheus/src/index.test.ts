import { createLimiter } from '@floodgate/core';
import { rateLimit } from '@floodgate/express';
import express from 'express';
import { Registry } from 'prom-client';
import request from 'supertest';
import { describe, expect, it } from 'vitest';
import { instrument } from './index.js';

/** Reads one sample from Prometheus text output. */
function sample(text: string, metric: string, labels: Record<string, string>): number | undefined {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${metric}{`) && !line.startsWith(`${metric} `)) continue;
    if (wanted.every((label) => line.includes(label))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

/** The limiters' clock: it stands still, so no window ends while a test counts decisions. */
const frozenClock = () => Date.UTC(2026, 0, 1, 0, 0, 30);

describe('instrument', () => {
  it('counts decisions by rule and outcome, store latency, and keys near their limit', async () => {
    const registry = new Registry();
    const limiter = createLimiter({
      rules: [
        { name: 'per-second', algorithm: 'gcra', limit: 100, windowMs: 1_000 },
        { name: 'per-minute', algorithm: 'fixed-window', limit: 5, windowMs: 60_000 },
      ],
      now: frozenClock,
    });
    instrument(limiter, { name: 'api', registry });
    for (let i = 0; i < 10; i++) await limiter.consume('alice');
    for (let i = 0; i < 4; i++) await limiter.consume('bob');
    await limiter.consume('carol');
    const text = await registry.metrics();
    expect(sample(text, 'floodgate_decisions_total', { limiter: 'api', rule: 'per-minute', outcome: 'allowed' })).toBe(10);
    expect(sample(text, 'floodgate_decisions_total', { limiter: 'api', rule: 'per-minute', outcome: 'limited' })).toBe(5);
    expect(sample(text, 'floodgate_store_latency_seconds_count', { limiter: 'api' })).toBe(15);
    // alice used 5 of 5, bob 4 of 5 (80%), carol 1 of 5.
    expect(sample(text, 'floodgate_keys_near_limit', { limiter: 'api', rule: 'per-minute' })).toBe(2);
    expect(sample(text, 'floodgate_keys_near_limit', { limiter: 'api', rule: 'per-second' })).toBeUndefined();
  });

  it("counts a key near the limit of each rule under the key of that rule's scope", async () => {
    const registry = new Registry();
    const limiter = createLimiter({
      rules: [
        { name: 'everyone', scope: 'global', algorithm: 'fixed-window', limit: 10, windowMs: 60_000 },
        { name: 'per-user', scope: 'user', algorithm: 'fixed-window', limit: 2, windowMs: 60_000 },
      ],
      now: frozenClock,
    });
    instrument(limiter, { name: 'scoped', registry });
    for (const user of ['ann', 'ann', 'bo', 'bo', 'cy', 'di', 'di', 'ed', 'fay']) await limiter.consume({ user });
    const text = await registry.metrics();
    expect(sample(text, 'floodgate_keys_near_limit', { limiter: 'scoped', rule: 'per-user' })).toBe(3); // ann, bo, di used 2 of 2
    expect(sample(text, 'floodgate_keys_near_limit', { limiter: 'scoped', rule: 'everyone' })).toBe(1); // 9 of 10: one global key
  });

  it('rejects bad options with a FloodgateError that says what to change', () => {
    const limiter = createLimiter({ limit: 5, windowMs: 1_000 });
    for (const [options, code] of [
      [{ name: '' }, 'ERR_FG_OPTION'],
      [{}, 'ERR_FG_OPTION'],
      [{ name: 'x', nearLimitRatio: 0 }, 'ERR_FG_OPTION'],
      [{ name: 'x', nearLimitRatio: 1.5 }, 'ERR_FG_OPTION'],
      [{ name: 'x', maxTrackedKeys: 0.5 }, 'ERR_FG_OPTION'],
      [{ name: 'x', registry: {} }, 'ERR_FG_OPTION'],
      [{ name: 'x', labels: {} }, 'ERR_FG_UNKNOWN_OPTION'],
    ] as const) {
      expect(() => instrument(limiter, options as never)).toThrow(expect.objectContaining({ name: 'FloodgateError', code }));
    }
  });

  it('counts store errors, and stops when asked', async () => {
    const registry = new Registry();
    const fail = () => Promise.reject(new Error('down'));
    const limiter = createLimiter({ limit: 5, windowMs: 1_000, store: { consume: fail, peek: fail, refund: fail, reset: fail } });
    const stop = instrument(limiter, { name: 'broken', registry });
    await limiter.consume('k');
    await limiter.consume('k');
    stop();
    await limiter.consume('k');
    const text = await registry.metrics();
    expect(sample(text, 'floodgate_store_errors_total', { limiter: 'broken', operation: 'consume' })).toBe(2);
    // What those requests waited for the policy is store latency too.
    expect(sample(text, 'floodgate_store_latency_seconds_count', { limiter: 'broken' })).toBe(2);
  });

  it('labels store errors with the call that failed, what onStoreError decided, and the rule only when an insurance limiter measured it', async () => {
    const registry = new Registry();
    const fail = () => Promise.reject(new Error('down'));
    const broken = () => ({ consume: fail, peek: fail, refund: fail, reset: fail });
    const rules = [
      { name: 'per-minute', algorithm: 'fixed-window' as const, limit: 5, windowMs: 60_000 },
      { name: 'per-hour', algorithm: 'fixed-window' as const, limit: 50, windowMs: 3_600_000 },
    ];
    const allow = createLimiter({ rules, store: broken() });
    const deny = createLimiter({ rules, store: broken(), onStoreError: 'deny' });
    const insurance = createLimiter({ name: 'fallback', algorithm: 'fixed-window', limit: 1, windowMs: 60_000, now: frozenClock });
    const insured = createLimiter({ rules, store: broken(), onStoreError: insurance });
    instrument(allow, { name: 'allow', registry });
    instrument(deny, { name: 'deny', registry });
    instrument(insured, { name: 'insured', registry });
    for (const limiter of [allow, deny, insured]) {
      await limiter.consume('k');
      await limiter.consume('k');
    }
    await allow.refund('k');
    await allow.peek('k');
    const text = await registry.metrics();
    const errors = (labels: Record<string, string>) => sample(text, 'floodgate_store_errors_total', labels);
    // 'allow' and 'deny' measured no rule: the label is empty rather than the first rule's name.
    expect(errors({ limiter: 'allow', rule: '', outcome: 'allowed' })).toBe(2);
    expect(errors({ limiter: 'allow', rule: 'per-minute' })).toBeUndefined();
    expect(errors({ limiter: 'deny', rule: '', outcome: 'limited' })).toBe(2);
    // The insurance limiter admits one call a minute under its rule 'fallback'.
    expect(errors({ limiter: 'insured', rule: 'fallback', outcome: 'allowed' })).toBe(1);
    expect(errors({ limiter: 'insured', rule: 'fallback', outcome: 'limited' })).toBe(1);
    // A failed refund decides nothing; a failed peek admits nothing.
    expect(errors({ limiter: 'allow', operation: 'refund', rule: '', outcome: '' })).toBe(1);
    expect(errors({ limiter: 'allow', operation: 'peek', rule: '', outcome: '' })).toBe(1);
    expect(errors({ limiter: 'allow', operation: 'consume', outcome: 'allowed' })).toBe(2);
    // Calls onStoreError decided are counted here only, not in floodgate_decisions_total.
    expect(sample(text, 'floodgate_decisions_total', { limiter: 'allow' })).toBeUndefined();
  });

  it('serves real Prometheus output at /metrics next to a limited Express app', async () => {
    const registry = new Registry();
    const limiter = createLimiter({ algorithm: 'fixed-window', limit: 2, windowMs: 60_000, now: frozenClock });
    instrument(limiter, { name: 'web', registry });
    const app = express();
    app.get('/metrics', async (_req, res) => {
      res.type(registry.contentType).send(await registry.metrics());
    });
    app.use(rateLimit({ limiter }));
    app.get('/', (_req, res) => {
      res.send('ok');
    });
    for (let i = 0; i < 3; i++) await request(app).get('/');
    const scraped = await request(app).get('/metrics');
    expect(scraped.status).toBe(200);
    expect(scraped.headers['content-type']).toContain('text/plain');
    expect(scraped.text).toContain('# TYPE floodgate_decisions_total counter');
    expect(sample(scraped.text, 'floodgate_decisions_total', { limiter: 'web', outcome: 'allowed' })).toBe(2);
    expect(sample(scraped.text, 'floodgate_decisions_total', { limiter: 'web', outcome: 'limited' })).toBe(1);
    expect(sample(scraped.text, 'floodgate_keys_near_limit', { limiter: 'web', rule: 'default' })).toBe(1);
  });
});
