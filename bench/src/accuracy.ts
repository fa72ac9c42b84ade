/*
 * Accuracy under concurrency: 4 processes, each with its own connection, make
 * 3000 calls at once on one key limited to 1000 (per day, so that nothing
 * refills during the race). An exact limiter admits exactly 1000.
 */

import type { AccuracyCommand } from './accuracy-worker.js';
import { startWorker, type Worker } from './child.js';
import type { BenchConfig } from './config.js';
import { log } from './log.js';
import { type RedisContenderId, type RunOutcome, redisContenderInfo } from './redis-contenders.js';
import { startBenchRedis } from './redis-server.js';

export const accuracyContenders: readonly RedisContenderId[] = [
  'floodgate-fixed-window',
  'floodgate-sliding-log',
  'floodgate-token-bucket',
  'floodgate-gcra',
  'floodgate-sliding-window',
  'floodgate-leaky-bucket',
  'rate-limit-redis',
  'rate-limiter-flexible',
];

/** The algorithms Floodgate's contract promises exact under concurrency. */
export const exactContenders: ReadonlySet<RedisContenderId> = new Set([
  'floodgate-fixed-window',
  'floodgate-sliding-log',
  'floodgate-token-bucket',
  'floodgate-gcra',
]);

export interface AccuracyRow {
  contender: RedisContenderId;
  label: string;
  attempted: number;
  admitted: number;
  errors: number;
  firstError?: string;
}

export interface AccuracyResults {
  rows: AccuracyRow[];
  processes: number;
  callsPerProcess: number;
  limit: number;
  inFlight: number;
  windowMs: number;
}

const WINDOW_MS = 86_400_000;

export async function benchAccuracy(config: BenchConfig): Promise<AccuracyResults> {
  const { processes, callsPerProcess, limit, inFlight } = config.accuracy;
  const server = await startBenchRedis();
  const workers: Worker[] = [];
  const rows: AccuracyRow[] = [];
  try {
    for (let i = 0; i < processes; i++) workers.push(startWorker('./accuracy-worker.ts', { input: { redisPort: server.port } }));
    await Promise.all(workers.map((worker) => worker.receive(30_000)));
    for (const [index, contender] of accuracyContenders.entries()) {
      const setup: AccuracyCommand = { setup: contender, key: `198.51.100.${index}`, rule: { limit, windowMs: WINDOW_MS } };
      for (const worker of workers) worker.send(setup);
      await Promise.all(workers.map((worker) => worker.receive(30_000)));
      // Every process is ready: they start together.
      const go: AccuracyCommand = { go: true, calls: callsPerProcess, inFlight };
      for (const worker of workers) worker.send(go);
      const outcomes = await Promise.all(workers.map((worker) => worker.receive<RunOutcome>(60_000)));
      const row: AccuracyRow = {
        contender,
        label: redisContenderInfo[contender].label,
        attempted: processes * callsPerProcess,
        admitted: outcomes.reduce((sum, o) => sum + o.admitted, 0),
        errors: outcomes.reduce((sum, o) => sum + o.errors, 0),
      };
      const firstError = outcomes.find((o) => o.firstError !== undefined)?.firstError;
      if (firstError !== undefined) row.firstError = firstError;
      rows.push(row);
      log(`accuracy ${contender.padEnd(24)} admitted ${row.admitted} of ${row.attempted} (limit ${limit}), ${row.errors} errors`);
    }
  } finally {
    await Promise.all(workers.map((worker) => worker.stop()));
    await server.stop();
  }
  return { rows, processes, callsPerProcess, limit, inFlight, windowMs: WINDOW_MS };
}
