/*
 * `pnpm bench [--quick] [--only=memory,redis,edge,http,accuracy,sql,operate] [--write|--no-write]`
 *
 * Runs Floodgate and its peers side by side (memory.ts, redis.ts, sql.ts,
 * edge.ts, http.ts, accuracy.ts) and what operating a limiter costs
 * (operate.ts), checks the targets of the open issues (targets.ts), prints the
 * report, and after a full run writes BENCHMARKS.md and docs/benchmarks.svg
 * at the repository root. Exits non-zero only when a benchmark crashes:
 * timings never fail a run.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { benchAccuracy } from './accuracy.js';
import { benchBoundary } from './boundary.js';
import { renderChart } from './chart.js';
import { parseArgs } from './config.js';
import { benchEdge } from './edge.js';
import { benchHttp } from './http.js';
import { log } from './log.js';
import { describeMachine } from './machine.js';
import { benchMemory } from './memory.js';
import { benchOperate } from './operate.js';
import { profileHotPaths } from './profile.js';
import { benchRedis, redisAlgorithmContenders } from './redis.js';
import { benchRedisInstructions, valgrindAvailable } from './redis-instructions.js';
import { renderReport } from './report.js';
import type { BenchResults } from './results.js';
import { benchSql } from './sql.js';
import { evaluateTargets } from './targets.js';

const args = process.argv.slice(2).filter((arg) => arg !== '--');
const config = parseArgs(args);

// Never hang CI: past the deadline, stop (child processes and redis-servers are killed on exit).
setTimeout(() => {
  log(`deadline of ${config.deadlineMs / 60_000} min reached: stopping`);
  process.exit(2);
}, config.deadlineMs).unref();

const started = Date.now();
const results: BenchResults = {
  command: ['pnpm bench', ...args].join(' '),
  quick: config.quick,
  startedAt: new Date(started).toISOString().replace(/\.\d+Z$/, 'Z'),
  elapsedMs: 0,
  machine: describeMachine(),
};
log(
  `${config.quick ? 'quick' : 'full'} run of ${[...config.only].join(', ')} on ${results.machine.cpu}, ${results.machine.cores} cores, Node ${results.machine.node}`,
);

if (config.only.has('memory')) results.memory = await benchMemory(config);
if (config.only.has('redis')) {
  results.redis = await benchRedis(config);
  // Instruction counts take a minute under valgrind and do not drift: full runs only.
  if (!config.quick && valgrindAvailable()) results.redisInstructions = await benchRedisInstructions(redisAlgorithmContenders, 500);
}
if (config.only.has('sql')) results.sql = await benchSql(config);
if (config.only.has('operate')) results.operate = await benchOperate(config);
if (config.only.has('edge')) results.edge = await benchEdge(config);
if (config.only.has('http')) results.http = await benchHttp(config);
if (config.only.has('accuracy')) {
  results.accuracy = await benchAccuracy(config);
  results.boundary = await benchBoundary();
}
// Profiles explain the numbers; a smoke run has no numbers worth explaining.
if (!config.quick) results.profiles = await profileHotPaths(config);
results.elapsedMs = Date.now() - started;

const targets = evaluateTargets(results);
const report = renderReport(results, targets);
process.stdout.write(report);

if (config.write) {
  const root = new URL('../../', import.meta.url);
  writeFileSync(new URL('BENCHMARKS.md', root), report);
  mkdirSync(new URL('docs/', root), { recursive: true });
  writeFileSync(new URL('docs/benchmarks.svg', root), renderChart(results));
  log('wrote BENCHMARKS.md and docs/benchmarks.svg');
}
const held = targets.filter((t) => t.holds).length;
log(
  `done in ${(results.elapsedMs / 1000).toFixed(0)} s: ${held} of ${targets.length} targets hold${config.quick ? ' (quick run: numbers not meaningful)' : ''}`,
);
// Timers of the libraries under test (stores' sweepers, ioredis) must not keep the harness alive.
process.exit(0);
