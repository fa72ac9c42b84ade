#!/usr/bin/env node
// Runs one example from a fresh clone: `pnpm example <name> [args...]` (or
// `npm run example <name>`, through bootstrap.mjs). Builds only the packages
// the example depends on, with turbo (cached: a second run builds nothing),
// then runs the example's `start` script with the remaining arguments.
// Without a name, lists the examples.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const isWindows = process.platform === 'win32';
// turbo from the workspace, also when this script is run with plain `node`.
const env = { ...process.env, PATH: `${join(root, 'node_modules', '.bin')}${delimiter}${process.env.PATH ?? ''}`, TURBO_TELEMETRY_DISABLED: '1' };

const examples = readdirSync(join(root, 'examples'), { withFileTypes: true })
  .filter((entry) => entry.isDirectory() && existsSync(join(root, 'examples', entry.name, 'package.json')))
  .map((entry) => {
    const manifest = JSON.parse(readFileSync(join(root, 'examples', entry.name, 'package.json'), 'utf8'));
    return { name: entry.name, pkg: manifest.name, description: manifest.description ?? '' };
  })
  .sort((a, b) => a.name.localeCompare(b.name));

const [name, ...args] = process.argv.slice(2);
const example = examples.find((e) => e.name === name || e.pkg === name);
if (example === undefined) {
  if (name !== undefined) console.error(`[floodgate] no example called '${name}'.`);
  console.error('Usage: pnpm example <name> (or npm run example <name>). Examples:\n');
  for (const e of examples) console.error(`  ${e.name.padEnd(22)}${e.description}`);
  process.exit(name === undefined ? 0 : 1);
}

function run(cmd, cmdArgs) {
  const result = spawnSync(cmd, cmdArgs, { stdio: 'inherit', cwd: root, shell: isWindows, env });
  if (result.error) throw result.error;
  return result.status ?? 1;
}

// `^...`: the example's dependencies (and theirs), not the example itself, which has nothing to build.
const built = run('turbo', ['run', 'build', `--filter=${example.pkg}^...`, '--output-logs=errors-only']);
if (built !== 0) process.exit(built);
process.exit(run('pnpm', ['--silent', '--filter', example.pkg, 'start', ...args]));
