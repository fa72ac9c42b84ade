import { floodgateProject } from '../../vitest.shared.js';

export default floodgateProject('socket.io');
