import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { useRedisServer } from '@floodgate/test-support';
import { describe, expect, it } from 'vitest';

const redis = useRedisServer();
const worker = fileURLToPath(new URL('./test-support/wait-worker.ts', import.meta.url));

/** Starts a worker; resolves once it says it is ready, with a promise of its admissions. */
async function startWorker(port: number, prefix: string, waiters: number) {
  const child = spawn(process.execPath, ['--import', 'tsx', worker, String(port), prefix, String(waiters)], {
    cwd: fileURLToPath(new URL('..', import.meta.url)),
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout.setEncoding('utf8');
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (chunk: string) => {
      output += chunk;
      if (output.includes('ready\n')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`a worker exited with ${code} before it was ready`)));
  });
  const done = new Promise<{ call: number; localMs: number; resetMs: number }[]>((resolve, reject) => {
    child.once('exit', (code) =>
      code === 0 ? resolve(JSON.parse(output.trim().split('\n').pop() as string)) : reject(new Error(`a worker exited with ${code}`)),
    );
  });
  return { go: () => child.stdin.write('go\n'), done };
}

describe('limiter.wait across processes on one Redis', () => {
  it('3 processes x 30 waiters under 10 a second: never more than 10 in a window, each process in arrival order, no polling', async () => {
    const before = await redis.client.info('commandstats');
    const workers = await Promise.all([1, 2, 3].map(() => startWorker(redis.server.port, 'wait-race:', 30)));
    for (const w of workers) w.go();
    const results = await Promise.all(workers.map((w) => w.done));
    const after = await redis.client.info('commandstats');

    // The fixed window (on Redis's clock) of each admission: its end is when the decision was taken plus resetMs.
    const perWindow = new Map<number, number>();
    for (const admissions of results) {
      for (const { localMs, resetMs } of admissions) {
        const windowEnd = Math.round((localMs + resetMs) / 1000);
        perWindow.set(windowEnd, (perWindow.get(windowEnd) ?? 0) + 1);
      }
    }
    expect(results.flat()).toHaveLength(90);
    expect(Math.max(...perWindow.values())).toBeLessThanOrEqual(10);
    expect(perWindow.size).toBeGreaterThanOrEqual(9);
    // Within a process, calls are admitted in the order they were made.
    for (const admissions of results) expect(admissions.map((a) => a.call)).toEqual(Array.from({ length: 30 }, (_, i) => i));
    // One FCALL per admission, and per process about one more per window, when it is denied and told when the next one starts: nothing polls.
    const calls = (info: string) => Number(/cmdstat_fcall:calls=(\d+)/.exec(info)?.[1] ?? 0);
    const fcalls = calls(after) - calls(before);
    expect(fcalls).toBeGreaterThanOrEqual(90);
    expect(fcalls).toBeLessThanOrEqual(90 + 2 * 3 * (perWindow.size + 1));
  }, 120_000);
});
