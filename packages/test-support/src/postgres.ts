/*
 * PostgreSQL for tests. Each test file gets a schema of its own, created
 * before its tests and dropped after, in the machine's PostgreSQL
 * (127.0.0.1:5432, or FLOODGATE_TEST_POSTGRES_URL) when one answers there;
 * tests never depend on what that server holds. Where none answers, a
 * private server is started from the Debian packages' binaries (initdb +
 * pg_ctl, as the `postgres` user when run as root) on a free port, and
 * stopped by PID after the file. Fault tests start private servers of their
 * own with startPostgres(), and kill only those.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { freePort } from './redis.js';

const run = promisify(execFile);

export interface PostgresServer {
  /** A connection URL (user postgres, database postgres, trust auth). */
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  /** Stops the server: SIGKILL (a crash) by default, and waits for its process to end. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Freezes the server's processes (SIGSTOP): connections stay open, nothing answers. */
  pause(): Promise<void>;
  resume(): Promise<void>;
  /** Starts it again on the same port and data after stop(). */
  restart(): Promise<void>;
  /** Stops it for good and removes its data. */
  dispose(): Promise<void>;
}

/** The directory of initdb and pg_ctl: on the PATH, or Debian's /usr/lib/postgresql/<version>/bin. */
function binDir(): string {
  const debian = '/usr/lib/postgresql';
  if (existsSync(debian)) {
    const versions = readdirSync(debian)
      .filter((v) => existsSync(join(debian, v, 'bin', 'initdb')))
      .sort((a, b) => Number(b) - Number(a));
    if (versions[0] !== undefined) return join(debian, versions[0], 'bin');
  }
  return '';
}

/**
 * Who runs PostgreSQL's binaries: this process, or, when it is root (the server refuses root), the
 * `postgres` user of the Debian packages. The server is then still this process's own child, which
 * it reaps, so that a killed server is gone once its exit is seen.
 */
async function identity(): Promise<{ uid?: number; gid?: number }> {
  if (process.getuid?.() !== 0) return {};
  const [uid, gid] = await Promise.all([run('id', ['-u', 'postgres']), run('id', ['-g', 'postgres'])]);
  return { uid: Number(uid.stdout), gid: Number(gid.stdout) };
}

const binary = (name: string): string => (binDir() === '' ? name : join(binDir(), name));

async function exec(name: string, args: string[]): Promise<void> {
  await run(binary(name), args, { timeout: 60_000, ...(await identity()) });
}

/** Starts a private PostgreSQL server on a free port, its data in a fresh temporary directory. */
export async function startPostgres(): Promise<PostgresServer> {
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-postgres-'));
  chmodSync(dir, 0o777); // the postgres user writes here when we are root
  const data = join(dir, 'data');
  await exec('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C']);
  const port = await freePort();
  const user = await identity();
  let child: ChildProcess | undefined;
  const start = async () => {
    const args = ['-D', data, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'max_connections=200'];
    const started = spawn(binary('postgres'), args, { stdio: ['ignore', 'ignore', 'pipe'], ...user });
    child = started;
    let said = '';
    started.stderr?.on('data', (chunk: Buffer) => {
      said = (said + chunk.toString()).slice(-2000);
    });
    const deadline = Date.now() + 30_000;
    for (;;) {
      try {
        await run(binary('pg_isready'), ['-h', '127.0.0.1', '-p', String(port)], { timeout: 2000 });
        return;
      } catch {
        if (started.exitCode !== null) throw new Error(`postgres exited while starting on port ${port}: ${said}`);
        if (Date.now() > deadline) throw new Error(`postgres did not start on port ${port}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  };
  await start();
  /** The server's processes: the postmaster and its backends. */
  const pids = async (): Promise<number[]> => {
    const main = child?.pid;
    if (main === undefined || child?.exitCode !== null || child.signalCode !== null) return [];
    const { stdout } = await run('pgrep', ['-P', String(main)]).catch(() => ({ stdout: '' }));
    return [main, ...stdout.split('\n').filter(Boolean).map(Number)];
  };
  const signal = async (sig: NodeJS.Signals) => {
    for (const pid of await pids()) {
      try {
        process.kill(pid, sig);
      } catch {
        // already gone
      }
    }
  };
  const alive = (pid: number): boolean => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  const server: PostgresServer = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    get pid() {
      return child?.pid ?? 0;
    },
    async stop(sig = 'SIGKILL') {
      const running = child;
      const all = await pids();
      await signal(sig);
      if (running !== undefined && running.exitCode === null && running.signalCode === null) await new Promise((resolve) => running.once('exit', resolve));
      // The backends outlive a killed postmaster for a moment, and hold its shared memory: wait for them.
      for (let i = 0; i < 250 && all.some(alive); i++) await new Promise((resolve) => setTimeout(resolve, 20));
    },
    pause: () => signal('SIGSTOP'),
    resume: () => signal('SIGCONT'),
    restart: start,
    async dispose() {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return server;
}

/** Runs one statement on a connection of its own. */
async function statement(url: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

const machineUrl = () => process.env.FLOODGATE_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

async function answers(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return run(join(binDir(), 'pg_isready'), ['-h', hostname, '-p', port || '5432'], { timeout: 3000 }).then(
    () => true,
    () => false,
  );
}

export interface PostgresSchema {
  /** The server's connection URL. */
  readonly url: string;
  /** This test file's schema: tables go in it (`${schema}.floodgate_state`). */
  readonly schema: string;
}

/**
 * A schema of its own for the test file that calls this, in the machine's
 * PostgreSQL or a private one; dropped after the file.
 */
export function usePostgres(): PostgresSchema {
  let url: string | undefined;
  let server: PostgresServer | undefined;
  const schema = `fg_test_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  beforeAll(async () => {
    url = machineUrl();
    if (!(await answers(url))) {
      server = await startPostgres();
      url = server.url;
    }
    await statement(url, `CREATE SCHEMA ${schema}`);
  }, 120_000);
  afterAll(async () => {
    if (url !== undefined && server === undefined) await statement(url, `DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await server?.dispose();
  });
  return {
    get url() {
      if (url === undefined) throw new Error('usePostgres(): the server is known from beforeAll on');
      return url;
    },
    schema,
  };
}
