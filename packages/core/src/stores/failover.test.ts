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
  const options = {
    rules: [
      { name: 'window', algorithm: 'fixed-window', limit: 5, windowMs: 1_000_000_000_000 },
      { name: 'cell', algorithm: 'gcra', limit: 5, windowMs: 1_000_000_000_000 },
    ],
    store: new RedisStore({ client }),
    prefix: 'fg:', // given, not defaulted: the two limiters below share their counters on purpose
    onStoreError: 'deny',
  } as const;
  const limiter = createLimiter(options);
  limiter.on('error', () => {});
  // The counts before the failure go through a limiter of the same rules and store that waits as long as Redis
  // takes: on a loaded machine a call may take longer than the 200 ms timeoutMs the failover is judged by.
  const beforeFailure = createLimiter({ ...options, timeoutMs: 30_000 });
  for (let i = 0; i < 3; i++) expect((await beforeFailure.consume('k')).allowed).toBe(true);
  expect(await client.wait(1, 10_000)).toBe(1); // the replica has the counts (WAIT returns as soon as it does)

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
