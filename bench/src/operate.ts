/*
 * Issue 31: what operating a limiter costs. (a) A call on the memory store
 * with 100k random keys, a plain limiter against the same limiter with
 * `overrides: true` holding 1,000 overrides (exact keys and prefixes, some of
 * them the keys called, a few lowering a key's limit so that analytics count
 * denials) and `analytics: true`; (b) the same on a RedisStore against a
 * private redis-server, awaited in turn and 64 in flight; (c) the heap that
 * analytics hold after 1M distinct keys were each denied once, against the
 * same feed without analytics.
 *
 * Every measurement runs in a fresh process of its own (this file, started
 * as a worker), plain and operated in a rotated order each round, so that
 * neither inherits the other's JIT feedback or garbage. A quick run (CI's
 * smoke run) does every measurement once, in one worker.
 */
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { createLimiter, type Limiter, MemoryStore, RedisStore } from '@floodgate/core';
import { isUnmeasured } from '@floodgate/core/adapter';
import { Redis } from 'ioredis';
import { reply, runWorker, workerInput } from './child.js';
import type { BenchConfig } from './config.js';
import { keyPool, randomSequence } from './keys.js';
import { log } from './log.js';
import { LIMIT, WINDOW_MS } from './memory-contenders.js';
import { startBenchRedis } from './redis-server.js';
import { formatNumber, formatRate, formatRatio, median, pairedRatio, ratioRange, rotate } from './stats.js';
import type { Target } from './targets.js';

export type OperateRow = 'memory' | 'redis-sequential' | 'redis-concurrent';
export type OperateVariant = 'plain' | 'operated';
export const operateRows: readonly OperateRow[] = ['memory', 'redis-sequential', 'redis-concurrent'];
const variants: readonly OperateVariant[] = ['plain', 'operated'];

/** How the 1,000 overrides of the operated limiter are made up. */
export const OVERRIDES = {
  /** Exact keys: half of them keys the run calls, half keys it never calls. */
  exact: 900,
  /** Of the exact keys called, these get a limit of 1: their calls past the first are denied (and counted by analytics). */
  denying: 20,
  /** Prefixes (`key*`): `matching` of them cover keys the run calls (about 111 each), the others none. */
  prefixes: 100,
  matching: 10,
} as const;

type ThroughputTask = { kind: 'throughput'; row: OperateRow; variant: OperateVariant; ops: number; randomKeys: number; inFlight: number; redisPort: number };
type HeapTask = { kind: 'heap'; analytics: boolean; deniedKeys: number; storeKeys: number };
type OperateTask = ThroughputTask | HeapTask;

export interface OperateThroughput {
  opsPerSecond: number;
  /** Calls per second of the worker's main-thread CPU (Linux; NaN elsewhere). */
  opsPerCpuSecond: number;
  denied: number;
  errors: number;
  /** Keys of the run that an override applies to (operated only). */
  overriddenKeys: number;
}

export interface OperateHeap {
  /** JS heap + external after warming up (the store full, the summary full), and after the flood. */
  beforeBytes: number;
  afterBytes: number;
  /** Denied calls of the flood (one per distinct key). */
  denials: number;
  /** Main-thread CPU per key of the flood (one admitted call, then one denied), ns. */
  nsPerKey: number;
  /** Keys top() reports afterwards (analytics only): the summaries of this period and the one before. */
  topKeys: number;
}

export interface OperateResults {
  rounds: number;
  randomKeys: number;
  inFlight: number;
  ops: Record<OperateRow, number>;
  /** Calls per second, one entry per round. */
  throughput: Record<OperateRow, Record<OperateVariant, number[]>>;
  cpuThroughput: Record<OperateRow, Record<OperateVariant, number[]>>;
  denied: Record<OperateRow, Record<OperateVariant, number>>;
  errors: Record<OperateRow, Record<OperateVariant, number>>;
  overriddenKeys: number;
  heap: { deniedKeys: number; storeKeys: number; size: number; analytics: OperateHeap; plain: OperateHeap };
}

/** The analytics summary's size under `analytics: true` (core's default). */
const ANALYTICS_SIZE = 100;

const byRow = <T>(make: () => T) =>
  Object.fromEntries(operateRows.map((row) => [row, { plain: make(), operated: make() }])) as Record<OperateRow, Record<OperateVariant, T>>;

export async function benchOperate(config: BenchConfig): Promise<OperateResults> {
  const { rounds, memoryOps, redisSequentialOps, redisConcurrentOps, inFlight, randomKeys, deniedKeys, storeKeys } = config.operate;
  const ops: Record<OperateRow, number> = { memory: memoryOps, 'redis-sequential': redisSequentialOps, 'redis-concurrent': redisConcurrentOps };
  const results: OperateResults = {
    rounds,
    randomKeys,
    inFlight,
    ops,
    throughput: byRow(() => []),
    cpuThroughput: byRow(() => []),
    denied: byRow(() => 0),
    errors: byRow(() => 0),
    overriddenKeys: 0,
    heap: { deniedKeys, storeKeys, size: ANALYTICS_SIZE, analytics: emptyHeap(), plain: emptyHeap() },
  };
  const server = await startBenchRedis();
  try {
    const tasks: OperateTask[] = [];
    for (let round = 0; round < rounds; round++) {
      for (const row of operateRows) {
        for (const variant of rotate(variants, round)) {
          tasks.push({
            kind: 'throughput',
            row,
            variant,
            ops: ops[row],
            randomKeys,
            inFlight: row === 'redis-concurrent' ? inFlight : 1,
            redisPort: server.port,
          });
        }
      }
    }
    tasks.push({ kind: 'heap', analytics: true, deniedKeys, storeKeys }, { kind: 'heap', analytics: false, deniedKeys, storeKeys });
    const record = (task: OperateTask, answer: OperateThroughput | OperateHeap) => {
      if (task.kind === 'heap') {
        const h = answer as OperateHeap;
        results.heap[task.analytics ? 'analytics' : 'plain'] = h;
        log(
          `operate heap, analytics ${task.analytics ? 'on ' : 'off'}: ${formatMb(h.afterBytes - h.beforeBytes)} after ${task.deniedKeys} distinct denied keys (${formatNumber(h.nsPerKey)} ns per key, top() lists ${h.topKeys})`,
        );
        return;
      }
      const t = answer as OperateThroughput;
      results.throughput[task.row][task.variant].push(t.opsPerSecond);
      results.cpuThroughput[task.row][task.variant].push(t.opsPerCpuSecond);
      results.denied[task.row][task.variant] += t.denied;
      results.errors[task.row][task.variant] += t.errors;
      if (task.variant === 'operated') results.overriddenKeys = t.overriddenKeys;
      log(
        `operate ${task.row.padEnd(16)} ${task.variant.padEnd(8)} ${formatRate(t.opsPerSecond)}/s (${formatNumber(1e9 / t.opsPerCpuSecond)} ns CPU per call)`,
      );
    };
    if (config.quick) {
      // A quick run starts one worker for everything: its numbers are not meant to be read.
      const answers = await runWorker<(OperateThroughput | OperateHeap)[]>('./operate.ts', tasks, ['--expose-gc']);
      for (const [i, task] of tasks.entries()) record(task, answers[i] as OperateThroughput | OperateHeap);
    } else {
      for (const task of tasks) {
        const measure = () => runWorker<(OperateThroughput | OperateHeap)[]>('./operate.ts', [task], ['--expose-gc']);
        // Once more after a crash: on a shared working tree, a package rebuilt under the run takes its dist/ away for a moment.
        const [answer] = await measure().catch(async (error: unknown) => {
          log(`operate: a worker failed (${(error as Error).message}); running it again in 20 s`);
          await new Promise((resolve) => setTimeout(resolve, 20_000));
          return measure();
        });
        record(task, answer as OperateThroughput | OperateHeap);
      }
    }
    return results;
  } finally {
    await server.stop();
  }
}

function emptyHeap(): OperateHeap {
  return { beforeBytes: Number.NaN, afterBytes: Number.NaN, denials: 0, nsPerKey: Number.NaN, topKeys: 0 };
}

const formatMb = (bytes: number) => `${bytes >= 0 ? '+' : ''}${formatNumber(bytes / 1e6, 2)} MB`;

/** Cost of the operated call over the plain one: the inverse of the ratio of rates (1.05× = 5% more time per call). */
const costRatio = (results: OperateResults, row: OperateRow) => pairedRatio(results.throughput[row].plain, results.throughput[row].operated);

/** Issue 31's targets. */
export function operateTargets(results: OperateResults): Target[] {
  const targets: Target[] = [];
  const memory = costRatio(results, 'memory');
  const redis = costRatio(results, 'redis-concurrent');
  const sequential = costRatio(results, 'redis-sequential');
  const spread = (row: OperateRow) =>
    ratioRange(results.throughput[row].plain, results.throughput[row].operated)
      .map((x) => formatNumber(x, 2))
      .join('–');
  const cpuCost = (row: OperateRow) => pairedRatio(results.cpuThroughput[row].plain, results.cpuThroughput[row].operated);
  const why = (row: OperateRow) =>
    `Per round the operated call cost ${spread(row)}× the plain one; in main-thread CPU, ${formatRatio(cpuCost(row))}. ` +
    'What it adds: `overridden()` (a map lookup per scope, prefixes by length, in limiter.ts) on every call and `Analytics.denied` on a denied one.';
  targets.push({
    issue: '31',
    area: 'memory',
    requirement: `a call with ${OVERRIDES.exact + OVERRIDES.prefixes} overrides and analytics costs ≤ 1.1× a plain limiter's, ${results.randomKeys / 1000}k keys`,
    measured: `${formatRatio(memory)} the cost`,
    holds: memory <= 1.1,
    ...(memory <= 1.1 ? {} : { bound: why('memory') }),
  });
  targets.push({
    issue: '31',
    area: 'redis',
    requirement: `a call with ${OVERRIDES.exact + OVERRIDES.prefixes} overrides and analytics costs ≤ 1.1× a plain limiter's, ${results.inFlight} in flight`,
    measured: `${formatRatio(redis)} the cost (sequential: ${formatRatio(sequential)})`,
    holds: redis <= 1.1 && sequential <= 1.1,
    ...(redis <= 1.1 && sequential <= 1.1 ? {} : { bound: why(redis > 1.1 ? 'redis-concurrent' : 'redis-sequential') }),
  });
  const { analytics, plain, deniedKeys } = results.heap;
  const growth = analytics.afterBytes - analytics.beforeBytes - (plain.afterBytes - plain.beforeBytes);
  const bounded = growth < 1e6 && analytics.topKeys <= 2 * results.heap.size && analytics.denials === deniedKeys;
  targets.push({
    issue: '31',
    area: 'memory',
    requirement: `analytics' heap stays bounded: < 1 MB more than without analytics after ${formatNumber(deniedKeys / 1e6, 1)}M distinct denied keys`,
    measured: `${formatMb(growth)} (top() lists ${analytics.topKeys} keys; size ${results.heap.size})`,
    holds: bounded,
  });
  return targets;
}

/** BENCHMARKS.md's section. */
export function operateSection(results: OperateResults | undefined): string {
  if (results === undefined) return '';
  const rowLabel: Record<OperateRow, string> = {
    memory: `MemoryStore, ${results.randomKeys / 1000}k random keys, awaited in turn`,
    'redis-sequential': `RedisStore, ${results.randomKeys / 1000}k random keys, awaited in turn`,
    'redis-concurrent': `RedisStore, ${results.randomKeys / 1000}k random keys, ${results.inFlight} in flight`,
  };
  const rows = operateRows.map((row) => {
    const t = results.throughput[row];
    const cpu = results.cpuThroughput[row];
    return [
      rowLabel[row],
      formatRate(median(t.plain)),
      formatRate(median(t.operated)),
      `**${formatRatio(costRatio(results, row))}**`,
      ratioRange(t.plain, t.operated)
        .map((x) => formatNumber(x, 2))
        .join('–'),
      `${formatNumber(1e9 / median(cpu.plain))} / ${formatNumber(1e9 / median(cpu.operated))}`,
      `${results.denied[row].operated} / ${results.ops[row] * results.rounds}`,
    ];
  });
  const { analytics, plain, deniedKeys, storeKeys, size } = results.heap;
  const heapRow = (label: string, h: OperateHeap) => [
    label,
    formatMb(h.beforeBytes),
    formatMb(h.afterBytes),
    formatMb(h.afterBytes - h.beforeBytes),
    String(h.denials),
    formatNumber(h.nsPerKey),
    label.startsWith('**') ? String(h.topKeys) : '–',
  ];
  const errors = operateRows.flatMap((row) => variants.map((v) => results.errors[row][v])).reduce((a, b) => a + b, 0);
  return [
    '## Operating a limiter: overrides and analytics',
    '',
    `Issue 31. The same limiter (fixed-window, a limit out of reach) plain, and with \`overrides: true\` holding ${OVERRIDES.exact + OVERRIDES.prefixes} overrides and \`analytics: true\`:` +
      ` ${OVERRIDES.exact} exact keys (half of them keys the run calls, ${OVERRIDES.denying} of those lowered to a limit of 1, so that their later calls are denied and counted)` +
      ` and ${OVERRIDES.prefixes} prefixes (${OVERRIDES.matching} covering keys the run calls): an override applies to ${results.overriddenKeys} of the ${results.randomKeys / 1000}k keys.` +
      ` Each measurement in a fresh process, plain and operated in a rotated order in each of ${results.rounds} rounds; cost is the median of the per-round ratios plain rate / operated rate (1.05× = 5% more time per call).`,
    '',
    table(['scenario', 'plain', 'operated', 'cost', 'per round', 'CPU ns per call (plain / operated)', 'operated calls denied'], rows, [
      'l',
      'r',
      'r',
      'r',
      'r',
      'r',
      'r',
    ]),
    '',
    `Calls per measurement: ${results.ops.memory.toLocaleString('en-US')} (memory), ${results.ops['redis-sequential'].toLocaleString('en-US')} and ${results.ops['redis-concurrent'].toLocaleString('en-US')} (Redis), after a warm-up. Store errors: ${errors}.`,
    '',
    `### Analytics under ${formatNumber(deniedKeys / 1e6, 1)}M distinct denied keys`,
    '',
    `A limiter with a limit of 1 on a MemoryStore of at most ${storeKeys.toLocaleString('en-US')} keys (so that the store's own memory stays put) calls ${deniedKeys.toLocaleString('en-US')} new keys twice each: the first call admitted, the second denied.` +
      ` Heap (JS heap and external, after a full GC) once warmed up (the store and the summary full), then after the flood; the same without analytics for comparison.` +
      ` Analytics keep a summary of \`size\` = ${size} keys per period, whatever the number of keys denied.`,
    '',
    table(
      ['limiter', 'heap warmed up', 'after the flood', 'growth', 'denied', 'CPU ns per key (2 calls)', 'keys top() lists'],
      [heapRow('**analytics: true**', analytics), heapRow('no analytics', plain)],
      ['l', 'r', 'r', 'r', 'r', 'r', 'r'],
    ),
  ].join('\n');
}

function table(header: string[], rows: string[][], align: ('l' | 'r')[]): string {
  const rule = header.map((_, i) => (align[i] === 'r' ? '---:' : '---'));
  return [header, rule, ...rows].map((row) => `| ${row.join(' | ')} |`).join('\n');
}

// ---------------------------------------------------------------- the worker

/** CPU time this process's main thread has run, in ns (Linux), or NaN. */
function mainThreadCpuNs(): number {
  try {
    return Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]);
  } catch {
    return Number.NaN;
  }
}

/** The overrides of the operated limiter, for a run over `pool`; and how many of the pool's keys they apply to. */
function overridesFor(pool: readonly string[]): { key: string; limit: number }[] {
  const overrides: { key: string; limit: number }[] = [];
  for (let i = 0; i < OVERRIDES.exact; i++) {
    const called = i % 2 === 0;
    const key = called ? (pool[(i * 7919) % pool.length] as string) : `customer:${i}`;
    overrides.push({ key, limit: called && i < 2 * OVERRIDES.denying ? 1 : 2 * LIMIT });
  }
  for (let i = 0; i < OVERRIDES.prefixes; i++) {
    // 10.1.<b>.1* covers 10.1.b.1, 10.1.b.10-19 and 10.1.b.100-199 of the pool (keys 65,536 and up).
    overrides.push({ key: i < OVERRIDES.matching ? `10.1.${i}.1*` : `tenant:${i}:*`, limit: 2 * LIMIT });
  }
  return overrides;
}

function overriddenCount(pool: readonly string[], overrides: readonly { key: string }[]): number {
  const exact = new Set(overrides.filter((o) => !o.key.endsWith('*')).map((o) => o.key));
  const prefixes = overrides.filter((o) => o.key.endsWith('*')).map((o) => o.key.slice(0, -1));
  return pool.filter((key) => exact.has(key) || prefixes.some((p) => key.startsWith(p))).length;
}

async function throughput(task: ThroughputTask): Promise<OperateThroughput> {
  const pool = keyPool(task.randomKeys);
  const redis = task.row === 'memory' ? undefined : new Redis({ port: task.redisPort, host: '127.0.0.1', lazyConnect: true });
  if (redis !== undefined) {
    await redis.connect();
    await redis.flushall(); // the worker before this one left its overrides and counts
  }
  const store = redis === undefined ? new MemoryStore() : new RedisStore({ client: redis });
  const operated = task.variant === 'operated';
  const limiter = createLimiter({
    store,
    algorithm: 'fixed-window',
    limit: LIMIT,
    windowMs: WINDOW_MS,
    // A loaded machine must not turn slow answers into decisions of the store-failure policy (counted as errors below).
    timeoutMs: 10_000,
    ...(operated ? { overrides: true, analytics: true } : {}),
  });
  let overriddenKeys = 0;
  if (operated) {
    const overrides = overridesFor(pool);
    for (const { key, limit } of overrides) await limiter.overrides.set(key, [{ name: 'default', limit }]);
    overriddenKeys = overriddenCount(pool, overrides);
  }
  const warmup = randomSequence(pool, Math.min(task.ops, 200_000), 3);
  const keys = randomSequence(pool, task.ops);
  // Warm-up: every key once (memory), then random calls: code compiled, the store's tables grown.
  if (redis === undefined) await run(limiter, pool, 1);
  await run(limiter, warmup, task.inFlight);
  const cpuBefore = mainThreadCpuNs();
  const started = process.hrtime.bigint();
  const outcome = await run(limiter, keys, task.inFlight);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const cpuSeconds = (mainThreadCpuNs() - cpuBefore) / 1e9;
  await limiter.close();
  redis?.disconnect();
  return { opsPerSecond: task.ops / seconds, opsPerCpuSecond: task.ops / cpuSeconds, ...outcome, overriddenKeys };
}

/** Calls `keys` in order, `inFlight` at a time (1: each awaited in turn). */
async function run(limiter: Limiter, keys: readonly string[], inFlight: number): Promise<{ denied: number; errors: number }> {
  let denied = 0;
  let errors = 0;
  let next = 0;
  const lane = async () => {
    while (next < keys.length) {
      const key = keys[next++] as string;
      try {
        const decision = await limiter.consume(key);
        if (isUnmeasured(decision))
          errors++; // the store failed: onStoreError decided
        else if (!decision.allowed) denied++;
      } catch {
        errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: inFlight }, lane));
  return { denied, errors };
}

const gc = (globalThis as { gc?: () => void }).gc;

function usedBytes(): number {
  if (gc === undefined) throw new Error('operate.ts needs --expose-gc');
  for (let i = 0; i < 3; i++) gc();
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.external;
}

async function heap(task: HeapTask): Promise<OperateHeap> {
  const limiter = createLimiter({
    store: new MemoryStore({ maxKeys: task.storeKeys }),
    algorithm: 'fixed-window',
    limit: 1,
    windowMs: WINDOW_MS,
    ...(task.analytics ? { analytics: true } : {}),
  });
  const flood = async (prefix: string, count: number) => {
    let denials = 0;
    for (let i = 0; i < count; i++) {
      const key = `${prefix}${i}`;
      await limiter.consume(key);
      if (!(await limiter.consume(key)).allowed) denials++;
    }
    return denials;
  };
  await flood('warm:', 4 * task.storeKeys); // the store full and evicting, the summary full
  const beforeBytes = usedBytes();
  const cpuBefore = mainThreadCpuNs();
  const denials = await flood('flood:', task.deniedKeys);
  const nsPerKey = (mainThreadCpuNs() - cpuBefore) / task.deniedKeys;
  const afterBytes = usedBytes();
  const topKeys = task.analytics ? (await limiter.top({ n: 10_000 })).items.length : 0;
  await limiter.close();
  return { beforeBytes, afterBytes, denials, nsPerKey, topKeys };
}

// Started as a worker (runWorker('./operate.ts', tasks)): runs the tasks in order and replies with their results.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const tasks = workerInput<OperateTask[]>();
  const answers: (OperateThroughput | OperateHeap)[] = [];
  for (const task of tasks) answers.push(task.kind === 'heap' ? await heap(task) : await throughput(task));
  await reply(answers);
  process.exit(0);
}
