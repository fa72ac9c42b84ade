import { createLimiter, type Limiter } from '@floodgate/core';
import { rateLimit } from '@floodgate/express';
import { type Attributes, context, type HrTime, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  AggregationTemporality,
  type Histogram,
  InMemoryMetricExporter,
  MeterProvider,
  type MetricData,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import express from 'express';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { instrument } from './index.js';

/** Real SDK providers that export to memory; `collect()` reads the metrics when asked, as a scrape would. */
function telemetry() {
  const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  // The interval never comes during a test: collection happens on forceFlush() only.
  const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const spanExporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spanExporter)] });
  providers.push(meterProvider, tracerProvider);
  return {
    meterProvider,
    tracer: tracerProvider.getTracer('test'),
    async collect(): Promise<MetricData[]> {
      metricExporter.reset();
      await reader.forceFlush();
      return metricExporter.getMetrics().flatMap((batch) => batch.scopeMetrics.flatMap((scope) => scope.metrics));
    },
    spans: (): ReadableSpan[] => spanExporter.getFinishedSpans(),
  };
}

const providers: { shutdown(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(providers.splice(0).map((p) => p.shutdown()));
});

// The active span lives in an AsyncLocalStorage, as in an app with the Node SDK.
beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
});
afterAll(() => {
  context.disable();
});

/** The value of the one data point of `metric` whose attributes are exactly `attributes` (undefined: no such point). */
function point<T = number>(metrics: MetricData[], metric: string, attributes: Attributes): T | undefined {
  const found = metrics.filter((m) => m.descriptor.name === metric);
  expect(found.length).toBeLessThanOrEqual(1); // one stream per instrument, however many limiters
  const points = (found[0]?.dataPoints ?? []) as { attributes: Attributes; value: unknown }[];
  return points.find((p) => isDeepEqual(p.attributes, attributes))?.value as T | undefined;
}

/** Every data point's attributes: what a series can be labelled with. */
const attributeSets = (metrics: MetricData[], metric: string): Attributes[] =>
  (metrics.find((m) => m.descriptor.name === metric)?.dataPoints ?? []).map((p) => p.attributes);

/** Attributes are flat: equal when they have the same keys with the same values. */
const isDeepEqual = (a: Attributes, b: Attributes): boolean =>
  Object.keys(a).length === Object.keys(b).length && Object.entries(b).every(([key, value]) => a[key] === value);

const ms = (time: HrTime): number => time[0] * 1_000 + time[1] / 1_000_000;

/** The limiters' clock, 30 s into a minute: a fixed window has 30 s left. Tests move it by hand. */
const T0 = Date.UTC(2026, 0, 1, 0, 0, 30);

describe('metrics', () => {
  it('counts decisions by rule and outcome, their duration in seconds, and keys near their limit', async () => {
    const otel = telemetry();
    const limiter = createLimiter({
      rules: [
        { name: 'per-second', algorithm: 'gcra', limit: 100, windowMs: 1_000 },
        { name: 'per-minute', algorithm: 'fixed-window', limit: 5, windowMs: 60_000 },
      ],
      now: () => T0,
    });
    instrument(limiter, { name: 'api', meterProvider: otel.meterProvider, tracer: false });
    for (let i = 0; i < 10; i++) await limiter.consume('alice');
    for (let i = 0; i < 4; i++) await limiter.consume('bob');
    await limiter.consume('carol');
    const metrics = await otel.collect();

    const decisions = metrics.find((m) => m.descriptor.name === 'floodgate.decisions');
    expect(decisions).toMatchObject({ descriptor: { unit: '{decision}' }, isMonotonic: true });
    expect(attributeSets(metrics, 'floodgate.decisions')).toHaveLength(2);
    expect(point(metrics, 'floodgate.decisions', { 'ratelimit.limiter': 'api', 'ratelimit.rule': 'per-minute', 'ratelimit.allowed': true })).toBe(10);
    expect(point(metrics, 'floodgate.decisions', { 'ratelimit.limiter': 'api', 'ratelimit.rule': 'per-minute', 'ratelimit.allowed': false })).toBe(5);

    const duration = point<Histogram>(metrics, 'floodgate.store.duration', { 'ratelimit.limiter': 'api' });
    expect(metrics.find((m) => m.descriptor.name === 'floodgate.store.duration')?.descriptor.unit).toBe('s');
    expect(duration?.count).toBe(15);
    // @floodgate/prometheus's buckets, in seconds (the SDK's default ones are for milliseconds).
    expect(duration?.buckets.boundaries).toEqual([0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1]);

    // alice used 5 of 5, bob 4 of 5 (80%), carol 1 of 5; nobody came near 100 a second.
    const nearLimit = metrics.find((m) => m.descriptor.name === 'floodgate.keys.near_limit');
    expect(nearLimit).toMatchObject({ descriptor: { unit: '{key}' }, isMonotonic: false });
    expect(attributeSets(metrics, 'floodgate.keys.near_limit')).toEqual([{ 'ratelimit.limiter': 'api', 'ratelimit.rule': 'per-minute' }]);
    expect(point(metrics, 'floodgate.keys.near_limit', { 'ratelimit.limiter': 'api', 'ratelimit.rule': 'per-minute' })).toBe(2);
  });

  it('records the same duration the limiter measured', async () => {
    const otel = telemetry();
    const limiter = createLimiter({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000, now: () => T0 });
    const measured: number[] = [];
    limiter.on('allowed', ({ latencyMs }) => measured.push(latencyMs));
    limiter.on('limited', ({ latencyMs }) => measured.push(latencyMs));
    instrument(limiter, { meterProvider: otel.meterProvider, tracer: false });
    await limiter.consume('k');
    await limiter.consume('k');
    const duration = point<Histogram>(await otel.collect(), 'floodgate.store.duration', { 'ratelimit.limiter': 'default' });
    expect(measured).toHaveLength(2);
    expect(duration?.sum).toBeCloseTo(measured.reduce((a, b) => a + b, 0) / 1_000, 12);
  });

  it("drops a key from floodgate.keys.near_limit when it is back to full capacity on the limiter's clock, and reports 0 once none is left", async () => {
    const otel = telemetry();
    let now = T0;
    const limiter = createLimiter({ algorithm: 'fixed-window', limit: 5, windowMs: 60_000, now: () => now });
    instrument(limiter, { name: 'clock', meterProvider: otel.meterProvider, tracer: false, maxTrackedKeys: 2 });
    const nearLimit = async () => point(await otel.collect(), 'floodgate.keys.near_limit', { 'ratelimit.limiter': 'clock', 'ratelimit.rule': 'default' });
    for (const key of ['ann', 'bo', 'cy']) for (let i = 0; i < 4; i++) await limiter.consume(key);
    expect(await nearLimit()).toBe(2); // three keys at 4 of 5, but at most 2 tracked: ann, the least recently seen, was dropped
    now = T0 + 29_999; // the window ends at T0 + 30 s
    expect(await nearLimit()).toBe(2);
    now = T0 + 30_000;
    // 0, not the 2 an asynchronous instrument would go on reporting if it were told nothing.
    expect(await nearLimit()).toBe(0);
    await limiter.consume('bo');
    expect(await nearLimit()).toBe(0);
  });

  it("counts a key near the limit of each rule under the key of that rule's scope", async () => {
    const otel = telemetry();
    const limiter = createLimiter({
      rules: [
        { name: 'everyone', scope: 'global', algorithm: 'fixed-window', limit: 10, windowMs: 60_000 },
        { name: 'per-user', scope: 'user', algorithm: 'fixed-window', limit: 2, windowMs: 60_000 },
      ],
      now: () => T0,
    });
    instrument(limiter, { name: 'scoped', meterProvider: otel.meterProvider, tracer: false });
    for (const user of ['ann', 'ann', 'bo', 'bo', 'cy', 'di', 'di', 'ed', 'fay']) await limiter.consume({ user });
    const metrics = await otel.collect();
    expect(point(metrics, 'floodgate.keys.near_limit', { 'ratelimit.limiter': 'scoped', 'ratelimit.rule': 'per-user' })).toBe(3); // ann, bo, di used 2 of 2
    expect(point(metrics, 'floodgate.keys.near_limit', { 'ratelimit.limiter': 'scoped', 'ratelimit.rule': 'everyone' })).toBe(1); // 9 of 10: one global key
  });

  it('counts store errors by the call that failed, error.type, what onStoreError decided, and the rule only when an insurance limiter measured it', async () => {
    const otel = telemetry();
    const fail = () => Promise.reject(new Error('down'));
    const broken = () => ({ consume: fail, peek: fail, refund: fail, reset: fail });
    const rules = [
      { name: 'per-minute', algorithm: 'fixed-window' as const, limit: 5, windowMs: 60_000 },
      { name: 'per-hour', algorithm: 'fixed-window' as const, limit: 50, windowMs: 3_600_000 },
    ];
    const allow = createLimiter({ rules, store: broken() });
    const deny = createLimiter({ rules, store: broken(), onStoreError: 'deny' });
    const insurance = createLimiter({ name: 'fallback', algorithm: 'fixed-window', limit: 1, windowMs: 60_000, now: () => T0 });
    const insured = createLimiter({ rules, store: broken(), onStoreError: insurance });
    for (const [name, limiter] of [
      ['allow', allow],
      ['deny', deny],
      ['insured', insured],
    ] as const) {
      instrument(limiter, { name, meterProvider: otel.meterProvider, tracer: false });
      await limiter.consume('k');
      await limiter.consume('k');
    }
    await allow.refund('k');
    await allow.peek('k');
    // Five failures in a row open the breaker (a failed refund does not count: it only makes the limit
    // stricter): the sixth call does not reach the store, and error.type says why.
    for (let i = 0; i < 3; i++) await allow.consume('k');
    const metrics = await otel.collect();
    const errors = (attributes: Attributes) => point(metrics, 'floodgate.store.errors', attributes);
    const consume = { 'ratelimit.operation': 'consume', 'error.type': 'Error' };
    expect(errors({ 'ratelimit.limiter': 'allow', ...consume, 'ratelimit.allowed': true })).toBe(4);
    expect(errors({ 'ratelimit.limiter': 'deny', ...consume, 'ratelimit.allowed': false })).toBe(2);
    // The insurance limiter admits one call a minute under its rule 'fallback'.
    expect(errors({ 'ratelimit.limiter': 'insured', ...consume, 'ratelimit.allowed': true, 'ratelimit.rule': 'fallback' })).toBe(1);
    expect(errors({ 'ratelimit.limiter': 'insured', ...consume, 'ratelimit.allowed': false, 'ratelimit.rule': 'fallback' })).toBe(1);
    // A failed refund decides nothing and a failed peek admits nothing: no ratelimit.allowed.
    expect(errors({ 'ratelimit.limiter': 'allow', 'ratelimit.operation': 'refund', 'error.type': 'Error' })).toBe(1);
    expect(errors({ 'ratelimit.limiter': 'allow', 'ratelimit.operation': 'peek', 'error.type': 'Error' })).toBe(1);
    expect(
      errors({ 'ratelimit.limiter': 'allow', 'ratelimit.operation': 'consume', 'error.type': 'ERR_FG_STORE_UNAVAILABLE', 'ratelimit.allowed': true }),
    ).toBe(1);
    expect(attributeSets(metrics, 'floodgate.store.errors')).toHaveLength(7);
    // Calls onStoreError decided are counted as errors only; their time (the policy's decision) is a duration.
    expect(attributeSets(metrics, 'floodgate.decisions')).toEqual([]);
    expect(point<Histogram>(metrics, 'floodgate.store.duration', { 'ratelimit.limiter': 'allow' })?.count).toBe(5);
  });

  it('stops when asked: later calls are not counted, and its keys near the limit drop to 0', async () => {
    const otel = telemetry();
    const limiter = createLimiter({ algorithm: 'fixed-window', limit: 2, windowMs: 60_000, now: () => T0 });
    const stop = instrument(limiter, { name: 'stopped', meterProvider: otel.meterProvider, tracer: false });
    await limiter.consume('k');
    await limiter.consume('k');
    const before = await otel.collect();
    expect(point(before, 'floodgate.keys.near_limit', { 'ratelimit.limiter': 'stopped', 'ratelimit.rule': 'default' })).toBe(1);
    stop();
    await limiter.consume('k');
    const after = await otel.collect();
    expect(point(after, 'floodgate.decisions', { 'ratelimit.limiter': 'stopped', 'ratelimit.rule': 'default', 'ratelimit.allowed': true })).toBe(2);
    expect(point(after, 'floodgate.decisions', { 'ratelimit.limiter': 'stopped', 'ratelimit.rule': 'default', 'ratelimit.allowed': false })).toBeUndefined();
    expect(point(after, 'floodgate.keys.near_limit', { 'ratelimit.limiter': 'stopped', 'ratelimit.rule': 'default' })).toBe(0);
  });
});

describe('traces', () => {
  const decision = (limiter: string, fields: Attributes) => ({ 'ratelimit.limiter': limiter, 'ratelimit.rule': 'default', ...fields });

  it('adds a floodgate.decision event per consume to the active span, and a floodgate.consume span under it timed by the limiter', async () => {
    const otel = telemetry();
    const limiter = createLimiter({ algorithm: 'fixed-window', limit: 2, windowMs: 60_000, now: () => T0 });
    const measured: number[] = [];
    limiter.on('allowed', ({ latencyMs }) => measured.push(latencyMs));
    limiter.on('limited', ({ latencyMs }) => measured.push(latencyMs));
    instrument(limiter, { name: 'api', meterProvider: otel.meterProvider, tracer: otel.tracer });
    await otel.tracer.startActiveSpan('send sms', async (span) => {
      for (let i = 0; i < 3; i++) await limiter.consume('alice');
      await limiter.consume('bob', { cost: 3 }); // more than the capacity: never allowed
      span.end();
    });

    const parent = otel.spans().find((s) => s.name === 'send sms');
    const expected = [
      decision('api', { 'ratelimit.allowed': true, 'ratelimit.limit': 2, 'ratelimit.remaining': 1, 'ratelimit.retry_after_ms': 0 }),
      decision('api', { 'ratelimit.allowed': true, 'ratelimit.limit': 2, 'ratelimit.remaining': 0, 'ratelimit.retry_after_ms': 0 }),
      // The window ends 30 s after the frozen clock.
      decision('api', { 'ratelimit.allowed': false, 'ratelimit.limit': 2, 'ratelimit.remaining': 0, 'ratelimit.retry_after_ms': 30_000 }),
      // retryAfterMs is Infinity: no attribute, as adapters send no Retry-After.
      decision('api', { 'ratelimit.allowed': false, 'ratelimit.limit': 2, 'ratelimit.remaining': 2 }),
    ];
    expect(parent?.events.map((e) => e.name)).toEqual(['floodgate.decision', 'floodgate.decision', 'floodgate.decision', 'floodgate.decision']);
    expect(parent?.events.map((e) => e.attributes)).toEqual(expected);

    const consumes = otel.spans().filter((s) => s.name === 'floodgate.consume');
    expect(consumes.map((s) => s.attributes)).toEqual(expected);
    expect(consumes.map((s) => s.parentSpanContext?.spanId)).toEqual(Array(4).fill(parent?.spanContext().spanId));
    expect(consumes.map((s) => s.spanContext().traceId)).toEqual(Array(4).fill(parent?.spanContext().traceId));
    expect(consumes.map((s) => s.status.code)).toEqual(Array(4).fill(SpanStatusCode.UNSET));
    // Each span lasts what the limiter measured (within the sub-microsecond rounding of epoch times),
    // ends when its event was added, and lies within the caller's span.
    expect(measured).toHaveLength(4);
    consumes.forEach((span, i) => {
      expect(Math.abs(ms(span.duration) - (measured[i] as number))).toBeLessThan(0.001);
      expect(ms(span.endTime)).toBe(ms(parent?.events[i]?.time as HrTime));
      expect(ms(span.startTime)).toBeGreaterThanOrEqual(ms(parent?.startTime as HrTime));
    });
  });

  it('marks a consume the store failed: error.type and status on its span, what onStoreError decided on the event, no made-up numbers', async () => {
    const otel = telemetry();
    const fail = () => Promise.reject(new Error('connection lost'));
    const limiter = createLimiter({ limit: 5, windowMs: 1_000, store: { consume: fail, peek: fail, refund: fail, reset: fail }, onStoreError: 'deny' });
    instrument(limiter, { name: 'broken', meterProvider: otel.meterProvider, tracer: otel.tracer });
    await otel.tracer.startActiveSpan('request', async (span) => {
      await limiter.consume('k');
      await limiter.refund('k');
      span.end();
    });
    const parent = otel.spans().find((s) => s.name === 'request');
    expect(parent?.events.map((e) => [e.name, e.attributes])).toEqual([
      ['floodgate.decision', { 'ratelimit.limiter': 'broken', 'ratelimit.allowed': false, 'error.type': 'Error' }],
      ['floodgate.store_error', { 'ratelimit.limiter': 'broken', 'ratelimit.operation': 'refund', 'error.type': 'Error' }],
    ]);
    const consume = otel.spans().filter((s) => s.name === 'floodgate.consume');
    expect(consume).toHaveLength(1);
    expect(consume[0]?.status).toEqual({ code: SpanStatusCode.ERROR, message: 'connection lost' });
    expect(consume[0]?.attributes).toEqual({ 'ratelimit.limiter': 'broken', 'ratelimit.allowed': false, 'error.type': 'Error' });
  });

  it('with tracer: false, makes no span and adds no event, and still counts', async () => {
    const otel = telemetry();
    const limiter = createLimiter({ limit: 5, windowMs: 1_000, now: () => T0 });
    instrument(limiter, { meterProvider: otel.meterProvider, tracer: false });
    await otel.tracer.startActiveSpan('request', async (span) => {
      await limiter.consume('k');
      span.end();
    });
    expect(otel.spans().map((s) => [s.name, s.events.length])).toEqual([['request', 0]]);
    expect(point(await otel.collect(), 'floodgate.decisions', decision('default', { 'ratelimit.allowed': true }))).toBe(1);
  });

  it('follows a request through a real Express app over HTTP: its span gets the decision that answered it', async () => {
    const otel = telemetry();
    const limiter = createLimiter({ algorithm: 'fixed-window', limit: 2, windowMs: 60_000, now: () => T0 });
    instrument(limiter, { name: 'web', meterProvider: otel.meterProvider, tracer: otel.tracer });
    const app = express();
    // What an HTTP instrumentation does: a span per request, active while the middlewares run.
    app.use((req, res, next) => {
      const span = otel.tracer.startSpan(`${req.method} ${req.path}`);
      res.on('finish', () => span.end());
      context.with(trace.setSpan(context.active(), span), next);
    });
    app.use(rateLimit({ limiter }));
    app.get('/', (_req, res) => {
      res.send('ok');
    });
    const responses = [];
    for (let i = 0; i < 3; i++) responses.push(await request(app).get('/'));
    expect(responses.map((r) => r.status)).toEqual([200, 200, 429]);
    expect(responses[2]?.headers['retry-after']).toBe('30');

    await vi.waitFor(() => expect(otel.spans().filter((s) => s.name === 'GET /')).toHaveLength(3));
    const requests = otel.spans().filter((s) => s.name === 'GET /');
    expect(requests.map((s) => s.events.map((e) => e.attributes))).toEqual([
      [decision('web', { 'ratelimit.allowed': true, 'ratelimit.limit': 2, 'ratelimit.remaining': 1, 'ratelimit.retry_after_ms': 0 })],
      [decision('web', { 'ratelimit.allowed': true, 'ratelimit.limit': 2, 'ratelimit.remaining': 0, 'ratelimit.retry_after_ms': 0 })],
      [decision('web', { 'ratelimit.allowed': false, 'ratelimit.limit': 2, 'ratelimit.remaining': 0, 'ratelimit.retry_after_ms': 30_000 })],
    ]);
    const consumes = otel.spans().filter((s) => s.name === 'floodgate.consume');
    expect(consumes.map((s) => s.parentSpanContext?.spanId)).toEqual(requests.map((s) => s.spanContext().spanId));
    const metrics = await otel.collect();
    expect(point(metrics, 'floodgate.decisions', decision('web', { 'ratelimit.allowed': true }))).toBe(2);
    expect(point(metrics, 'floodgate.decisions', decision('web', { 'ratelimit.allowed': false }))).toBe(1);
    expect(point(metrics, 'floodgate.keys.near_limit', { 'ratelimit.limiter': 'web', 'ratelimit.rule': 'default' })).toBe(1);
  });
});

describe('options', () => {
  it('rejects bad options with a FloodgateError that says what to change', () => {
    const limiter = createLimiter({ limit: 5, windowMs: 1_000 });
    for (const [options, code, message] of [
      [{ meterProvider: {} }, 'ERR_FG_OPTION', /MeterProvider/],
      [{ meterProvider: { getMeter: 'no' } }, 'ERR_FG_OPTION', /MeterProvider/],
      [{ tracer: {} }, 'ERR_FG_OPTION', /Tracer/],
      [{ tracer: true }, 'ERR_FG_OPTION', /Tracer/],
      [{ name: '' }, 'ERR_FG_OPTION', /name/],
      [{ name: 42 }, 'ERR_FG_OPTION', /name/],
      [{ nearLimitRatio: 0 }, 'ERR_FG_OPTION', /nearLimitRatio/],
      [{ nearLimitRatio: 1.5 }, 'ERR_FG_OPTION', /nearLimitRatio/],
      [{ maxTrackedKeys: 0.5 }, 'ERR_FG_OPTION', /maxTrackedKeys/],
      [{ registry: {} }, 'ERR_FG_UNKNOWN_OPTION', /no option 'registry'/],
      [null, 'ERR_FG_OPTION', /must be an object/],
    ] as const) {
      expect(() => instrument(limiter, options as never)).toThrow(
        expect.objectContaining({ name: 'FloodgateError', code, message: expect.stringMatching(message) }),
      );
    }
    expect(() => instrument({} as Limiter)).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION', message: expect.stringMatching(/createLimiter/) }));
  });

  it('reports nothing and changes no decision when no SDK is registered (the API is a no-op)', async () => {
    const limiter = createLimiter({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000, now: () => T0 });
    instrument(limiter);
    expect([(await limiter.consume('k')).allowed, (await limiter.consume('k')).allowed]).toEqual([true, false]);
  });
});
