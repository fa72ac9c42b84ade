import { once } from 'node:events';
import { type RedisSentinelSetup, startSentinelSetup } from '@floodgate/test-support';
import { afterAll, expect, it } from 'vitest';
import { createLimiter } from '../limiter.js';
import { RedisStore } from './redis-store.js';

let setup: RedisSentinelSetup | undefined;
afterAll(async () => {
  await setup?.stop();
});

it('follows a Sentinel failover to the replica: state kept, Redis decides again within seconds', async () => {
  setup = await startSentinelSetup();
  const client = setup.client({ maxRetriesPerRequest: 1 });
  client.on('error', () => {});
  await once(client, 'ready');
  // A window far longer than the test: the counts must survive the failover, not a window change.
  const limiter = createLimiter({
    rules: [
      { name: 'window', algorithm: 'fixed-window', limit: 5, windowMs: 1_000_000_000_000 },
      { name: 'cell', algorithm: 'gcra', limit: 5, windowMs: 1_000_000_000_000 },
    ],
    store: new RedisStore({ client }),
    onStoreError: 'deny',
  });
  limiter.on('error', () => {});
  for (let i = 0; i < 3; i++) expect((await limiter.consume('k')).allowed).toBe(true);
  expect(await client.wait(1, 2_000)).toBe(1); // the replica has the counts

  const failedAt = performance.now();
  await setup.master.stop('SIGKILL');
  const answers: { ms: number; latencyMs: number; byRedis: boolean }[] = [];
  let decision: Awaited<ReturnType<typeof limiter.consume>>;
  for (;;) {
    const sent = performance.now();
    decision = await limiter.consume('k');
    answers.push({ ms: sent - failedAt, latencyMs: performance.now() - sent, byRedis: decision.storeError === undefined });
    if (decision.storeError === undefined || sent - failedAt > 15_000) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const recovered = answers.at(-1);
  console.log(`[failover] Redis decides again ${Math.round(recovered?.ms ?? -1)} ms after the master died; ${answers.length} calls in between`);
  expect(recovered?.byRedis).toBe(true);
  expect(recovered?.ms).toBeLessThan(10_000);
  expect(Math.max(...answers.map((a) => a.latencyMs))).toBeLessThanOrEqual(200 + 500);
  // The promoted replica had the 3 counted before the failure: at most 2 more pass, ever. (Fewer when a
  // call sent while the client was reconnecting ran late on the new master: that only counts against the key.)
  expect(decision.remaining).toBeLessThanOrEqual(1);
  let admittedAfter = decision.allowed ? 1 : 0;
  for (let i = 0; i < 5; i++) if ((await limiter.consume('k')).allowed) admittedAfter++;
  expect(admittedAfter).toBeLessThanOrEqual(2);
  expect((await limiter.consume('k')).allowed).toBe(false);
}, 30_000);
