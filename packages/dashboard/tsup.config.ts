import { floodgateBuild } from '../../tsup.shared.js';

// shims: the CommonJS build finds the page's files (assets/) from import.meta.url too.
export default { ...floodgateBuild('node'), shims: true };
