/*
 * MySQL/MariaDB for tests. Each test file gets a database of its own, created
 * before its tests and dropped after, on the machine's server (127.0.0.1:3306,
 * root without a password, or FLOODGATE_TEST_MYSQL_URL) when one answers;
 * tests never depend on what that server holds. Where none answers, a private
 * MariaDB is started from the Debian packages' binaries (mariadb-install-db +
 * mariadbd) on a free port and stopped by PID after the file. Fault tests
 * start private servers of their own with startMariaDb().
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll } from 'vitest';
import { freePort } from './redis.js';

const run = promisify(execFile);

/** mariadbd: in /usr/sbin on Debian, which a user's PATH may not hold. */
const mariadbd = existsSync('/usr/sbin/mariadbd') ? '/usr/sbin/mariadbd' : 'mariadbd';

export interface MariaDbServer {
  /** A connection URL (root, no password). */
  readonly url: string;
  readonly port: number;
  /** Stops the server: SIGKILL (a crash) by default, and waits for it to end. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Freezes the server (SIGSTOP): connections stay open, nothing answers. */
  pause(): void;
  resume(): void;
  /** Starts it again on the same port and data after stop(). */
  restart(): Promise<void>;
  /** Stops it for good and removes its data. */
  dispose(): Promise<void>;
}

/** Starts a private MariaDB on a free port, its data in a fresh temporary directory. */
export async function startMariaDb(): Promise<MariaDbServer> {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-mariadb-'));
  const data = join(dir, 'data');
  const user = process.getuid?.() === 0 ? ['--user=root'] : [];
  await run('mariadb-install-db', ['--no-defaults', `--datadir=${data}`, '--auth-root-authentication-method=normal', '--skip-test-db', ...user], {
    timeout: 120_000,
  });
  const port = await freePort();
  let child: ChildProcess | undefined;
  const start = async () => {
    const args = [
      '--no-defaults',
      `--datadir=${data}`,
      `--port=${port}`,
      '--bind-address=127.0.0.1',
      `--socket=${join(dir, 'mysqld.sock')}`,
      `--pid-file=${join(dir, 'mysqld.pid')}`,
      '--skip-log-bin',
      '--innodb-flush-log-at-trx-commit=0',
      '--max-connections=300',
      ...user,
    ];
    const started = spawn(mariadbd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    child = started;
    let said = '';
    started.stderr?.on('data', (chunk: Buffer) => {
      said = (said + chunk.toString()).slice(-2000);
    });
    const deadline = Date.now() + 60_000;
    for (;;) {
      const connection = await mysql.createConnection({ host: '127.0.0.1', port, user: 'root' }).catch(() => undefined);
      if (connection !== undefined) {
        await connection.end();
        return;
      }
      if (started.exitCode !== null) throw new Error(`mariadbd exited while starting on port ${port}: ${said}`);
      if (Date.now() > deadline) throw new Error(`mariadbd did not start on port ${port}: ${said}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };
  await start();
  const server: MariaDbServer = {
    url: `mysql://root@127.0.0.1:${port}/mysql`,
    port,
    async stop(signal = 'SIGKILL') {
      const running = child;
      if (running === undefined || running.exitCode !== null || running.signalCode !== null) return;
      const ended = new Promise((resolve) => running.once('exit', resolve));
      running.kill(signal);
      await ended;
    },
    pause: () => child?.kill('SIGSTOP'),
    resume: () => child?.kill('SIGCONT'),
    restart: start,
    async dispose() {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return server;
}

const machineUrl = () => process.env.FLOODGATE_TEST_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';

async function answers(url: string): Promise<boolean> {
  const connection = await mysql.createConnection({ uri: url, connectTimeout: 3000 }).catch(() => undefined);
  await connection?.end();
  return connection !== undefined;
}

async function statement(url: string, sql: string): Promise<void> {
  const connection = await mysql.createConnection({ uri: url });
  try {
    await connection.query(sql);
  } finally {
    await connection.end();
  }
}

export interface MySqlDatabase {
  /** A connection URL to this test file's own database. */
  readonly url: string;
}

/** A database of its own for the test file that calls this, on the machine's server or a private MariaDB; dropped after the file. */
export function useMySql(): MySqlDatabase {
  let serverUrl: string | undefined;
  let server: MariaDbServer | undefined;
  const name = `fg_test_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  beforeAll(async () => {
    serverUrl = machineUrl();
    if (!(await answers(serverUrl))) {
      server = await startMariaDb();
      serverUrl = server.url;
    }
    await statement(serverUrl, `CREATE DATABASE ${name} CHARACTER SET utf8mb4`);
  }, 180_000);
  afterAll(async () => {
    if (serverUrl !== undefined && server === undefined) await statement(serverUrl, `DROP DATABASE IF EXISTS ${name}`);
    await server?.dispose();
  });
  return {
    get url() {
      if (serverUrl === undefined) throw new Error('useMySql(): the server is known from beforeAll on');
      const url = new URL(serverUrl);
      url.pathname = `/${name}`;
      return url.toString();
    },
  };
}
