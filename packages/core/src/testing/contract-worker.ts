/*
 * One process of the store contract's multi-process test: it makes the store
 * with the default export of the module it is given, runs `calls` calls on
 * one key with `inflight` at a time, and prints {"admitted": n}.
 *   node contract-worker.js <store module> <algorithm> <prefix> <calls> <inflight>
 */
import { pathToFileURL } from 'node:url';
import { createLimiter } from '../limiter.js';
import type { AlgorithmName } from '../rules.js';
import type { Store } from '../stores/types.js';

const [module, algorithm, prefix, calls, inflight] = process.argv.slice(2) as [string, AlgorithmName, string, string, string];

/** Not top-level await: the worker is built as CommonJS too. */
async function main(): Promise<void> {
  const makeStore = (await import(pathToFileURL(module).href)).default as () => Store | Promise<Store>;
  const store = await makeStore();
  // A window far longer than the test: every call falls in one window, so exactly `limit` may pass. Windows
  // are aligned to the epoch: a sliding window of 2.5 * 10^11 ms (the longest its size bound allows at this
  // limit, in round numbers) next ends in 2033.
  const limiter = createLimiter({
    algorithm,
    limit: 1000,
    windowMs: algorithm === 'sliding-window' ? 250_000_000_000 : 1_000_000_000_000,
    store,
    prefix,
    timeoutMs: 60_000,
    onStoreError: 'deny',
  });
  let next = 0;
  let admitted = 0;
  const total = Number(calls);
  const lane = async (): Promise<void> => {
    while (next < total) {
      next++;
      const decision = await limiter.consume('shared-key');
      if (decision.storeError) throw decision.storeError;
      if (decision.allowed) admitted++;
    }
  };
  await Promise.all(Array.from({ length: Number(inflight) }, lane));
  await store.close?.();
  console.log(JSON.stringify({ admitted }));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
