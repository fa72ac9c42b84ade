// @ts-check
// What the examples' tests share: run an example as CI does, and check that
// the processes it started are gone.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

/**
 * Runs `node <args>` in the example's folder and resolves with what it printed.
 * @param {string} dir the example's folder (import.meta.dirname)
 * @param {string[]} args
 * @param {number} timeoutMs
 */
export async function runExample(dir, args, timeoutMs) {
  const { stdout } = await promisify(execFile)(process.execPath, args, { cwd: dir, timeout: timeoutMs });
  return stdout;
}

/** Whether a process with this PID is still running. @param {number} pid */
export function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
