/*
 * Instructions Redis executes per decision, counted by valgrind's callgrind on
 * a private redis-server: the one figure of the Redis benchmark that a shared,
 * noisy machine cannot move (the same binary, script and calls give the same
 * count). Each contender runs `calls` and then `2 × calls` decisions on a
 * fresh server each; the difference divided by `calls` leaves out start-up,
 * connection and script loading. Twice: on random keys (most calls start a
 * window) and on one hot key (none does). Skipped when valgrind is not
 * installed.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@floodgate/test-support';
import { Redis } from 'ioredis';
import { adopt } from './child.js';
import { keyPool, randomSequence } from './keys.js';
import { log } from './log.js';
import { LIMIT, WINDOW_MS } from './memory-contenders.js';
import { createRedisContender, type RedisContenderId, runCalls } from './redis-contenders.js';

export interface InstructionRow {
  contender: RedisContenderId;
  /** On the random keys of the other Redis measurements: most calls find no key (a window starts). */
  instructionsPerCall: number;
  /** On one hot key: every call but the first finds its state (no window starts). */
  hotInstructionsPerCall: number;
}

export interface RedisInstructions {
  calls: number;
  rows: InstructionRow[];
}

export function valgrindAvailable(): boolean {
  return spawnSync('valgrind', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** Total instructions a redis-server under callgrind executes while serving `calls` decisions of `contender`, on random keys or one. */
async function instructionsFor(contender: RedisContenderId, calls: number, hot: boolean): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-callgrind-'));
  const out = join(dir, 'callgrind.out');
  const port = await freePort();
  const server = spawn(
    'valgrind',
    ['--tool=callgrind', `--callgrind-out-file=${out}`, 'redis-server', '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  const release = adopt(server.pid as number);
  const exited = new Promise((resolve) => server.once('exit', resolve));
  // A server under valgrind starts slowly: retry the connection until it answers.
  const redis = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: null, retryStrategy: () => 100 });
  redis.on('error', () => {});
  try {
    await redis.connect().catch(() => {});
    await redis.ping();
    const instance = await createRedisContender(contender, redis, { limit: LIMIT, windowMs: WINDOW_MS });
    const keys = hot ? new Array<string>(calls).fill('10.0.0.1') : randomSequence(keyPool(100_000), calls);
    const outcome = await runCalls(instance, keys, calls, 1);
    if (outcome.errors > 0) throw new Error(`${contender} under callgrind: ${outcome.firstError}`);
    redis.shutdown('NOSAVE').catch(() => {}); // the reply never comes: the server exits
    await exited;
    const text = readFileSync(out, 'utf8');
    const total = /^(?:summary|totals):\s*(\d+)/m.exec(text)?.[1];
    if (total === undefined) throw new Error('callgrind wrote no instruction total');
    return Number(total);
  } finally {
    redis.disconnect();
    server.kill('SIGKILL');
    release();
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function benchRedisInstructions(contenders: readonly RedisContenderId[], calls: number): Promise<RedisInstructions> {
  const rows: InstructionRow[] = [];
  const perCall = async (contender: RedisContenderId, hot: boolean) =>
    ((await instructionsFor(contender, 2 * calls, hot)) - (await instructionsFor(contender, calls, hot))) / calls;
  for (const contender of contenders) {
    const instructionsPerCall = await perCall(contender, false);
    const hotInstructionsPerCall = await perCall(contender, true);
    rows.push({ contender, instructionsPerCall, hotInstructionsPerCall });
    log(`redis instructions ${contender.padEnd(24)} ${Math.round(instructionsPerCall)} per call, ${Math.round(hotInstructionsPerCall)} on one hot key`);
  }
  return { calls, rows };
}
