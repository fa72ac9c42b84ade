// @ts-check
// A private redis-server for the examples that need one: on a free port of
// 127.0.0.1 (never 6379, the machine's default Redis), with nothing persisted,
// stopped by PID. `redis-server` must be on the PATH (Debian: apt-get install
// redis-server). The examples never touch a Redis they did not start.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A port nobody listens on right now, other than 6379. @returns {Promise<number>} */
async function freePort() {
  for (;;) {
    const port = await new Promise((resolve, reject) => {
      const server = createServer();
      server.on('error', reject);
      server.listen(0, '127.0.0.1', () => {
        const address = server.address();
        server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
      });
    });
    if (port !== 6379) return port;
  }
}

/** @param {import('node:child_process').ChildProcess} child */
const exited = (child) =>
  child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((resolve) => child.once('exit', () => resolve(undefined)));

/**
 * Starts redis-server and resolves once it accepts connections.
 * @returns {Promise<{ port: number, pid: number, stop(): Promise<void> }>}
 */
export async function startRedis() {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'floodgate-example-redis-'));
    const child = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--protected-mode', 'no'],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    // Whatever happens to the example (an error, Ctrl-C, a test's timeout), leave no redis-server behind.
    const orphan = () => child.kill('SIGKILL');
    /** @param {NodeJS.Signals} signal */
    const killed = (signal) => {
      orphan();
      rmSync(dir, { recursive: true, force: true });
      process.kill(process.pid, signal); // once more, now that this listener is gone: the default action ends the process
    };
    process.once('exit', orphan);
    process.once('SIGINT', killed);
    process.once('SIGTERM', killed);
    const stop = async () => {
      process.off('exit', orphan);
      process.off('SIGINT', killed);
      process.off('SIGTERM', killed);
      child.kill('SIGTERM');
      await exited(child);
      rmSync(dir, { recursive: true, force: true });
    };
    const ready = await new Promise((resolve, reject) => {
      let log = '';
      child.once('error', (error) =>
        reject(
          /** @type {NodeJS.ErrnoException} */ (error).code === 'ENOENT'
            ? new Error('redis-server is not on the PATH (Debian: apt-get install redis-server)')
            : error,
        ),
      );
      child.stdout?.on('data', (chunk) => {
        log += chunk;
        if (/Ready to accept connections/.test(log)) resolve(true);
      });
      child.once('exit', () => resolve(false)); // the port was taken in between
    });
    if (ready) {
      child.stdout?.resume();
      return { port, pid: /** @type {number} */ (child.pid), stop };
    }
    await stop();
    if (attempt >= 3) throw new Error('redis-server did not start');
  }
}
