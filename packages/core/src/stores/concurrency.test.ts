import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { useRedisServer } from '@floodgate/test-support';
import { describe, expect, it } from 'vitest';
import { createLimiter } from '../limiter.js';
import { MemoryStore } from './memory-store.js';
import { RedisStore } from './redis-store.js';

const redis = useRedisServer();

describe('concurrency rules', () => {
  it("free a crashed process's leases after windowMs: a worker holding leases is killed with SIGKILL", async () => {
    const worker = fileURLToPath(new URL('../test-support/lease-worker.ts', import.meta.url));
    const child = spawn(process.execPath, ['--import', 'tsx', worker, String(redis.server.port), 'crash:', '3'], {
      cwd: fileURLToPath(new URL('../..', import.meta.url)),
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
    });
    while (!out.includes('held')) await new Promise((resolve) => setTimeout(resolve, 20));
    const heldAt = performance.now();
    child.kill('SIGKILL');
    await once(child, 'exit');

    const limiter = createLimiter({ algorithm: 'concurrency', limit: 5, windowMs: 1_500, store: new RedisStore({ client: redis.client }), prefix: 'crash:' });
    expect((await limiter.peek('worker-key')).remaining).toBe(2);
    const ttl = await redis.client.pttl('crash:{worker-key}:default');
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(1_500);
    await new Promise((resolve) => setTimeout(resolve, 700));
    const third = [await limiter.consume('worker-key'), await limiter.consume('worker-key'), await limiter.consume('worker-key')];
    expect(third.map((d) => d.allowed)).toEqual([true, true, false]);
    // The dead worker's leases expire 1.5 s after it took them; ours, taken 0.7 s later, are still alive.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, 1_500 + 100 - (performance.now() - heldAt))));
    expect((await limiter.peek('worker-key')).remaining).toBe(3);
    for (const d of third) if (d.leaseId) await limiter.release('worker-key', d.leaseId);
    expect((await limiter.peek('worker-key')).remaining).toBe(5);
  }, 20_000);

  it.each([
    ['MemoryStore', () => new MemoryStore()],
    ['RedisStore', () => new RedisStore({ client: redis.client })],
  ] as const)('%s: weighs leases by cost, releases exactly the lease given, ignores unknown leases', async (_, makeStore) => {
    const limiter = createLimiter({ algorithm: 'concurrency', limit: 4, windowMs: 60_000, store: makeStore(), prefix: `weights-${_}:` });
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
      store: new RedisStore({ client: redis.client }),
      prefix: 'mixed:',
    });
    expect((await limiter.consume('k')).allowed).toBe(true);
    const denied = await limiter.consume('k');
    expect(denied).toMatchObject({ allowed: false, rule: 'per-minute' });
    expect(denied.rules[0]).toMatchObject({ name: 'in-flight', allowed: true, remaining: 9 });
    expect(await redis.client.zcard('mixed:{k}:in-flight')).toBe(1);
  });
});
