import { floodgateProject } from '../../vitest.shared.js';

// The tests run the built bin as users do (a child process), so the package is built first (test-setup.ts).
const shared = floodgateProject('cli', { testTimeout: 30_000 });
export default { ...shared, test: { ...shared.test, globalSetup: ['src/test-setup.ts'] } };
