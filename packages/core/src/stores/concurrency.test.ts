import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { useRedisServer } from '@floodgate/test-support';
import { describe, expect, it } from 'vitest';
import { createLimiter } from '../limiter.js';
import { MemoryStore } from './memory-store.js';
import { RedisStore } from './redis-store.js';

const redis = useRedisServer();
/** Far above any round trip: a slow moment of a loaded machine must not turn a decision into a store error. */
const timeoutMs = 30_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

describe('concurrency rules', () => {
  it("free a crashed process's leases after windowMs: a worker holding leases is killed with SIGKILL", async () => {
    // Real time is the point: the dead worker's leases must run out on Redis's clock. Each step is timed
    // from the lease expiries Redis holds, not from nominal sleeps, with half a window of slack.
    const windowMs = 4_000;
    const key = 'crash:{worker-key}:default:v2';
    const worker = fileURLToPath(new URL('../test-support/lease-worker.ts', import.meta.url));
    const child = spawn(process.execPath, ['--import', 'tsx', worker, String(redis.server.port), 'crash:', '3', String(windowMs)], {
      cwd: fileURLToPath(new URL('../..', import.meta.url)),
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
    });
    while (!out.includes('held')) {
      if (child.exitCode !== null) throw new Error(`the lease worker exited with ${child.exitCode}`);
      await sleep(20);
    }
    child.kill('SIGKILL');
    await once(child, 'exit');

    const serverNow = async () => {
      const [seconds, micros] = await redis.client.time();
      return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    };
    /** When the leases in the key expire (ms, Redis clock). */
    const expiries = async () => {
      const members = await redis.client.zrange(key, 0, -1, 'WITHSCORES');
      const ends: number[] = [];
      // The member '#' keeps the units in use (as a negative score): every other member is a lease.
      for (let i = 0; i < members.length; i += 2) if (members[i] !== '#') ends.push(Number(members[i + 1]));
      return ends;
    };
    const limiter = createLimiter({
      algorithm: 'concurrency',
      limit: 5,
      windowMs,
      store: new RedisStore({ client: redis.client }),
      prefix: 'crash:',
      timeoutMs,
    });
    expect((await limiter.peek('worker-key')).remaining).toBe(2);
    const ttl = await redis.client.pttl(key);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(windowMs);
    const workers = await expiries();
    expect(workers).toHaveLength(3);
    const lastOut = Math.max(...workers);

    // Ours are taken half a window after the worker's last lease: half a window before its first one runs out.
    await sleep(lastOut - windowMs / 2 - (await serverNow()));
    const third = [await limiter.consume('worker-key'), await limiter.consume('worker-key'), await limiter.consume('worker-key')];
    expect(third.map((d) => d.allowed)).toEqual([true, true, false]);

    // Once the worker's leases have run out on Redis's clock, ours (taken half a window later) are still alive.
    for (let now = await serverNow(); now < lastOut; now = await serverNow()) await sleep(lastOut - now);
    expect((await limiter.peek('worker-key')).remaining).toBe(3);
    for (const d of third) if (d.leaseId) await limiter.release('worker-key', d.leaseId);
    expect((await limiter.peek('worker-key')).remaining).toBe(5);
  }, 30_000);

  it.each([
    ['MemoryStore', () => new MemoryStore()],
    ['RedisStore', () => new RedisStore({ client: redis.client })],
  ] as const)('%s: weighs leases by cost, releases exactly the lease given, ignores unknown leases', async (_, makeStore) => {
    const limiter = createLimiter({ algorithm: 'concurrency', limit: 4, windowMs: 60_000, store: makeStore(), prefix: `weights-${_}:`, timeoutMs });
    const big = await limiter.consume('k', { cost: 3 });
    expect(big).toMatchObject({ allowed: true, remaining: 1 });
    expect(big.leaseId).toMatch(/^3\./);
    const denied = await limiter.consume('k', { cost: 2 });
    expect(denied).toMatchObject({ allowed: false, remaining: 1 });
    expect(denied.leaseId).toBeUndefined();
    await limiter.release('k', '3.not-a-lease-of-this-key');
    expect((await limiter.peek('k')).remaining).toBe(1);
    await limiter.release('k', big.leaseId as string);
    expect((await limiter.peek('k')).remaining).toBe(4);
    await limiter.release('k', big.leaseId as string); // twice: nothing more
    expect((await limiter.peek('k')).remaining).toBe(4);
  });

  it('takes no lease when another rule of the same call denies (all-or-nothing)', async () => {
    const limiter = createLimiter({
      rules: [
        { name: 'in-flight', algorithm: 'concurrency', limit: 10, windowMs: 60_000 },
        { name: 'per-minute', algorithm: 'fixed-window', limit: 1, windowMs: 60_000 },
      ],
      // The limiter's clock stands still: the minute cannot end between the two calls.
      store: new RedisStore({ client: redis.client, clock: 'client' }),
      now: () => Date.UTC(2100, 0, 1, 0, 0, 30),
      timeoutMs,
      prefix: 'mixed:',
    });
    expect((await limiter.consume('k')).allowed).toBe(true);
    const denied = await limiter.consume('k');
    expect(denied).toMatchObject({ allowed: false, rule: 'per-minute' });
    expect(denied.rules[0]).toMatchObject({ name: 'in-flight', allowed: true, remaining: 9 });
    expect(await redis.client.zcard('mixed:{k}:in-flight:v2')).toBe(2); // one lease, and '#' (the units in use)
  });
});
