import { floodgateBuild } from '../../tsup.shared.js';

// Runtime-neutral: runs on Node, Bun, Deno and Workers.
export default floodgateBuild('neutral', ['src/index.ts', 'src/adapter.ts', 'src/internal.ts']);
