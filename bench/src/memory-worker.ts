/*
 * One measurement of one in-process store, in a process of its own: a fresh
 * heap and a JIT that has seen no other library, so no contender pays for
 * another's garbage or inherits its type feedback. Started by memory.ts.
 *
 *   throughput: decisions per second on one hot key or on random keys
 *               (optionally with a CPU profile of the measured loop)
 *   heap:       bytes the store adds per key, with the keys already alive
 */
import { reply, workerInput } from './child.js';
import { HOT_KEY, keyPool, randomSequence } from './keys.js';
import { type Contender, createMemoryContender, type MemoryContenderId } from './memory-contenders.js';
import { startProfiling } from './profiler.js';

export type MemoryTask =
  | { kind: 'throughput'; contender: MemoryContenderId; scenario: 'hot' | 'random'; ops: number; randomKeys: number; profilePath?: string }
  | { kind: 'heap'; contender: MemoryContenderId; keys: number };

export interface ThroughputResult {
  opsPerSecond: number;
  admitted: number;
}

export interface HeapResult {
  bytesPerKey: number;
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
  const started = process.hrtime.bigint();
  const admitted = await decideAll(contender, keys, 0, keys.length);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  await stopProfiling?.();
  return { opsPerSecond: task.ops / seconds, admitted };
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

const task = workerInput<MemoryTask>();
await reply(task.kind === 'throughput' ? await throughput(task) : await heap(task));
process.exit(0);
