/*
 * V8's CPU profiler (what `node --cpu-prof` runs) driven from inside the
 * process, so that a profile covers the measured loop only, not start-up,
 * module loading or warm-up. The profile is written as a .cpuprofile file
 * (open it in Chrome DevTools or speedscope).
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';

/** Starts sampling; the returned function stops it and writes the profile to `path`. */
export async function startProfiling(path: string): Promise<() => Promise<void>> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 200 }); // µs
  await session.post('Profiler.start');
  return async () => {
    const { profile } = await session.post('Profiler.stop');
    session.disconnect();
    writeFileSync(path, JSON.stringify(profile));
  };
}
