/*
 * Every algorithm, by the name rules give it. An algorithm is its folder (its
 * TypeScript step, its Lua, its text encoding and Redis view), its name in
 * AlgorithmName and its line in ALGORITHMS. The Redis library takes the Lua of
 * every folder (scripts/build-lua.mjs); the property tests of
 * algorithms.test.ts check every entry against its brute-force model in
 * test-support/models.ts, and the store contract runs every entry. The order
 * is the one users read in messages.
 */
import { definition as concurrency } from './concurrency/index.js';
import { definition as fixedWindow } from './fixed-window/index.js';
import { gcraDefinition, leakyBucketDefinition, tokenBucketDefinition } from './meter/index.js';
import { definition as slidingLog } from './sliding-log/index.js';
import { definition as slidingWindow } from './sliding-window/index.js';
import type { AlgorithmDefinition } from './types.js';

/** The name of an algorithm. */
export type AlgorithmName = 'fixed-window' | 'sliding-window' | 'sliding-log' | 'token-bucket' | 'leaky-bucket' | 'gcra' | 'concurrency';

export const ALGORITHMS: Readonly<Record<AlgorithmName, AlgorithmDefinition>> = {
  'fixed-window': fixedWindow,
  'sliding-window': slidingWindow,
  'sliding-log': slidingLog,
  'token-bucket': tokenBucketDefinition,
  'leaky-bucket': leakyBucketDefinition,
  gcra: gcraDefinition,
  concurrency,
};
