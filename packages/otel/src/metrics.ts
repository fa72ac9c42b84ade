import type { Attributes, Counter, Histogram, Meter } from '@opentelemetry/api';
import { LIMITER, RULE } from './attributes.js';
import type { NearLimitKeys } from './near-limit.js';

/**
 * The instruments of one Meter, shared by every limiter instrumented on it (told apart by
 * `ratelimit.limiter`), as @floodgate/prometheus shares one set per registry.
 */
export interface Instruments {
  decisions: Counter;
  errors: Counter;
  duration: Histogram;
  /** Per limiter name: its keys near their limit, read when the meter collects. */
  nearLimit: Map<string, NearLimitKeys>;
}

/** @floodgate/prometheus's buckets: a memory-store decision takes microseconds, a Redis one about a millisecond, a timeout up to timeoutMs. */
const DURATION_BUCKETS_S = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];

const perMeter = new WeakMap<Meter, Instruments>();

export function instrumentsFor(meter: Meter): Instruments {
  let instruments = perMeter.get(meter);
  if (instruments !== undefined) return instruments;
  const nearLimit = new Map<string, NearLimitKeys>();
  instruments = {
    nearLimit,
    decisions: meter.createCounter('floodgate.decisions', {
      description: 'Rate-limit decisions, by limiter, binding rule and outcome (ratelimit.allowed).',
      unit: '{decision}',
    }),
    errors: meter.createCounter('floodgate.store.errors', {
      description:
        'Store failures and timeouts, by limiter, the call that failed (ratelimit.operation), error.type, and for a consume what onStoreError decided (ratelimit.allowed) and the binding rule when an insurance limiter decided.',
      unit: '{error}',
    }),
    duration: meter.createHistogram('floodgate.store.duration', {
      description: 'Time a decision took, store round trip included (failed calls too: a timeout shows as timeoutMs).',
      unit: 's',
      advice: { explicitBucketBoundaries: DURATION_BUCKETS_S },
    }),
  };
  // An asynchronous instrument keeps reporting the last value of a series it is no longer told
  // about: a (limiter, rule) that had keys near the limit and has none now is reported as 0 once.
  let reported = new Map<string, Attributes>();
  meter
    .createObservableUpDownCounter('floodgate.keys.near_limit', {
      description: 'Keys that have used at least the near-limit share (80% by default) of a rule, and are not yet back to full capacity.',
      unit: '{key}',
    })
    .addCallback((result) => {
      const current = new Map<string, Attributes>();
      for (const [limiter, keys] of nearLimit) {
        for (const [rule, count] of keys.counts()) {
          const attributes = { [LIMITER]: limiter, [RULE]: rule };
          result.observe(count, attributes);
          current.set(`${limiter}\u0000${rule}`, attributes);
        }
      }
      for (const [id, attributes] of reported) if (!current.has(id)) result.observe(0, attributes);
      reported = current;
    });
  perMeter.set(meter, instruments);
  return instruments;
}
