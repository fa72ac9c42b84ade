import { floodgateProject } from '../../vitest.shared.js';

export default floodgateProject('sqlite', { testTimeout: 60_000 });
