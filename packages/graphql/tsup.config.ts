import { floodgateBuild } from '../../tsup.shared.js';

export default floodgateBuild('node', ['src/index.ts', 'src/apollo.ts']);
