import { createRequire } from 'node:module';
import { mergeConfig } from 'vitest/config';
import { floodgateProject } from '../../vitest.shared.js';

// graphql 16 ships CommonJS (main) and ESM (module) side by side, and objects of one copy are no
// instances of the other's classes. Node loads the CommonJS one for every import of the
// servers under test, so the tests' sources must get that one too, not vite's pick of `module`.
const graphql = createRequire(import.meta.url).resolve('graphql');

export default mergeConfig(floodgateProject('graphql'), { resolve: { alias: [{ find: /^graphql$/, replacement: graphql }] } });
