#!/usr/bin/env node
// Runs a pnpm command on a machine that may have only Node and npm.
//
// `npm run demo` and `npm test` call this script: it finds pnpm 10 (on the PATH,
// or installs the pinned version into ./.tools with npm, no global install and
// no corepack), installs the workspace from the lockfile when node_modules is
// missing or older than the lockfile, then runs `pnpm <args>`.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const pinned = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).packageManager; // pnpm@x.y.z
const version = pinned.split('@')[1];
const isWindows = process.platform === 'win32';

const toolsBin = join(root, '.tools', 'node_modules', '.bin');
// Scripts run by pnpm call `pnpm` and `turbo` themselves: make the local pnpm findable.
const env = { ...process.env, PATH: `${toolsBin}${delimiter}${process.env.PATH ?? ''}`, TURBO_TELEMETRY_DISABLED: '1' };

function run(cmd, args, options = {}) {
  const result = spawnSync(cmd, args, { stdio: 'inherit', cwd: root, shell: isWindows, env, ...options });
  if (result.error) throw result.error;
  return result.status ?? 1;
}

function pnpmOnPath() {
  const probe = spawnSync('pnpm', ['--version'], { encoding: 'utf8', shell: isWindows, env });
  return probe.status === 0 && probe.stdout.trim() === version ? 'pnpm' : undefined;
}

function localPnpm() {
  const bin = join(toolsBin, isWindows ? 'pnpm.cmd' : 'pnpm');
  if (!existsSync(bin)) {
    console.error(`[floodgate] installing pnpm ${version} into .tools/ (one time)`);
    const status = run('npm', ['install', '--no-save', '--no-audit', '--no-fund', '--prefix', join(root, '.tools'), `pnpm@${version}`]);
    if (status !== 0) process.exit(status);
  }
  return bin;
}

const pnpm = pnpmOnPath() ?? localPnpm();

const lockfile = join(root, 'pnpm-lock.yaml');
const marker = join(root, 'node_modules', '.modules.yaml');
const stale = !existsSync(marker) || statSync(marker).mtimeMs < statSync(lockfile).mtimeMs;
if (stale) {
  const status = run(pnpm, ['install', '--frozen-lockfile']);
  if (status !== 0) process.exit(status);
}

process.exit(run(pnpm, process.argv.slice(2)));
