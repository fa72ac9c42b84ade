import { defineConfig } from 'tsup';

/** Every published package builds the same way: ESM + CJS with type declarations, for Node 20+. */
export function floodgateBuild(platform: 'node' | 'neutral', entry: string[] | Record<string, string> = ['src/index.ts']) {
  return defineConfig({
    entry,
    format: ['esm', 'cjs'],
    dts: true,
    sourcemap: true,
    clean: true,
    target: 'node20',
    platform,
  });
}
