#!/usr/bin/env node
// The test step of `npm test`: runs every workspace package's `test` script with
// turbo, one package at a time (Redis tests start servers, and the machine is
// small), and ends with what ran: tests run and passed per package, then one
// plain `N passed, N failed` line.
//
// Counts come from each package's own runner, read back from the log turbo keeps
// of every task (<package>/.turbo/turbo-test.log): vitest's `Tests  N passed (N)`
// line and node --test's `tests`/`pass`/`fail` lines. That needs nothing from the
// packages (new ones are counted as they come) and keeps the runners' own output
// as it is. Exit codes come from turbo's run summary (--summarize). A package
// whose runner prints no counts (a check script) counts as one test. Arguments
// are passed to turbo (`node scripts/run-tests.mjs --filter=@floodgate/koa`).
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const runs = join(root, '.turbo', 'runs');
// An older run's summary must not be read as this one's.
rmSync(runs, { recursive: true, force: true });
const started = Date.now();

// --continue: a failure in one package still lets the others run, so the counts are complete.
const env = { ...process.env, PATH: `${join(root, 'node_modules', '.bin')}${delimiter}${process.env.PATH ?? ''}` };
const turbo = spawnSync('turbo', ['run', 'test', '--concurrency=1', '--continue', '--output-logs=errors-only', '--summarize', ...process.argv.slice(2)], {
  cwd: root,
  env,
  stdio: 'inherit',
  shell: process.platform === 'win32',
});
if (turbo.error) throw turbo.error;

const summaryFile = existsSync(runs) ? readdirSync(runs).find((f) => f.endsWith('.json')) : undefined;
if (summaryFile === undefined) {
  console.error('run-tests: turbo wrote no run summary (.turbo/runs/*.json)');
  process.exit(turbo.status || 1);
}
const tasks = JSON.parse(readFileSync(join(runs, summaryFile), 'utf8')).tasks.filter((t) => t.task === 'test');

let passed = 0;
let failed = 0;
console.log('\nTests per package (tests run, passed):');
for (const task of tasks.sort((a, b) => a.package.localeCompare(b.package))) {
  const ok = task.execution?.exitCode === 0;
  const log = join(root, task.directory, '.turbo', 'turbo-test.log');
  const fresh = existsSync(log) && statSync(log).mtimeMs >= started - 1000; // not a log left by an earlier run
  const counts = countsIn(fresh ? readFileSync(log, 'utf8') : '') ?? { run: 1, passed: ok ? 1 : 0, note: ' (a check script: one test)' };
  // A runner that fails without a failed test (a crash, an unhandled error) is still a failure.
  const packageFailed = Math.max(counts.run - counts.passed, ok ? 0 : 1);
  passed += counts.passed;
  failed += packageFailed;
  const status = ok ? '' : ` FAILED (exit code ${task.execution?.exitCode ?? 'none'})`;
  console.log(`  ${task.package.padEnd(42)} ${String(counts.run).padStart(5)} run, ${String(counts.passed).padStart(5)} passed${counts.note ?? ''}${status}`);
}
console.log(`\n${passed} passed, ${failed} failed`);
process.exit(turbo.status === 0 && failed === 0 ? 0 : 1);

/** vitest: `Tests  2 failed | 40 passed | 1 skipped (43)`; node --test: `# tests 5` / `ℹ pass 5`. */
function countsIn(text) {
  const plain = text.replace(new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g'), ''); // without ANSI colours
  const vitest = /^\s*Tests\s+(.+?)\s+\((\d+)\)\s*$/m.exec(plain);
  if (vitest) {
    const passedTests = Number(/(\d+) passed/.exec(vitest[1])?.[1] ?? 0);
    const skipped = Number(/(\d+) (?:skipped|todo)/.exec(vitest[1])?.[1] ?? 0);
    return { run: Number(vitest[2]) - skipped, passed: passedTests };
  }
  const node = (name) => Number(new RegExp(`^[#ℹ] ${name} (\\d+)$`, 'm').exec(plain)?.[1] ?? Number.NaN);
  if (!Number.isNaN(node('tests'))) return { run: node('tests') - (node('skipped') || 0) - (node('todo') || 0), passed: node('pass') };
  return undefined;
}
