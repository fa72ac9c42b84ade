import { floodgateBuild } from '../../tsup.shared.js';

export default floodgateBuild('node');
