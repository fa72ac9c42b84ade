import { defineConfig } from 'tsup';
import { floodgateBuild } from '../../tsup.shared.js';

// Runtime-neutral: runs on Node, Bun, Deno and Workers.
// Both builds write to dist/, which the build script empties first.
const library = {
  ...floodgateBuild('neutral', { index: 'src/index.ts', adapter: 'src/adapter.ts', store: 'src/store.ts' }),
  clean: false,
};

// @floodgate/core/testing runs in vitest, on Node, as ESM only (vitest cannot be required), with the
// worker of its multi-process test beside it.
const testing = defineConfig({
  ...floodgateBuild('node', { testing: 'src/testing.ts', 'testing-worker': 'src/testing/contract-worker.ts' }),
  format: ['esm'],
  clean: false,
});

export default [library, testing];
