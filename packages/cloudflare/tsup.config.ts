import { floodgateBuild } from '../../tsup.shared.js';

// Runtime-neutral: runs in Workers (the Durable Object and the Worker that calls it), and loads anywhere.
export default floodgateBuild('neutral');
