import { floodgateProject } from '../../vitest.shared.js';

export default floodgateProject('trpc');
