import { floodgateProject } from '../../vitest.shared.js';

// The shared project, less the bundlers' `module` condition: with it, Node would load
// @opentelemetry/api 1.9's ESM build, whose imports have no file extensions (Node refuses
// them). Without it, the OpenTelemetry packages load as Node loads them for users: CommonJS.
const shared = floodgateProject('otel');
const conditions = (shared.resolve?.conditions ?? []).filter((condition) => condition !== 'module');
export default { ...shared, resolve: { conditions }, ssr: { resolve: { conditions } } };
