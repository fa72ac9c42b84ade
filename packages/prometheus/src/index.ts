import { type Decision, ErrorCodes, FloodgateError, type Keys, type Limiter, type LimiterEvents, type RuleDecision } from '@floodgate/core';
import { isUnmeasured } from '@floodgate/core/adapter';
import { Counter, register as defaultRegistry, Gauge, Histogram, type Registry } from 'prom-client';

export interface InstrumentOptions {
  /** The `limiter` label: which limiter the metrics are about. */
  name: string;
  /** Where the metrics are registered. @defaultValue prom-client's default registry */
  registry?: Registry;
  /** A key counts as near its limit once it has used this share of a rule's limit. @defaultValue 0.8 */
  nearLimitRatio?: number;
  /** Most keys tracked for the near-limit gauge (the least recently seen are dropped beyond it). @defaultValue 100_000 */
  maxTrackedKeys?: number;
  /**
   * Exports the `n` keys the limiter denies most (1 to 100), as
   * `floodgate_top_denied{limiter,scope,key}`: read with `limiter.top({ n })` on
   * each scrape, so at most `n` series per limiter. Needs a limiter created with
   * `analytics: true`; one without fails the scrape with ERR_FG_OPTION (it can
   * only tell when asked). A store that fails or times out drops the limiter's
   * series for that scrape and counts a store error (`operation: 'top'`).
   */
  top?: { n: number };
}

interface Metrics {
  decisions: Counter<'limiter' | 'rule' | 'outcome'>;
  errors: Counter<'limiter' | 'operation' | 'rule' | 'outcome'>;
  latency: Histogram<'limiter'>;
  nearLimit: Gauge<'limiter' | 'rule'>;
  /** Per limiter: key + rule -> when its near-limit state ends (ms). */
  tracked: Map<string, Map<string, { rule: string; until: number }>>;
  /** Per limiter instrumented with `top`: how to read its most denied keys. */
  top: Map<string, TopSource>;
  /** floodgate_top_denied: registered with the first limiter instrumented with `top`. */
  topDenied?: Gauge<'limiter' | 'scope' | 'key'>;
  /** The top() reads of the scrape under way, shared by the collect() of floodgate_top_denied and of floodgate_store_errors_total. */
  topReads?: Promise<{ name: string; items: readonly Limiter.TopKey[] }[]>;
}

/** A limiter whose most denied keys floodgate_top_denied exports. */
interface TopSource {
  limiter: Limiter;
  n: number;
  /** Set once top() has said the limiter has no analytics: every scrape fails with it. */
  refused?: FloodgateError;
}

/**
 * The labels of a store error besides `limiter`, named as on floodgate_decisions_total.
 * `operation`: the limiter call that failed. `outcome`: what onStoreError decided for a
 * consume, `''` for the other calls (a peek admits nothing; a refund or a lease release has
 * nothing to decide). `rule`: the binding rule when an insurance limiter measured the call,
 * `''` otherwise: onStoreError 'allow'/'deny' measure no rule (the decision core makes up
 * names the first rule, which would be a false label).
 */
function storeErrorLabels(
  operation: LimiterEvents['error']['operation'],
  decision: Decision | undefined,
): { operation: string; rule: string; outcome: string } {
  if (operation !== 'consume' || decision === undefined) return { operation, rule: '', outcome: '' };
  return { operation, rule: isUnmeasured(decision) ? '' : decision.rule, outcome: decision.allowed ? 'allowed' : 'limited' };
}

/** The key a rule counted a call under: its scope's. */
const keyOf = (keys: Keys, scope: string): string => (scope === 'global' ? '' : typeof keys === 'string' ? keys : (keys[scope] ?? ''));

const optionNames = new Set(['name', 'registry', 'nearLimitRatio', 'maxTrackedKeys', 'top']);

/** Most series floodgate_top_denied has per limiter: `top.n` at most. */
const MAX_TOP = 100;

function checkOptions(options: InstrumentOptions): void {
  if (typeof options !== 'object' || options === null) {
    throw new FloodgateError(ErrorCodes.OPTION, "instrument() takes options like { name: 'api' }.");
  }
  for (const key of Object.keys(options)) {
    if (!optionNames.has(key))
      throw new FloodgateError(ErrorCodes.UNKNOWN_OPTION, `instrument() has no option '${key}'; it takes ${[...optionNames].join(', ')}.`);
  }
  const { name, registry, nearLimitRatio, maxTrackedKeys, top } = options;
  if (typeof name !== 'string' || name === '') {
    throw new FloodgateError(ErrorCodes.OPTION, "instrument() needs a name for the metrics' limiter label, like { name: 'api' }.");
  }
  if (registry !== undefined && (typeof registry !== 'object' || registry === null || typeof (registry as Registry).registerMetric !== 'function')) {
    throw new FloodgateError(ErrorCodes.OPTION, "instrument()'s registry must be a prom-client Registry.");
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
  if (top !== undefined) checkTop(top);
}

function checkTop(top: unknown): void {
  if (typeof top !== 'object' || top === null || Array.isArray(top)) {
    throw new FloodgateError(ErrorCodes.OPTION, `instrument()'s top must be an object like { n: 10 }, got ${describe(top)}.`);
  }
  for (const key of Object.keys(top)) {
    if (key !== 'n') throw new FloodgateError(ErrorCodes.UNKNOWN_OPTION, `instrument()'s top has no option '${key}'; it takes n.`);
  }
  const { n } = top as { n?: unknown };
  if (!Number.isSafeInteger(n) || (n as number) < 1 || (n as number) > MAX_TOP) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `instrument()'s top.n must be an integer from 1 to ${MAX_TOP} (the most series floodgate_top_denied keeps per limiter), got ${describe(n)}.`,
    );
  }
}

/** A value for an error message. */
function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'object' && value !== null) return Array.isArray(value) ? 'an array' : 'an object';
  return String(value);
}

const perRegistry = new WeakMap<Registry, Metrics>();

/** One set of metric objects per registry, shared by every instrumented limiter (told apart by the `limiter` label). */
function metricsFor(registry: Registry): Metrics {
  let metrics = perRegistry.get(registry);
  if (metrics !== undefined) return metrics;
  const tracked = new Map<string, Map<string, { rule: string; until: number }>>();
  metrics = {
    tracked,
    top: new Map(),
    decisions: new Counter({
      name: 'floodgate_decisions_total',
      help: 'Rate-limit decisions, by limiter, binding rule and outcome (allowed or limited).',
      labelNames: ['limiter', 'rule', 'outcome'],
      registers: [registry],
    }),
    errors: new Counter({
      name: 'floodgate_store_errors_total',
      help: 'Store failures and timeouts, by limiter, the call that failed (operation), the binding rule of an insurance limiter, and what onStoreError decided for a consume (allowed, limited, or empty).',
      labelNames: ['limiter', 'operation', 'rule', 'outcome'],
      registers: [registry],
      // A top() read that fails in this scrape is counted in this scrape's output.
      collect: () => ((metrics as Metrics).top.size > 0 ? readTops(metrics as Metrics).then(() => undefined) : undefined),
    }),
    latency: new Histogram({
      name: 'floodgate_store_latency_seconds',
      help: 'Time a decision took, store round trip included.',
      labelNames: ['limiter'],
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      registers: [registry],
    }),
    nearLimit: new Gauge({
      name: 'floodgate_keys_near_limit',
      help: 'Keys that have used at least the near-limit share (80% by default) of a rule, and are not yet back to full capacity.',
      labelNames: ['limiter', 'rule'],
      registers: [registry],
      collect() {
        const now = Date.now();
        this.reset();
        for (const [limiter, keys] of tracked) {
          const counts = new Map<string, number>();
          for (const [id, entry] of keys) {
            if (entry.until <= now) keys.delete(id);
            else counts.set(entry.rule, (counts.get(entry.rule) ?? 0) + 1);
          }
          for (const [rule, count] of counts) this.set({ limiter, rule }, count);
        }
      },
    }),
  };
  perRegistry.set(registry, metrics);
  return metrics;
}

/**
 * floodgate_top_denied, registered on first use (a registry without `top`
 * exports no empty family). Each scrape asks every limiter's top() at once,
 * then replaces all the series: a key that left a limiter's top `n` is gone,
 * so there are never more than `n` series per limiter.
 */
function topGaugeFor(registry: Registry, metrics: Metrics): void {
  if (metrics.topDenied !== undefined) return;
  metrics.topDenied = new Gauge({
    name: 'floodgate_top_denied',
    help: 'The keys a limiter denies most (instrument() option top: { n }): denied calls over the period under way and the one before, added up over every process sharing the store, by the scope and key of the rule that denied them. At most n series per limiter.',
    labelNames: ['limiter', 'scope', 'key'],
    registers: [registry],
    async collect() {
      const read = await readTops(metrics);
      this.reset();
      for (const { name, items } of read) for (const { scope, key, denied } of items) this.set({ limiter: name, scope, key }, denied);
    },
  });
}

/**
 * Every instrumented limiter's top() for the scrape under way, at once. prom-client
 * starts every metric's collect() before it awaits any, so the errors counter
 * (registered first) starts the reads and floodgate_top_denied joins them: a read
 * that fails is counted in the same scrape.
 */
function readTops(metrics: Metrics): NonNullable<Metrics['topReads']> {
  if (metrics.topReads !== undefined) return metrics.topReads;
  const reads = Promise.all([...metrics.top].map(async ([name, source]) => ({ name, items: await readTop(name, source, metrics.errors) })));
  metrics.topReads = reads;
  const done = () => {
    if (metrics.topReads === reads) metrics.topReads = undefined;
  };
  reads.then(done, done);
  return reads;
}

/**
 * One limiter's most denied keys for a scrape. A store that fails or does not
 * answer (each of top()'s store calls is bounded by the limiter's timeoutMs)
 * gives none, counted as a store error: stale counts would pass for current
 * ones, and the scrape must still answer. A limiter without analytics fails
 * the scrape, now and on every scrape after.
 */
async function readTop(name: string, source: TopSource, errors: Metrics['errors']): Promise<readonly Limiter.TopKey[]> {
  if (source.refused !== undefined) throw source.refused;
  try {
    return (await source.limiter.top({ n: source.n })).items;
  } catch (error) {
    if (error instanceof FloodgateError && error.code === ErrorCodes.OPTION) {
      source.refused = new FloodgateError(
        ErrorCodes.OPTION,
        `instrument()'s top option needs a limiter that counts its denials: the limiter '${name}' was created without analytics. Create it with createLimiter({ analytics: true }), or instrument it without top. (${error.message})`,
        { cause: error },
      );
      throw source.refused;
    }
    errors.inc({ limiter: name, operation: 'top', rule: '', outcome: '' });
    return [];
  }
}

/**
 * Counts what a limiter decides into Prometheus metrics:
 * `floodgate_decisions_total{limiter,rule,outcome}`,
 * `floodgate_store_errors_total{limiter,operation,rule,outcome}` (`outcome` is what
 * onStoreError decided for a consume, empty for the other calls; `rule` is set only
 * when an insurance limiter decided),
 * `floodgate_store_latency_seconds{limiter}` and
 * `floodgate_keys_near_limit{limiter,rule}`, and with `top: { n }` the keys it denies
 * most, `floodgate_top_denied{limiter,scope,key}`. Returns a function that stops it.
 *
 * @example
 * ```ts
 * import { register } from 'prom-client';
 * instrument(limiter, { name: 'api' });
 * app.get('/metrics', async (_req, res) => res.type(register.contentType).send(await register.metrics()));
 * ```
 */
export function instrument(limiter: Limiter, options: InstrumentOptions): () => void {
  checkOptions(options);
  const { name, registry = defaultRegistry, nearLimitRatio = 0.8, maxTrackedKeys = 100_000 } = options;
  const metrics = metricsFor(registry);
  const keys = new Map<string, { rule: string; until: number }>();
  metrics.tracked.set(name, keys);
  if (options.top !== undefined) {
    topGaugeFor(registry, metrics);
    metrics.top.set(name, { limiter, n: options.top.n });
  }

  const track = (key: Keys, rules: RuleDecision[]) => {
    const now = Date.now();
    for (const r of rules) {
      const id = `${r.name}\u0000${keyOf(key, r.scope)}`;
      keys.delete(id); // re-inserted below: the Map stays ordered by last sight
      if (r.limit > 0 && r.limit - r.remaining >= nearLimitRatio * r.limit && r.resetMs > 0) {
        if (keys.size >= maxTrackedKeys) keys.delete(keys.keys().next().value as string);
        keys.set(id, { rule: r.name, until: now + r.resetMs });
      }
    }
  };

  const offAllowed = limiter.on('allowed', ({ key, rule, decision, latencyMs }) => {
    metrics.decisions.inc({ limiter: name, rule, outcome: 'allowed' });
    metrics.latency.observe({ limiter: name }, latencyMs / 1000);
    track(key, decision.rules);
  });
  const offLimited = limiter.on('limited', ({ key, rule, decision, latencyMs }) => {
    metrics.decisions.inc({ limiter: name, rule, outcome: 'limited' });
    metrics.latency.observe({ limiter: name }, latencyMs / 1000);
    track(key, decision.rules);
  });
  const offError = limiter.on('error', ({ operation, decision, latencyMs }) => {
    metrics.errors.inc({ limiter: name, ...storeErrorLabels(operation, decision) });
    // A failed consume is still a decision (the policy's): its time, timeouts included, is what a request waited.
    if (operation === 'consume') metrics.latency.observe({ limiter: name }, latencyMs / 1000);
  });
  return () => {
    offAllowed();
    offLimited();
    offError();
    metrics.tracked.delete(name);
    metrics.top.delete(name);
  };
}
