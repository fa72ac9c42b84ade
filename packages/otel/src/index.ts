/**
 * @packageDocumentation
 * OpenTelemetry for Floodgate: a limiter's decisions, store errors and latency, and keys
 * near their limit as metrics, and each decision on the active span, through
 * `@opentelemetry/api` (bring your own SDK).
 */
import { ErrorCodes, FloodgateError, type Limiter, type LimiterEvents } from '@floodgate/core';
import { type MeterProvider, metrics, type Tracer, trace } from '@opentelemetry/api';
import { ALLOWED, LIMITER, RULE, storeErrorAttributes } from './attributes.js';
import { instrumentsFor } from './metrics.js';
import { NearLimitKeys } from './near-limit.js';
import { Tracing } from './tracing.js';

export interface InstrumentOptions {
  /** The `ratelimit.limiter` attribute: which limiter the metrics and events are about. @defaultValue 'default' */
  name?: string;
  /** Where the metrics go. @defaultValue the global one (`metrics.getMeterProvider()`), as it is when `instrument()` is called */
  meterProvider?: MeterProvider;
  /** Makes the `floodgate.consume` spans; `false`: no spans and no span events. @defaultValue `trace.getTracer('@floodgate/otel')` (the global provider) */
  tracer?: Tracer | false;
  /** A key counts as near its limit once it has used this share of a rule's limit. @defaultValue 0.8 */
  nearLimitRatio?: number;
  /** Most keys tracked for `floodgate.keys.near_limit` (the least recently seen are dropped beyond it). @defaultValue 100_000 */
  maxTrackedKeys?: number;
}

/** The instrumentation scope: what the meter and tracer are named, as OpenTelemetry asks of a library. */
const SCOPE = '@floodgate/otel';

const optionNames = new Set(['name', 'meterProvider', 'tracer', 'nearLimitRatio', 'maxTrackedKeys']);

const has = (value: unknown, method: string): boolean =>
  typeof value === 'object' && value !== null && typeof (value as Record<string, unknown>)[method] === 'function';

function checkOptions(limiter: Limiter, options: InstrumentOptions): void {
  if (!has(limiter, 'on') || !has(limiter, 'now')) {
    throw new FloodgateError(ErrorCodes.OPTION, 'instrument() takes a limiter made by createLimiter() first, then the options.');
  }
  if (typeof options !== 'object' || options === null) {
    throw new FloodgateError(ErrorCodes.OPTION, "instrument()'s options must be an object, like { name: 'api' }.");
  }
  for (const key of Object.keys(options)) {
    if (!optionNames.has(key))
      throw new FloodgateError(ErrorCodes.UNKNOWN_OPTION, `instrument() has no option '${key}'; it takes ${[...optionNames].join(', ')}.`);
  }
  const { name, meterProvider, tracer, nearLimitRatio, maxTrackedKeys } = options;
  if (name !== undefined && (typeof name !== 'string' || name === '')) {
    throw new FloodgateError(ErrorCodes.OPTION, "instrument()'s name is the ratelimit.limiter attribute: a non-empty string, like { name: 'api' }.");
  }
  if (meterProvider !== undefined && !has(meterProvider, 'getMeter')) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      "instrument()'s meterProvider must be an OpenTelemetry MeterProvider (one with getMeter(), like the SDK's new MeterProvider({ readers })).",
    );
  }
  if (tracer !== undefined && tracer !== false && !has(tracer, 'startSpan')) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      "instrument()'s tracer must be an OpenTelemetry Tracer (from tracerProvider.getTracer('name')), or false for no spans.",
    );
  }
  if (nearLimitRatio !== undefined && (typeof nearLimitRatio !== 'number' || !(nearLimitRatio > 0 && nearLimitRatio <= 1))) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `instrument()'s nearLimitRatio must be a share of the limit above 0 and at most 1, like 0.8, got ${String(nearLimitRatio)}.`,
    );
  }
  if (maxTrackedKeys !== undefined && (!Number.isSafeInteger(maxTrackedKeys) || (maxTrackedKeys as number) < 1)) {
    throw new FloodgateError(ErrorCodes.OPTION, `instrument()'s maxTrackedKeys must be a positive integer, got ${String(maxTrackedKeys)}.`);
  }
}

/**
 * Reports what a limiter decides through OpenTelemetry. Metrics:
 * `floodgate.decisions{ratelimit.limiter, ratelimit.rule, ratelimit.allowed}`,
 * `floodgate.store.errors{ratelimit.limiter, ratelimit.operation, error.type, ratelimit.allowed?, ratelimit.rule?}`,
 * `floodgate.store.duration{ratelimit.limiter}` (seconds) and
 * `floodgate.keys.near_limit{ratelimit.limiter, ratelimit.rule}`. Traces: a
 * `floodgate.decision` event on the active span per consume, and a `floodgate.consume`
 * span timed by the limiter. Returns a function that stops it.
 *
 * @example
 * ```ts
 * import { MeterProvider } from '@opentelemetry/sdk-metrics';
 * const meterProvider = new MeterProvider({ readers: [reader] });
 * instrument(limiter, { name: 'api', meterProvider });
 * ```
 */
export function instrument(limiter: Limiter, options: InstrumentOptions = {}): () => void {
  checkOptions(limiter, options);
  const {
    name = 'default',
    meterProvider = metrics.getMeterProvider(),
    tracer = trace.getTracer(SCOPE),
    nearLimitRatio = 0.8,
    maxTrackedKeys = 100_000,
  } = options;
  const instruments = instrumentsFor(meterProvider.getMeter(SCOPE));
  const nearLimit = new NearLimitKeys(nearLimitRatio, maxTrackedKeys, () => limiter.now());
  instruments.nearLimit.set(name, nearLimit);
  const tracing = tracer === false ? undefined : new Tracing(tracer, name);
  const limiterOnly = { [LIMITER]: name };

  // 'allowed' and 'limited' carry the same payload.
  const decided = ({ key, decision, latencyMs }: LimiterEvents['allowed']) => {
    instruments.decisions.add(1, { [LIMITER]: name, [RULE]: decision.rule, [ALLOWED]: decision.allowed });
    instruments.duration.record(latencyMs / 1000, limiterOnly);
    nearLimit.track(key, decision.rules);
    tracing?.decided(decision, latencyMs);
  };
  const offAllowed = limiter.on('allowed', decided);
  const offLimited = limiter.on('limited', decided);
  const offError = limiter.on('error', ({ operation, error, decision, latencyMs }) => {
    instruments.errors.add(1, storeErrorAttributes(name, operation, error, decision));
    if (operation === 'consume') {
      // A failed consume is still a decision (the policy's): its time, timeouts included, is what a request waited.
      instruments.duration.record(latencyMs / 1000, limiterOnly);
      if (decision !== undefined) tracing?.decided(decision, latencyMs, error);
    } else tracing?.failed(operation, error);
  });
  return () => {
    offAllowed();
    offLimited();
    offError();
    if (instruments.nearLimit.get(name) === nearLimit) instruments.nearLimit.delete(name);
  };
}
