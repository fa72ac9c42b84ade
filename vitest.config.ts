import { defineConfig } from 'vitest/config';

// `pnpm vitest` at the root runs every package's tests as one run of projects.
export default defineConfig({
  test: {
    projects: ['packages/*/vitest.config.ts'],
  },
});
