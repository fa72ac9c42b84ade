import { defineProject } from 'vitest/config';

// Each runtime starts once per file (beforeAll); its requests are bounded by the test timeout.
export default defineProject({
  test: {
    name: 'runtimes',
    include: ['src/**/*.test.ts'],
    testTimeout: 30_000,
  },
});
