import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** vitest's globalSetup: the tests run dist/bin.js as users run the bin, so it is built from the sources first. */
export default function setup(): void {
  const root = fileURLToPath(new URL('..', import.meta.url));
  execFileSync(fileURLToPath(new URL('../node_modules/.bin/tsup', import.meta.url)), ['--silent'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
}
