// @ts-check
// What the examples' tests and demos share: run an example as CI does, wait
// for a started one to listen, and check that the processes it started are gone.
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

/**
 * Resolves with the URL of the "listening on <url>" line a started example
 * prints; rejects when it exits first or prints none within `timeoutMs`.
 * @param {import('node:child_process').ChildProcess} child spawned with stdout piped
 * @param {number} timeoutMs
 * @param {string} what the process, as errors name it
 * @returns {Promise<string>}
 */
export function listeningUrl(child, timeoutMs, what = 'the example') {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} did not listen within ${timeoutMs / 1000} s`)), timeoutMs);
    let out = '';
    child.stdout?.on('data', (chunk) => {
      out += chunk;
      const match = /listening on (http:\/\/\S+)/.exec(out);
      if (match) {
        clearTimeout(timer);
        resolve(/** @type {string} */ (match[1]));
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited with ${code} before listening`));
    });
  });
}
