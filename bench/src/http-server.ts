/*
 * One HTTP server under load, in a process of its own (the load generator
 * runs in the parent, http.ts). Tells the parent its port, then answers
 * 'cpu' with the CPU time it has used, and profiles itself on request
 * ({ profileStart: path } ... 'profileStop'), until it is killed.
 */
import { reply, workerInput } from './child.js';
import { type Framework, startServer, type Variant } from './http-apps.js';
import { startProfiling } from './profiler.js';

export interface ServerInput {
  framework: Framework;
  variant: Variant;
  redisPort: number;
}

/** CPU time (user + system) in µs. */
export type CpuMessage = { cpuMicros: number };

const { framework, variant, redisPort } = workerInput<ServerInput>();
let stopProfiling: (() => Promise<void>) | undefined;
const { port } = await startServer(framework, variant, redisPort);
process.on('message', (message) => {
  if (message === 'cpu') {
    const usage = process.cpuUsage();
    void reply({ cpuMicros: usage.user + usage.system } satisfies CpuMessage);
  } else if (typeof message === 'object' && message !== null && 'profileStart' in message) {
    void startProfiling((message as { profileStart: string }).profileStart).then(async (stop) => {
      stopProfiling = stop;
      await reply('profiling');
    });
  } else if (message === 'profileStop') {
    void stopProfiling?.().then(() => reply('profiled'));
  }
});
await reply({ port });
