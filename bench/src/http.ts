/*
 * HTTP: autocannon (50 connections, in this process) against one server at a
 * time (in a child process): every framework bare, with Floodgate's memory
 * and Redis stores, and with its popular peer. Rounds rotate the order. The
 * CPU used by the load generator, the server and redis-server is recorded:
 * on two cores they compete, and that bounds what the ratios can show.
 */

import autocannon from 'autocannon';
import { startWorker } from './child.js';
import type { BenchConfig } from './config.js';
import { type Framework, frameworks, type Variant, variantLabels, variantsOf } from './http-apps.js';
import type { CpuMessage, ServerInput } from './http-server.js';
import { log } from './log.js';
import { startBenchRedis } from './redis-server.js';
import { median, rotate } from './stats.js';

export interface HttpRow {
  framework: Framework;
  variant: Variant;
  label: string;
  /** Per round. */
  requestsPerSecond: number[];
  latencyMs: number[];
  /** CPU used during the measured run, in % of one core, per round. */
  loadGeneratorCpu: number[];
  serverCpu: number[];
  redisCpu: number[];
  /** Summed over rounds; every one should be 0. */
  errors: number;
  timeouts: number;
  non2xx: number;
}

export interface HttpResults {
  rows: HttpRow[];
  connections: number;
  durationSeconds: number;
  rounds: number;
}

/** CPU µs the server used per request it answered, median over rounds. */
export function serverMicrosPerRequest(row: HttpRow): number {
  return median(row.serverCpu.map((percent, i) => (percent * 1e4) / (row.requestsPerSecond[i] as number)));
}

async function redisCpuSeconds(redis: { info(section: string): Promise<string> }): Promise<number> {
  const info = await redis.info('cpu');
  const read = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? 0);
  return read('used_cpu_user') + read('used_cpu_sys');
}

export async function benchHttp(config: BenchConfig): Promise<HttpResults> {
  const { rounds, connections, warmupSeconds, durationSeconds } = config.http;
  const redisServer = await startBenchRedis();
  const redis = redisServer.client();
  const rows = new Map<string, HttpRow>();
  const chosen = frameworks.filter((framework) => config.http.frameworks?.includes(framework) ?? true);
  if (chosen.length === 0) throw new Error(`--frameworks: none of ${config.http.frameworks?.join(', ')} is one of ${frameworks.join(', ')}`);
  for (const framework of chosen) {
    for (const variant of variantsOf[framework]) {
      rows.set(`${framework}/${variant}`, {
        framework,
        variant,
        label: variantLabels[framework][variant],
        requestsPerSecond: [],
        latencyMs: [],
        loadGeneratorCpu: [],
        serverCpu: [],
        redisCpu: [],
        errors: 0,
        timeouts: 0,
        non2xx: 0,
      });
    }
  }
  try {
    for (let round = 0; round < rounds; round++) {
      for (const framework of rotate(chosen, round)) {
        for (const variant of rotate(variantsOf[framework], round)) {
          const row = rows.get(`${framework}/${variant}`) as HttpRow;
          await redis.flushall();
          const server = startWorker('./http-server.ts', { input: { framework, variant, redisPort: redisServer.port } satisfies ServerInput });
          try {
            const { port } = await server.receive<{ port: number }>(30_000);
            const url = `http://127.0.0.1:${port}/`;
            await autocannon({ url, connections, duration: warmupSeconds });
            server.send('cpu');
            const serverBefore = await server.receive<CpuMessage>();
            const redisBefore = await redisCpuSeconds(redis);
            const loadBefore = process.cpuUsage();
            const started = performance.now();
            const result = await autocannon({ url, connections, duration: durationSeconds });
            const wallMs = performance.now() - started;
            const load = process.cpuUsage(loadBefore);
            server.send('cpu');
            const serverAfter = await server.receive<CpuMessage>();
            const redisAfter = await redisCpuSeconds(redis);

            row.requestsPerSecond.push(result.requests.total / result.duration);
            row.latencyMs.push(result.latency.average);
            row.loadGeneratorCpu.push(((load.user + load.system) / 1000 / wallMs) * 100);
            row.serverCpu.push(((serverAfter.cpuMicros - serverBefore.cpuMicros) / 1000 / wallMs) * 100);
            row.redisCpu.push((((redisAfter - redisBefore) * 1000) / wallMs) * 100);
            row.errors += result.errors;
            row.timeouts += result.timeouts;
            row.non2xx += result.non2xx;
            log(
              `http round ${round + 1}/${rounds} ${framework.padEnd(7)} ${variant.padEnd(16)} ${Math.round(result.requests.total / result.duration)} req/s, ` +
                `${result.errors} errors, ${result.non2xx} non-2xx`,
            );
          } finally {
            await server.stop();
          }
        }
      }
    }
  } finally {
    await redisServer.stop();
  }
  return { rows: [...rows.values()], connections, durationSeconds, rounds };
}
