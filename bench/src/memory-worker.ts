/*
 * One measurement of one in-process store, in a process of its own: a fresh
 * heap and a JIT that has seen no other library, so no contender pays for
 * another's garbage or inherits its type feedback. Started by memory.ts.
 *
 *   throughput: decisions per second on one hot key or on random keys
 *               (optionally with a CPU profile of the measured loop)
 *   heap:       bytes the store adds per key, with the keys already alive
 */
import { readFileSync } from 'node:fs';
import { createLimiter, MemoryStore } from '@floodgate/core';
import { reply, workerInput } from './child.js';
import { HOT_KEY, keyPool, randomSequence } from './keys.js';
import { type Contender, createMemoryContender, LIMIT, type MemoryContenderId, WINDOW_MS } from './memory-contenders.js';
import { startProfiling } from './profiler.js';

export type MemoryTask =
  | { kind: 'throughput'; contender: MemoryContenderId; scenario: 'hot' | 'random'; ops: number; randomKeys: number; profilePath?: string }
  | { kind: 'heap'; contender: MemoryContenderId; keys: number }
  | { kind: 'eviction'; maxKeys: number; chunks: number };

export interface ThroughputResult {
  opsPerSecond: number;
  /** Decisions per second of the main thread's own CPU time (Linux; NaN elsewhere): what other processes on a busy machine do not move. */
  opsPerCpuSecond: number;
  admitted: number;
}

export interface HeapResult {
  bytesPerKey: number;
}

export interface EvictionResult {
  /** ns per call for a new key while the store fills up to maxKeys (main-thread CPU time). */
  fillingNs: number;
  /** ns per call for a new key past maxKeys (each evicts one), per chunk of maxKeys calls, in order. */
  overNs: number[];
  /** Keys the store holds at the end (maxKeys: bounded). */
  keysHeld: number;
}

/** What must stay alive until the last heap reading (keys, stores). */
const retained: unknown[] = [];

const gc = (globalThis as { gc?: () => void }).gc;

function collect(): void {
  if (gc === undefined) throw new Error('memory-worker needs --expose-gc');
  for (let i = 0; i < 3; i++) gc();
}

/** JS heap plus memory outside it (typed arrays' buffers live there). */
function usedBytes(): number {
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.external;
}

/**
 * CPU time this process's main thread has run, in ns (Linux's schedstat), or
 * NaN where there is none: wall time counts the time other processes hold the
 * cores; this does not.
 */
function mainThreadCpuNs(): number {
  try {
    return Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]);
  } catch {
    return Number.NaN;
  }
}

/** The timed loop: each call awaited in turn, as a request handler would. */
async function decideAll(contender: Contender, keys: readonly string[], from: number, to: number): Promise<number> {
  let admitted = 0;
  for (let i = from; i < to; i++) {
    try {
      if (contender.admits(await contender.call(keys[i] as string))) admitted++;
    } catch {
      // a rejection is the library's way of denying
    }
  }
  return admitted;
}

async function throughput(task: Extract<MemoryTask, { kind: 'throughput' }>): Promise<ThroughputResult> {
  const contender = createMemoryContender(task.contender);
  let keys: string[];
  if (task.scenario === 'hot') {
    keys = new Array<string>(task.ops).fill(HOT_KEY);
  } else {
    const pool = keyPool(task.randomKeys);
    keys = randomSequence(pool, task.ops);
    // Every key exists before the clock starts: the measurement is the steady state, not the first touch.
    await decideAll(contender, pool, 0, pool.length);
  }
  await decideAll(contender, keys, 0, Math.min(keys.length, Math.max(50_000, task.ops >> 2))); // warm-up: let the JIT settle
  collect();
  const stopProfiling = task.profilePath === undefined ? undefined : await startProfiling(task.profilePath);
  const cpuStarted = mainThreadCpuNs();
  const started = process.hrtime.bigint();
  const admitted = await decideAll(contender, keys, 0, keys.length);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const cpuSeconds = (mainThreadCpuNs() - cpuStarted) / 1e9;
  await stopProfiling?.();
  return { opsPerSecond: task.ops / seconds, opsPerCpuSecond: task.ops / cpuSeconds, admitted };
}

async function heap(task: Extract<MemoryTask, { kind: 'heap' }>): Promise<HeapResult> {
  const keys = keyPool(task.keys);
  retained.push(keys);
  // Compile the library's hot paths on a throw-away instance, so that code is not counted as per-key memory.
  const warm = createMemoryContender(task.contender);
  await decideAll(
    warm,
    keyPool(20_000).map((key) => `warm:${key}`),
    0,
    20_000,
  );
  const contender = createMemoryContender(task.contender);
  retained.push(warm, contender);
  collect();
  const before = usedBytes();
  await decideAll(contender, keys, 0, keys.length);
  collect();
  const after = usedBytes();
  return { bytesPerKey: (after - before) / task.keys };
}

/**
 * Issue 20.2: new keys past `maxKeys`, each of which makes the store forget
 * one, against new keys while it fills. Every key is new (distinct
 * IPv4-like strings, made before timing); fixed-window, one rule.
 */
async function eviction(task: Extract<MemoryTask, { kind: 'eviction' }>): Promise<EvictionResult> {
  const { maxKeys, chunks } = task;
  const keys = keyPool(maxKeys * (chunks + 1));
  const store = new MemoryStore({ maxKeys });
  const limiter = createLimiter({ algorithm: 'fixed-window', limit: LIMIT, windowMs: WINDOW_MS, store });
  // Warm the code paths on another limiter (its own store), so the first chunk does not pay for compiling.
  const warm = createLimiter({ algorithm: 'fixed-window', limit: LIMIT, windowMs: WINDOW_MS, store: new MemoryStore({ maxKeys: 10_000 }) });
  for (let i = 0; i < 50_000; i++) await warm.consume(`warm:${i}`);
  collect();
  const timed = async (from: number, to: number): Promise<number> => {
    const cpu = mainThreadCpuNs();
    for (let i = from; i < to; i++) await limiter.consume(keys[i] as string);
    return (mainThreadCpuNs() - cpu) / (to - from);
  };
  const fillingNs = await timed(0, maxKeys);
  const overNs: number[] = [];
  for (let chunk = 1; chunk <= chunks; chunk++) overNs.push(await timed(chunk * maxKeys, (chunk + 1) * maxKeys));
  return { fillingNs, overNs, keysHeld: store.size('fg:', 'default') };
}

const task = workerInput<MemoryTask>();
await reply(task.kind === 'throughput' ? await throughput(task) : task.kind === 'heap' ? await heap(task) : await eviction(task));
process.exit(0);
