import { floodgateProject } from '../../vitest.shared.js';

// The browser test starts Chromium: its files run one at a time, beside the API tests.
export default floodgateProject('dashboard', { testTimeout: 30_000, fileParallelism: false });
