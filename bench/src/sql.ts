/*
 * SQL stores (issue 28): Floodgate's PostgresStore, MySqlStore and
 * SqliteStore against rate-limiter-flexible's RateLimiterPostgres,
 * RateLimiterMySQL and RateLimiterSQLite, and PostgresStore against
 * @acpr/rate-limit-postgresql, on the same servers in one run (a database of
 * the run's own on each, see sql-servers.ts). Decisions per second with each
 * call awaited in turn, with 64 calls in flight over 100k random keys (the
 * sequence of the other benchmarks), and with 64 in flight on one hot key;
 * a fixed window for every library, limits out of reach (every call
 * admitted: each writes), a pool of the same size for each. Rounds
 * interleave the contenders of a database in a rotated order; every
 * measurement starts from empty tables.
 *
 * Beside the rates, what explains them: statements per call (counted on
 * each library's client; for MySQL also those the server ran, procedures'
 * included, from its Queries), the server's CPU per call (/proc), the
 * harness's own CPU per call (the library's client side; all of SQLite's
 * work), and bytes written to the server's log per call (PostgreSQL's WAL,
 * InnoDB's redo log). Then
 * rows and bytes per key of each library's table (sql-storage.ts).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BenchConfig } from './config.js';
import { HOT_KEY, keyPool, randomSequence } from './keys.js';
import { log } from './log.js';
import { type Profile, profileDir, summarise } from './profile.js';
import { startProfiling } from './profiler.js';
import type { Failures } from './redis.js';
import { runCalls } from './redis-contenders.js';
import {
  createMySqlContender,
  createPostgresContender,
  createSqliteContender,
  describeSqlite,
  floodgateOf,
  SQL_POOL_SIZE,
  type SqlContender,
  type SqlContenderId,
  type SqlContenderInfo,
  type SqlDatabase,
  sqlContenderInfo,
  sqlContenders,
} from './sql-contenders.js';
import { type BenchMySql, type BenchPostgres, type CpuSnapshot, startBenchMySql, startBenchPostgres } from './sql-servers.js';
import { type SqlStorageRow, sqlStoragePerKey } from './sql-storage.js';
import { formatRate, rotate } from './stats.js';

export type SqlScenario = 'sequential' | 'concurrent' | 'hot';
export const sqlScenarios: readonly SqlScenario[] = ['sequential', 'concurrent', 'hot'];

type PerContender<T> = Partial<Record<SqlContenderId, T>>;
type PerScenario<T> = Record<SqlScenario, PerContender<T>>;

export interface SqlResults {
  contenders: readonly SqlContenderInfo[];
  /** Each database's server as the run found it ("PostgreSQL 15.4 (the machine's, 127.0.0.1:5432)"); SQLite's library version. */
  servers: Partial<Record<SqlDatabase, string>>;
  /** Calls per measurement. */
  ops: Record<SqlDatabase, Record<SqlScenario, number>>;
  inFlight: number;
  /** Connections in each contender's pool (PostgreSQL, MySQL). */
  poolSize: number;
  rounds: number;
  /** Decisions per second per round. */
  throughput: PerScenario<number[]>;
  /** µs of the database server's CPU per decision (utime + stime of what serves this run, see sql-servers.ts), per round; NaN for SQLite (no server). */
  serverMicrosPerCall: PerScenario<number[]>;
  /** µs of the harness process's CPU per decision (the library and its driver; for SQLite, everything), per round. */
  clientMicrosPerCall: PerScenario<number[]>;
  /** Bytes written to the server's log per decision (PostgreSQL WAL, InnoDB redo: server-wide), per round. */
  logBytesPerCall: PerScenario<number[]>;
  /** Statements the client sent per decision (the round trips; SQLite: statements run), last round. */
  sentPerCall: PerScenario<number>;
  /** Statements the server ran per decision, those inside procedures included (MySQL's Queries, a server-wide counter), last round. */
  runPerCall: PerScenario<number>;
  /** Statements prepared per decision (SQLite), last round. */
  preparedPerCall: PerScenario<number>;
  /** Calls not admitted or failed (should be 0). */
  failures: PerContender<Failures>;
  storage: SqlStorageRow[];
  /** CPU profiles of Floodgate's stores, 64 in flight over random keys, Node side (full runs only). */
  profiles: Profile[];
}

const perScenario = <T>(): PerScenario<T> => ({ sequential: {}, concurrent: {}, hot: {} });

function push<T>(table: PerScenario<T[]>, scenario: SqlScenario, id: SqlContenderId, value: T): void {
  const values = table[scenario][id] ?? [];
  values.push(value);
  table[scenario][id] = values;
}

/** What a database tells about the work done on it, read before and after each measurement. */
interface Probe {
  /** CPU the server has used for this run so far (undefined: no server, or /proc cannot tell). */
  serverCpu(): Promise<CpuSnapshot | undefined>;
  /** µs of server CPU between two snapshots (NaN without a server). */
  serverCpuBetween(before: CpuSnapshot | undefined, after: CpuSnapshot | undefined): number;
  /** Statements the server ran (NaN where it does not count them) and bytes written to its log, both server-wide. */
  counters(): Promise<{ run: number; logBytes: number }>;
}

const noCounters = async () => ({ run: Number.NaN, logBytes: Number.NaN });

function postgresProbe(server: BenchPostgres): Probe {
  return {
    serverCpu: () => server.serverCpu(),
    serverCpuBetween: (before, after) => server.serverCpuBetween(before, after),
    async counters() {
      const { rows } = await server.admin.query<{ wal: number }>("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8 AS wal");
      return { run: Number.NaN, logBytes: Number(rows[0]?.wal) };
    },
  };
}

async function mysqlProbe(server: BenchMySql): Promise<Probe> {
  const read = async () => {
    const [rows] = (await server.admin.query("SHOW GLOBAL STATUS WHERE Variable_name IN ('Queries', 'Innodb_os_log_written')")) as unknown as [
      { Variable_name: string; Value: string }[],
    ];
    const value = (name: string) => Number(rows.find((row) => row.Variable_name === name)?.Value ?? Number.NaN);
    return { run: value('Queries'), logBytes: value('Innodb_os_log_written') };
  };
  // The server's counters are global: what the harness's own statements between two readings add (the second reading,
  // and the two of the server's CPU in between) is taken off every measurement.
  const first = await read();
  await server.serverCpu();
  await server.serverCpu();
  const own = (await read()).run - first.run;
  return {
    serverCpu: () => server.serverCpu(),
    serverCpuBetween: (before, after) => server.serverCpuBetween(before, after),
    async counters() {
      const now = await read();
      return { run: now.run - own, logBytes: now.logBytes };
    },
  };
}

/** Runs every round of one database's contenders, then their storage per key. */
async function benchDatabase(
  config: BenchConfig,
  database: SqlDatabase,
  contenders: ReadonlyMap<SqlContenderId, SqlContender>,
  probe: Probe,
  keys: readonly string[],
  results: SqlResults,
): Promise<void> {
  const { rounds, inFlight, storageKeys } = config.sql;
  const ops = config.sql.ops[database];
  const ids = [...contenders.keys()];
  const hot = [HOT_KEY];
  const scenarioKeys = (scenario: SqlScenario) => (scenario === 'hot' ? hot : keys);
  const lanes = (scenario: SqlScenario) => (scenario === 'sequential' ? 1 : inFlight);
  // Warm-up: tables made, pools full, statements prepared, code compiled.
  for (const contender of contenders.values()) {
    for (const scenario of sqlScenarios) await runCalls(contender, scenarioKeys(scenario), Math.max(50, ops[scenario] >> 2), lanes(scenario));
    await contender.clear();
  }
  for (let round = 0; round < rounds; round++) {
    for (const scenario of sqlScenarios) {
      for (const id of rotate(ids, round)) {
        const contender = contenders.get(id) as SqlContender;
        await contender.clear();
        const n = ops[scenario];
        const before = { counters: await probe.counters(), sent: contender.sent(), prepared: contender.prepared(), server: await probe.serverCpu() };
        const client = process.cpuUsage();
        const started = process.hrtime.bigint();
        const outcome = await runCalls(contender, scenarioKeys(scenario), n, lanes(scenario));
        const opsPerSecond = n / (Number(process.hrtime.bigint() - started) / 1e9);
        const clientCpu = process.cpuUsage(client);
        const server = await probe.serverCpu();
        const counters = await probe.counters();
        push(results.throughput, scenario, id, opsPerSecond);
        push(results.serverMicrosPerCall, scenario, id, probe.serverCpuBetween(before.server, server) / n);
        push(results.clientMicrosPerCall, scenario, id, (clientCpu.user + clientCpu.system) / n);
        push(results.logBytesPerCall, scenario, id, (counters.logBytes - before.counters.logBytes) / n);
        results.sentPerCall[scenario][id] = (contender.sent() - before.sent) / n;
        results.runPerCall[scenario][id] = (counters.run - before.counters.run) / n;
        results.preparedPerCall[scenario][id] = (contender.prepared() - before.prepared) / n;
        const failures = results.failures[id] ?? { notAdmitted: 0, errors: 0 };
        results.failures[id] = failures;
        failures.notAdmitted += n - outcome.admitted - outcome.errors;
        failures.errors += outcome.errors;
        if (outcome.firstError !== undefined) failures.firstError ??= outcome.firstError;
        log(`sql round ${round + 1}/${rounds} ${database.padEnd(8)} ${scenario.padEnd(10)} ${id.padEnd(30)} ${formatRate(opsPerSecond)}/s`);
      }
    }
  }
  if (!config.quick) {
    // Where the harness's CPU per call goes (its share of the cores is half of what bounds the rates with calls in flight).
    const id = floodgateOf[database];
    const contender = contenders.get(id) as SqlContender;
    const file = `sql-${database}-concurrent`;
    const path = join(profileDir, `${file}.cpuprofile`);
    mkdirSync(profileDir, { recursive: true });
    await contender.clear();
    const stop = await startProfiling(path);
    await runCalls(contender, keys, ops.concurrent, inFlight);
    await stop();
    const scenario = `Floodgate ${sqlContenderInfo[id].short} fixed-window, ${inFlight} in flight, 100k keys (Node side, in the harness process)`;
    const profile = summarise(scenario, `bench/profiles/${file}.cpuprofile`, JSON.parse(readFileSync(path, 'utf8')) as Parameters<typeof summarise>[2]);
    results.profiles.push(profile);
    log(`profile ${file}: ${profile.byPackage.map((f) => `${f.name} ${f.selfPercent}%`).join(', ')}`);
  }
  // One call at a time: with calls in flight, PostgreSQL extends a table by up to 20 pages per waiting writer at once, so
  // its size would depend on how the writers met, not on what they wrote.
  for (const [id, contender] of contenders) results.storage.push(await sqlStoragePerKey(id, contender, storageKeys, 1));
}

/** Creates a database's contenders in turn, runs `use`, and closes every one created, whatever happens. */
async function withContenders(
  ids: readonly SqlContenderId[],
  create: (id: SqlContenderId) => Promise<SqlContender>,
  use: (contenders: ReadonlyMap<SqlContenderId, SqlContender>) => Promise<void>,
): Promise<void> {
  const contenders = new Map<SqlContenderId, SqlContender>();
  try {
    for (const id of ids) contenders.set(id, await create(id));
    await use(contenders);
  } finally {
    for (const contender of contenders.values()) await contender.close().catch(() => undefined);
  }
}

export async function benchSql(config: BenchConfig): Promise<SqlResults> {
  const { rounds, inFlight, ops } = config.sql;
  const results: SqlResults = {
    contenders: Object.values(sqlContenderInfo),
    servers: {},
    ops,
    inFlight,
    poolSize: SQL_POOL_SIZE,
    rounds,
    throughput: perScenario(),
    serverMicrosPerCall: perScenario(),
    clientMicrosPerCall: perScenario(),
    logBytesPerCall: perScenario(),
    sentPerCall: perScenario(),
    runPerCall: perScenario(),
    preparedPerCall: perScenario(),
    failures: {},
    storage: [],
    profiles: [],
  };
  const longest = Math.max(...Object.values(ops).flatMap((scenarios) => [scenarios.sequential, scenarios.concurrent]));
  const keys = randomSequence(keyPool(100_000), longest);

  const postgres = await startBenchPostgres();
  try {
    results.servers.postgres = postgres.description;
    log(`sql: ${postgres.description}, database ${postgres.name}`);
    await withContenders(
      sqlContenders.postgres,
      (id) => createPostgresContender(id, postgres),
      (contenders) => benchDatabase(config, 'postgres', contenders, postgresProbe(postgres), keys, results),
    );
  } finally {
    await postgres.drop();
  }

  const mysql = await startBenchMySql();
  try {
    results.servers.mysql = mysql.description;
    log(`sql: ${mysql.description}, database ${mysql.name}`);
    const probe = await mysqlProbe(mysql);
    await withContenders(
      sqlContenders.mysql,
      (id) => createMySqlContender(id, mysql),
      (contenders) => benchDatabase(config, 'mysql', contenders, probe, keys, results),
    );
  } finally {
    await mysql.drop();
  }

  const dir = mkdtempSync(join(tmpdir(), 'floodgate-bench-sqlite-'));
  try {
    await withContenders(
      sqlContenders.sqlite,
      (id) => createSqliteContender(id, dir),
      async (contenders) => {
        results.servers.sqlite = describeSqlite(dir);
        await benchDatabase(
          config,
          'sqlite',
          contenders,
          { serverCpu: async () => undefined, serverCpuBetween: () => Number.NaN, counters: noCounters },
          keys,
          results,
        );
      },
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return results;
}
