import { floodgateBuild } from '../../tsup.shared.js';

// The library (run, parseDuration) and the `floodgate` bin, which calls run() with the process's arguments.
export default floodgateBuild('node', ['src/index.ts', 'src/bin.ts']);
