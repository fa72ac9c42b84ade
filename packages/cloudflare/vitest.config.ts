import { floodgateProject } from '../../vitest.shared.js';

// Each test file starts its own workerd (a few hundred ms to a few seconds on a loaded machine).
export default floodgateProject('cloudflare', { testTimeout: 60_000 });
