/*
 * The machine and software a run measured: CPU, cores, Node, Redis, the
 * versions of every library compared, and the commit of the packages.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism, loadavg, release, totalmem } from 'node:os';

export interface Machine {
  cpu: string;
  cores: number;
  memoryGb: number;
  os: string;
  node: string;
  redis: string;
  /** Load average when the run started: a busy machine makes absolute numbers meaningless, ratios less so. */
  loadAverage: number[];
  commit: string;
  libraries: Record<string, string>;
}

/** Peers and frameworks, as installed for the bench package. */
const libraries = [
  '@floodgate/core',
  'express-rate-limit',
  'rate-limit-redis',
  'rate-limiter-flexible',
  '@acpr/rate-limit-postgresql',
  'koa-ratelimit',
  'hono-rate-limiter',
  '@fastify/rate-limit',
  '@nestjs/throttler',
  '@upstash/ratelimit',
  '@upstash/redis',
  'express',
  'koa',
  'hono',
  '@hono/node-server',
  'fastify',
  '@nestjs/core',
  'ioredis',
  'pg',
  'mysql2',
  'better-sqlite3',
  'autocannon',
];

function version(name: string): string {
  try {
    const manifest = JSON.parse(readFileSync(new URL(`../node_modules/${name}/package.json`, import.meta.url), 'utf8')) as { version: string };
    return manifest.version;
  } catch {
    return 'not installed';
  }
}

function run(command: string, args: string[]): string {
  try {
    return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return '';
  }
}

export function describeMachine(): Machine {
  const cpuinfo = (() => {
    try {
      return readFileSync('/proc/cpuinfo', 'utf8');
    } catch {
      return '';
    }
  })();
  const cpu = /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1]?.trim() ?? 'unknown';
  const repo = new URL('../..', import.meta.url).pathname;
  const head = run('git', ['-C', repo, 'rev-parse', '--short', 'HEAD']) || 'unknown';
  const dirty = run('git', ['-C', repo, 'status', '--porcelain', '--', 'packages']) !== '';
  return {
    cpu,
    cores: availableParallelism(),
    memoryGb: Math.round(totalmem() / 2 ** 30),
    os: `Linux ${release()}`,
    node: process.version,
    redis: /v=(\S+)/.exec(run('redis-server', ['--version']))?.[1] ?? 'unknown',
    loadAverage: loadavg().map((x) => Math.round(x * 100) / 100),
    commit: dirty ? `${head} + uncommitted changes in packages/` : head,
    libraries: Object.fromEntries(libraries.map((name) => [name, version(name)])),
  };
}
