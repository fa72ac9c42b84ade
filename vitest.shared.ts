import { defineProject } from 'vitest/config';

/**
 * Every package's vitest project: tests import the workspace packages'
 * TypeScript sources (the `@floodgate/source` export condition), so they run
 * without a build; CI still builds and checks the published files.
 */
export function floodgateProject(name: string, options: { testTimeout?: number; fileParallelism?: boolean } = {}) {
  const conditions = ['@floodgate/source', 'module', 'node', 'development|production'];
  return defineProject({
    resolve: { conditions },
    ssr: { resolve: { conditions } },
    test: {
      name,
      include: ['src/**/*.test.ts'],
      ...options,
    },
  });
}
