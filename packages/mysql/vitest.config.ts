import { floodgateProject } from '../../vitest.shared.js';

// The SQL tests share one database server: one file at a time.
export default floodgateProject('mysql', { testTimeout: 60_000, fileParallelism: false });
