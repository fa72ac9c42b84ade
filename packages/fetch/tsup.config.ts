import { floodgateBuild } from '../../tsup.shared.js';

// Runtime-neutral: runs on Node, Bun, Deno and Workers.
export default floodgateBuild('neutral');
