/*
 * In-process memory stores: decisions per second on one hot key and on 100k
 * random keys, and heap bytes per key. Every measurement runs in a fresh
 * child process (memory-worker.ts); each round runs every contender once, in
 * a rotated order, so that drift on a shared machine hits all of them alike.
 */
import { runWorker } from './child.js';
import type { BenchConfig } from './config.js';
import { log } from './log.js';
import { type ContenderInfo, type MemoryContenderId, memoryContenders } from './memory-contenders.js';
import type { EvictionResult, HeapResult, MemoryTask, ThroughputResult } from './memory-worker.js';
import { formatRate, rotate } from './stats.js';
import type { WaitResult, WaitTask } from './wait-worker.js';

export type MemoryScenario = 'hot' | 'random';

export interface MemoryResults {
  contenders: readonly ContenderInfo[];
  /** Decisions per second, one entry per round, per scenario and contender. */
  throughput: Record<MemoryScenario, Record<MemoryContenderId, number[]>>;
  /** Calls that were not admitted (should be 0: the limits are out of reach). */
  denied: Record<MemoryContenderId, number>;
  heapBytesPerKey: Record<MemoryContenderId, number>;
  heapKeys: number;
  randomKeys: number;
  ops: Record<MemoryScenario, number>;
  /** Decisions per second of the worker's main-thread CPU time, per round (Linux): the same runs, the machine's other load left out. */
  cpuThroughput: Record<MemoryScenario, Record<MemoryContenderId, number[]>>;
  /** Issue 20.2: new keys past maxKeys against new keys while filling. */
  eviction: EvictionResult & { maxKeys: number };
  /** Issue 15: CPU used while 100 calls wait on one key, against the same process idle. */
  waiting: WaitResult;
}

const byContender = <T>(make: () => T) => Object.fromEntries(memoryContenders.map((c) => [c.id, make()])) as Record<MemoryContenderId, T>;

export async function benchMemory(config: BenchConfig): Promise<MemoryResults> {
  const { rounds, hotOps, randomOps, randomKeys, heapKeys, evictionKeys, evictionChunks, waiters, waitMs } = config.memory;
  const ops: Record<MemoryScenario, number> = { hot: hotOps, random: randomOps };
  const results: MemoryResults = {
    contenders: memoryContenders,
    throughput: { hot: byContender(() => []), random: byContender(() => []) },
    cpuThroughput: { hot: byContender(() => []), random: byContender(() => []) },
    denied: byContender(() => 0),
    heapBytesPerKey: byContender(() => Number.NaN),
    heapKeys,
    randomKeys,
    ops,
    eviction: { maxKeys: evictionKeys, fillingNs: Number.NaN, overNs: [], keysHeld: 0 },
    waiting: { waiters, waitMs, idleCpuMs: Number.NaN, waitingCpuMs: Number.NaN, admittedEarly: 0 },
  };
  for (let round = 0; round < rounds; round++) {
    for (const scenario of ['hot', 'random'] as const) {
      for (const contender of rotate(memoryContenders, round)) {
        const task: MemoryTask = { kind: 'throughput', contender: contender.id, scenario, ops: ops[scenario], randomKeys };
        const { opsPerSecond, opsPerCpuSecond, admitted } = await runWorker<ThroughputResult>('./memory-worker.ts', task, ['--expose-gc']);
        results.throughput[scenario][contender.id].push(opsPerSecond);
        results.cpuThroughput[scenario][contender.id].push(opsPerCpuSecond);
        results.denied[contender.id] += ops[scenario] - admitted;
        log(`memory round ${round + 1}/${rounds} ${scenario.padEnd(6)} ${contender.id.padEnd(24)} ${formatRate(opsPerSecond)}/s`);
      }
    }
  }
  for (const contender of memoryContenders) {
    if (contender.stateless || contender.variant) continue;
    const { bytesPerKey } = await runWorker<HeapResult>('./memory-worker.ts', { kind: 'heap', contender: contender.id, keys: heapKeys } satisfies MemoryTask, [
      '--expose-gc',
    ]);
    results.heapBytesPerKey[contender.id] = bytesPerKey;
    log(`memory heap ${contender.id.padEnd(24)} ${bytesPerKey.toFixed(1)} B/key at ${heapKeys} keys`);
  }
  const eviction = await runWorker<EvictionResult>(
    './memory-worker.ts',
    { kind: 'eviction', maxKeys: evictionKeys, chunks: evictionChunks } satisfies MemoryTask,
    ['--expose-gc'],
  );
  results.eviction = { maxKeys: evictionKeys, ...eviction };
  log(
    `memory eviction: ${eviction.fillingNs.toFixed(0)} ns per new key while filling ${evictionKeys}, then ${eviction.overNs.map((ns) => ns.toFixed(0)).join(', ')} ns past maxKeys (${eviction.keysHeld} keys held)`,
  );
  results.waiting = await runWorker<WaitResult>('./wait-worker.ts', { waiters, waitMs } satisfies WaitTask);
  log(
    `memory wait(): ${results.waiting.waitingCpuMs.toFixed(2)} ms CPU in ${waitMs} ms with ${waiters} waiters, ${results.waiting.idleCpuMs.toFixed(2)} ms idle`,
  );
  return results;
}
