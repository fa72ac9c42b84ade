/*
 * CPU profiles of Floodgate's hot paths (V8's sampling profiler, as
 * `node --cpu-prof`, over the measured loop only), summarised as where the
 * time goes: by package, and the top functions by self time. They are what
 * BENCHMARKS.md cites when a target does not hold.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { runWorker, startWorker } from './child.js';
import type { BenchConfig } from './config.js';
import type { Framework } from './http-apps.js';
import type { ServerInput } from './http-server.js';
import { log } from './log.js';
import type { MemoryTask } from './memory-worker.js';
import type { RedisProfileTask } from './profile-worker.js';
import { startBenchRedis } from './redis-server.js';

export interface Frame {
  name: string;
  /** Share of all samples, %. */
  selfPercent: number;
}

export interface Profile {
  scenario: string;
  /** The .cpuprofile, relative to the repository. */
  file: string;
  /** Self time grouped by where the code lives (@floodgate/core, ioredis, node internals, GC, ...). */
  byPackage: Frame[];
  topFunctions: Frame[];
}

interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; hitCount?: number }[];
  samples: number[];
}

const repo = new URL('../..', import.meta.url).pathname;

/** Which package a script URL belongs to. */
function packageOf(url: string, functionName: string): string {
  if (url === '') return functionName.startsWith('(') ? functionName : '(native)';
  if (url.startsWith('node:')) return 'node internals';
  const floodgate = /\/packages\/([^/]+)\//.exec(url);
  if (floodgate) return `@floodgate/${floodgate[1]}`;
  const modules = url.split('/node_modules/');
  if (modules.length > 1) {
    const path = (modules[modules.length - 1] as string).split('/');
    return path[0]?.startsWith('@') ? `${path[0]}/${path[1]}` : (path[0] as string);
  }
  if (url.includes('/bench/src/')) return 'harness';
  return url;
}

function shortUrl(url: string): string {
  const modules = url.split('/node_modules/');
  if (modules.length > 1) return modules[modules.length - 1] as string;
  return url.replace(/^file:\/\//, '').replace(repo, '');
}

/** Self time per package and per function, from a .cpuprofile. */
export function summarise(scenario: string, file: string, profile: CpuProfile, top = 10): Profile {
  const total = profile.samples.length || 1;
  const hits = new Map<number, number>();
  for (const id of profile.samples) hits.set(id, (hits.get(id) ?? 0) + 1);
  const byPackage = new Map<string, number>();
  const byFunction = new Map<string, number>();
  for (const node of profile.nodes) {
    const count = hits.get(node.id) ?? 0;
    if (count === 0) continue;
    const { functionName, url, lineNumber } = node.callFrame;
    const pkg = packageOf(url, functionName);
    byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + count);
    const name = url === '' ? functionName : `${functionName || '(anonymous)'} ${shortUrl(url)}:${lineNumber + 1}`;
    byFunction.set(name, (byFunction.get(name) ?? 0) + count);
  }
  const ranked = (counts: Map<string, number>, n: number): Frame[] =>
    [...counts]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([name, count]) => ({ name, selfPercent: Math.round((count / total) * 1000) / 10 }));
  return { scenario, file, byPackage: ranked(byPackage, 8), topFunctions: ranked(byFunction, top) };
}

/** Where profiles are kept after a run (`*.cpuprofile` is git-ignored). */
export const profileDir = new URL('../profiles/', import.meta.url).pathname;

async function profiled(scenario: string, file: string, run: (path: string) => Promise<void>): Promise<Profile> {
  mkdirSync(profileDir, { recursive: true });
  const path = join(profileDir, `${file}.cpuprofile`);
  await run(path);
  const profile = summarise(scenario, `bench/profiles/${file}.cpuprofile`, JSON.parse(readFileSync(path, 'utf8')) as CpuProfile);
  log(`profile ${file}: ${profile.byPackage.map((f) => `${f.name} ${f.selfPercent}%`).join(', ')}`);
  return profile;
}

/**
 * Profiles Floodgate's measured loops: the memory store in-process, the Redis
 * store in-process (the Node side; Redis's own time is in redis.ts's µs per
 * call), and each framework's server with the memory store under autocannon.
 */
export async function profileHotPaths(config: BenchConfig): Promise<Profile[]> {
  const profiles: Profile[] = [];
  for (const [scenario, file, contender, kind] of [
    ['Floodgate MemoryStore fixed-window, 100k random keys', 'memory-fixed-window-random', 'floodgate-fixed-window', 'random'],
    ['Floodgate MemoryStore gcra, one hot key', 'memory-gcra-hot', 'floodgate-gcra', 'hot'],
  ] as const) {
    profiles.push(
      await profiled(scenario, file, async (profilePath) => {
        const ops = kind === 'hot' ? config.memory.hotOps : config.memory.randomOps;
        const task: MemoryTask = { kind: 'throughput', contender, scenario: kind, ops, randomKeys: config.memory.randomKeys, profilePath };
        await runWorker('./memory-worker.ts', task, ['--expose-gc']);
      }),
    );
  }
  const redis = await startBenchRedis();
  try {
    profiles.push(
      await profiled(
        `Floodgate RedisStore fixed-window, ${config.redis.inFlight} in flight (Node side)`,
        'redis-fixed-window-concurrent',
        async (profilePath) => {
          const task: RedisProfileTask = {
            contender: 'floodgate-fixed-window',
            redisPort: redis.port,
            ops: config.redis.concurrentOps,
            inFlight: config.redis.inFlight,
            profilePath,
          };
          await runWorker('./profile-worker.ts', task);
        },
      ),
    );
    for (const framework of ['express', 'koa', 'hono'] as const satisfies readonly Framework[]) {
      profiles.push(
        await profiled(`${framework} + Floodgate memory store: the server under autocannon`, `http-${framework}-floodgate-memory`, async (profilePath) => {
          const input: ServerInput = { framework, variant: 'floodgate-memory', redisPort: redis.port };
          const server = startWorker('./http-server.ts', { input });
          try {
            const { port } = await server.receive<{ port: number }>(30_000);
            const url = `http://127.0.0.1:${port}/`;
            const { connections, warmupSeconds, durationSeconds } = config.http;
            await autocannon({ url, connections, duration: warmupSeconds });
            server.send({ profileStart: profilePath });
            await server.receive(10_000);
            await autocannon({ url, connections, duration: durationSeconds });
            server.send('profileStop');
            await server.receive(30_000);
          } finally {
            await server.stop();
          }
        }),
      );
    }
  } finally {
    await redis.stop();
  }
  return profiles;
}
