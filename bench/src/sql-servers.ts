/*
 * The database servers of the SQL benchmark: the machine's PostgreSQL
 * (127.0.0.1:5432) and MariaDB/MySQL (127.0.0.1:3306) when they answer, else
 * private servers started by @floodgate/test-support (killed with the
 * harness). Nothing that a server already holds is used: each run creates a
 * database of its own with a unique name and drops it at the end, on failure
 * too (and, if the harness exits before it gets there, in an exit hook).
 *
 * PostgreSQL gets a database, not only a schema, because
 * @acpr/rate-limit-postgresql writes to a fixed schema (`rate_limit`), adds
 * the uuid-ossp extension and keeps a `migrations` table: in a database of
 * the run's own, all of that goes when the run does.
 *
 * Each server also tells the CPU time it has used for this run (from /proc,
 * utime + stime: PostgreSQL's backends on the run's database and its shared
 * background processes; mariadbd's threads but other clients' connections),
 * which the benchmark reads before and after each measurement.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { startMariaDb, startPostgres } from '@floodgate/test-support';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { adopt } from './child.js';
import { log } from './log.js';

export interface BenchDatabase {
  /** A connection URL to this run's own database. */
  readonly url: string;
  /** The database's name (`fg_bench_<pid>_<random>`). */
  readonly name: string;
  /** "PostgreSQL 15.4 (the machine's, 127.0.0.1:5432)", or "(private, started for this run)". */
  readonly description: string;
  /**
   * CPU the server has used so far serving this run, per process or thread (µs of utime + stime from
   * /proc): what serves other clients of a shared server is left out. Undefined where /proc cannot tell.
   */
  serverCpu(): Promise<CpuSnapshot | undefined>;
  /** µs of server CPU between two snapshots (NaN if either is undefined). */
  serverCpuBetween(before: CpuSnapshot | undefined, after: CpuSnapshot | undefined): number;
  /** Drops the database (and stops a private server). Never throws. */
  drop(): Promise<void>;
}

/** µs of CPU used so far, per process (PostgreSQL) or thread (MariaDB). */
export type CpuSnapshot = ReadonlyMap<number, number>;

export interface BenchPostgres extends BenchDatabase {
  /** A connection of the harness's own to the run's database (truncates, sizes, WAL position). */
  readonly admin: pg.Client;
}

export interface BenchMySql extends BenchDatabase {
  readonly admin: mysql.Connection;
}

const uniqueName = (): string => `fg_bench_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;

/** Clock ticks per second of /proc's utime and stime (100 on Linux everywhere in practice). */
const ticksPerSecond = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** Fields of /proc/<pid>/stat (or /proc/<of>/task/<pid>/stat) after the command name (which may hold spaces): [state, ppid, ...]. */
function statFields(pid: number, of?: number): string[] | undefined {
  try {
    const stat = readFileSync(of === undefined ? `/proc/${pid}/stat` : `/proc/${of}/task/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** µs of CPU (user + system) of a process, every thread, or of one thread (`/proc/<pid>/task/<tid>`); NaN if /proc cannot tell. */
function cpuMicrosOf(pid: number, tid?: number): number {
  const fields = statFields(tid === undefined ? pid : tid, tid === undefined ? undefined : pid);
  if (fields === undefined) return Number.NaN;
  // utime and stime are fields 14 and 15 of stat, 12 and 13 after the name.
  return ((Number(fields[11]) + Number(fields[12])) / ticksPerSecond) * 1e6;
}

/** The CPU of `ids` (processes, or threads of `pid`) that /proc could read; undefined if it could read none. */
function snapshot(ids: readonly number[], pid?: number): CpuSnapshot | undefined {
  const cpu = new Map<number, number>();
  for (const id of ids) {
    const micros = pid === undefined ? cpuMicrosOf(id) : cpuMicrosOf(pid, id);
    if (Number.isFinite(micros)) cpu.set(id, micros);
  }
  return cpu.size === 0 ? undefined : cpu;
}

/**
 * µs between two snapshots: what each process or thread in both used in between, and (`countNew`)
 * all that one which appeared meanwhile used (a process forked since, such as an autovacuum worker).
 */
function between(before: CpuSnapshot | undefined, after: CpuSnapshot | undefined, countNew: boolean): number {
  if (before === undefined || after === undefined) return Number.NaN;
  let total = 0;
  for (const [id, micros] of after) {
    const was = before.get(id);
    if (was !== undefined) total += micros - was;
    else if (countNew) total += micros;
  }
  return total;
}

/**
 * If the harness exits before a database is dropped (its deadline, Ctrl-C), drop it then, with the
 * server's command-line client (an exit hook cannot wait for a promise). Returns the hook's remover.
 */
function dropOnExit(command: string, args: string[]): () => void {
  const hook = () => {
    try {
      execFileSync(command, args, { stdio: 'ignore', timeout: 10_000 });
    } catch {
      // Best effort: the server may be gone already.
    }
  };
  process.once('exit', hook);
  return () => process.off('exit', hook);
}

async function postgresAnswers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.end();
    return true;
  } catch {
    await client.end().catch(() => undefined);
    return false;
  }
}

/** The machine's PostgreSQL (FLOODGATE_TEST_POSTGRES_URL, or postgres@127.0.0.1:5432/test), or a private one; a database of the run's own in it. */
export async function startBenchPostgres(): Promise<BenchPostgres> {
  let serverUrl = process.env.FLOODGATE_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  let where = `the machine's, ${new URL(serverUrl).host}`;
  let stopPrivate: (() => Promise<void>) | undefined;
  if (!(await postgresAnswers(serverUrl))) {
    log(`sql: no PostgreSQL answers at ${new URL(serverUrl).host}: starting a private one`);
    const server = await startPostgres();
    const release = adopt(server.pid);
    serverUrl = server.url;
    where = 'private, started for this run';
    stopPrivate = async () => {
      await server.dispose();
      release();
    };
  }
  const name = uniqueName();
  const maintenance = new pg.Client({ connectionString: serverUrl });
  await maintenance.connect();
  let removeHook: () => void = () => undefined;
  try {
    await maintenance.query(`CREATE DATABASE ${name}`);
    const host = new URL(serverUrl);
    removeHook = dropOnExit('psql', [
      '-h',
      host.hostname,
      '-p',
      host.port || '5432',
      '-U',
      decodeURIComponent(host.username || 'postgres'),
      '-d',
      host.pathname.slice(1) || 'postgres',
      '-c',
      `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`,
    ]);
  } catch (error) {
    await maintenance.end().catch(() => undefined);
    await stopPrivate?.();
    throw error;
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  const admin = new pg.Client({ connectionString: url.toString() });
  await admin.connect();
  const { rows } = await admin.query<{ version: string }>('SELECT current_setting($1) AS version', ['server_version']);
  const version = rows[0]?.version ?? 'unknown';
  return {
    url: url.toString(),
    name,
    admin,
    description: `PostgreSQL ${version.split(' ')[0]} (${where})`,
    // The backends connected to the run's database (but the harness's own), its autovacuum workers, and the processes every
    // database shares (WAL writer, checkpointer, background writer): not other databases' backends.
    async serverCpu() {
      const { rows: processes } = await admin.query<{ pid: number }>(
        'SELECT pid FROM pg_stat_activity WHERE (datname = current_database() OR datname IS NULL) AND pid <> pg_backend_pid()',
      );
      return snapshot(processes.map((row) => Number(row.pid)));
    },
    serverCpuBetween: (before, after) => between(before, after, true),
    async drop() {
      await admin.end().catch(() => undefined);
      try {
        await maintenance.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        removeHook();
      } catch (error) {
        log(`sql: could not drop PostgreSQL database ${name}: ${(error as Error).message}`);
      }
      await maintenance.end().catch(() => undefined);
      await stopPrivate?.();
    },
  };
}

async function mysqlAnswers(url: string): Promise<boolean> {
  const connection = await mysql.createConnection({ uri: url, connectTimeout: 3000 }).catch(() => undefined);
  await connection?.end().catch(() => undefined);
  return connection !== undefined;
}

/** The machine's MariaDB/MySQL (FLOODGATE_TEST_MYSQL_URL, or root@127.0.0.1:3306), or a private MariaDB; a database of the run's own in it. */
export async function startBenchMySql(): Promise<BenchMySql> {
  let serverUrl = process.env.FLOODGATE_TEST_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';
  let where = `the machine's, ${new URL(serverUrl).host}`;
  let stopPrivate: (() => Promise<void>) | undefined;
  let isPrivate = false;
  if (!(await mysqlAnswers(serverUrl))) {
    log(`sql: no MySQL answers at ${new URL(serverUrl).host}: starting a private MariaDB`);
    const server = await startMariaDb();
    serverUrl = server.url;
    where = 'private, started for this run';
    isPrivate = true;
    stopPrivate = () => server.dispose();
  }
  const name = uniqueName();
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  const maintenance = await mysql.createConnection({ uri: serverUrl });
  let removeHook: () => void = () => undefined;
  try {
    await maintenance.query(`CREATE DATABASE ${name} CHARACTER SET utf8mb4`);
    removeHook = dropOnExit('mariadb', [
      '-h',
      url.hostname,
      '-P',
      url.port || '3306',
      '-u',
      decodeURIComponent(url.username || 'root'),
      ...(url.password === '' ? [] : [`-p${decodeURIComponent(url.password)}`]),
      '-e',
      `DROP DATABASE IF EXISTS ${name}`,
    ]);
  } catch (error) {
    await maintenance.end().catch(() => undefined);
    await stopPrivate?.();
    throw error;
  }
  const admin = await mysql.createConnection({ uri: url.toString() });
  const [rows] = (await admin.query('SELECT VERSION() AS version, @@pid_file AS pidFile')) as unknown as [{ version: string; pidFile: string }[]];
  const version = rows[0]?.version ?? 'unknown';
  let pid = Number.NaN;
  try {
    pid = Number(readFileSync(String(rows[0]?.pidFile), 'utf8').trim());
  } catch {
    // Not on this machine's file system: no server CPU.
  }
  if (isPrivate && Number.isFinite(pid)) {
    // Killed with the harness if the run never gets to stop it.
    const release = adopt(pid);
    const dispose = stopPrivate;
    stopPrivate = async () => {
      await dispose?.();
      release();
    };
  }
  const product = /mariadb/i.test(version) ? 'MariaDB' : 'MySQL';
  return {
    url: url.toString(),
    name,
    admin,
    description: `${product} ${version.split('-')[0]} (${where})`,
    // mariadbd's threads (InnoDB's background threads included) but those of other connections: other clients', and the harness's own.
    async serverCpu() {
      if (!Number.isFinite(pid)) return undefined;
      const [others] = (await admin.query(
        'SELECT TID AS tid FROM information_schema.PROCESSLIST WHERE DB IS NULL OR DB <> DATABASE() OR ID = CONNECTION_ID()',
      )) as unknown as [{ tid: number | null }[]];
      const excluded = new Set(others.map((row) => Number(row.tid)));
      let threads: number[];
      try {
        threads = readdirSync(`/proc/${pid}/task`).map(Number);
      } catch {
        return undefined;
      }
      return snapshot(
        threads.filter((tid) => !excluded.has(tid)),
        pid,
      );
    },
    // A thread that appears meanwhile may be one from the thread cache, with another connection's past: left out.
    serverCpuBetween: (before, after) => between(before, after, false),
    async drop() {
      await admin.end().catch(() => undefined);
      try {
        await maintenance.query(`DROP DATABASE IF EXISTS ${name}`);
        removeHook();
      } catch (error) {
        log(`sql: could not drop MySQL database ${name}: ${(error as Error).message}`);
      }
      await maintenance.end().catch(() => undefined);
      await stopPrivate?.();
    },
  };
}
