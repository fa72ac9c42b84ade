/*
 * The SQL-backed limiters compared in sql.ts, each reduced to its per-request
 * call, with its own default table and key naming, a fixed window (what
 * rate-limiter-flexible and @acpr/rate-limit-postgresql do; Floodgate's
 * `algorithm: 'fixed-window'`), a limit no run reaches, and a pool of
 * SQL_POOL_SIZE connections of its own (SQLite: a database file of its own,
 * WAL, one connection, as each library is used).
 */
import { join } from 'node:path';
import { PostgresStore as AcprPostgresStore } from '@acpr/rate-limit-postgresql';
import { createLimiter, type Decision, type Store } from '@floodgate/core';
import { MySqlStore } from '@floodgate/mysql';
import { PostgresStore } from '@floodgate/postgres';
import { SqliteStore } from '@floodgate/sqlite';
import Database from 'better-sqlite3';
import type { Options as ExpressRateLimitOptions } from 'express-rate-limit';
import mysqlCallbacks from 'mysql2';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { RateLimiterMySQL, RateLimiterPostgres, RateLimiterSQLite } from 'rate-limiter-flexible';
import { type Contender, LIMIT, WINDOW_MS } from './memory-contenders.js';
import type { BenchMySql, BenchPostgres } from './sql-servers.js';

export type SqlDatabase = 'postgres' | 'mysql' | 'sqlite';

export type SqlContenderId =
  | 'floodgate-postgres'
  | 'rate-limiter-flexible-postgres'
  | 'acpr-postgres'
  | 'floodgate-mysql'
  | 'rate-limiter-flexible-mysql'
  | 'floodgate-sqlite'
  | 'rate-limiter-flexible-sqlite';

export interface SqlContenderInfo {
  id: SqlContenderId;
  label: string;
  /** The class or package, as targets name it. */
  short: string;
  database: SqlDatabase;
  floodgate: boolean;
}

export const sqlContenderInfo: Record<SqlContenderId, SqlContenderInfo> = {
  'floodgate-postgres': {
    id: 'floodgate-postgres',
    label: 'Floodgate PostgresStore (pg Pool), fixed-window',
    short: 'PostgresStore',
    database: 'postgres',
    floodgate: true,
  },
  'rate-limiter-flexible-postgres': {
    id: 'rate-limiter-flexible-postgres',
    label: 'rate-limiter-flexible RateLimiterPostgres (pg Pool)',
    short: 'RateLimiterPostgres',
    database: 'postgres',
    floodgate: false,
  },
  'acpr-postgres': {
    id: 'acpr-postgres',
    label: '@acpr/rate-limit-postgresql (express-rate-limit store)',
    short: '@acpr/rate-limit-postgresql',
    database: 'postgres',
    floodgate: false,
  },
  'floodgate-mysql': {
    id: 'floodgate-mysql',
    label: 'Floodgate MySqlStore (mysql2 pool), fixed-window',
    short: 'MySqlStore',
    database: 'mysql',
    floodgate: true,
  },
  'rate-limiter-flexible-mysql': {
    id: 'rate-limiter-flexible-mysql',
    label: 'rate-limiter-flexible RateLimiterMySQL (mysql2 pool)',
    short: 'RateLimiterMySQL',
    database: 'mysql',
    floodgate: false,
  },
  'floodgate-sqlite': {
    id: 'floodgate-sqlite',
    label: 'Floodgate SqliteStore (better-sqlite3, WAL), fixed-window',
    short: 'SqliteStore',
    database: 'sqlite',
    floodgate: true,
  },
  'rate-limiter-flexible-sqlite': {
    id: 'rate-limiter-flexible-sqlite',
    label: 'rate-limiter-flexible RateLimiterSQLite (better-sqlite3, WAL)',
    short: 'RateLimiterSQLite',
    database: 'sqlite',
    floodgate: false,
  },
};

export const sqlContenders: Record<SqlDatabase, readonly SqlContenderId[]> = {
  postgres: ['floodgate-postgres', 'rate-limiter-flexible-postgres', 'acpr-postgres'],
  mysql: ['floodgate-mysql', 'rate-limiter-flexible-mysql'],
  sqlite: ['floodgate-sqlite', 'rate-limiter-flexible-sqlite'],
};

/** The one Floodgate row each peer is compared with. */
export const floodgateOf: Record<SqlDatabase, SqlContenderId> = { postgres: 'floodgate-postgres', mysql: 'floodgate-mysql', sqlite: 'floodgate-sqlite' };

/** rate-limiter-flexible's store on each database: the reference of the database's rows in the tables and the chart. */
export const referenceOf: Record<SqlDatabase, SqlContenderId> = {
  postgres: 'rate-limiter-flexible-postgres',
  mysql: 'rate-limiter-flexible-mysql',
  sqlite: 'rate-limiter-flexible-sqlite',
};

/** Connections in each contender's pool: the same for every library. */
export const SQL_POOL_SIZE = 10;

/** What a contender's tables hold: rows, and bytes as the database counts them (table, indexes, TOAST). */
export interface TableStorage {
  rows: number;
  bytes: number;
}

export interface SqlContender extends Contender {
  /** The tables it writes, as the report names them. */
  readonly tables: string;
  /** Empties its tables: each measurement starts from none of its keys. */
  clear(): Promise<void>;
  /** What its tables hold now. */
  storage(): Promise<TableStorage>;
  /** Statements run through its client so far, the harness's own included (sql.ts reads the difference over the timed calls). */
  sent(): number;
  /** Prepared statements it has made so far (SQLite only; NaN elsewhere). */
  prepared(): number;
  /** An example of the key it stores for client 10.0.0.1. */
  exampleKey(): Promise<string>;
  close(): Promise<void>;
}

/**
 * How long a Floodgate call may wait for its store. The peers wait as long as their database takes;
 * Floodgate's default (200 ms) would answer a call queued behind 63 others for a pooled connection,
 * or caught in a checkpoint's flush, with onStoreError instead of the database's decision.
 */
export const SQL_TIMEOUT_MS = 10_000;

const floodgateCall = (store: Store): Pick<Contender, 'call' | 'admits' | 'failure'> => {
  const limiter = createLimiter({ algorithm: 'fixed-window', limit: LIMIT, windowMs: WINDOW_MS, store, timeoutMs: SQL_TIMEOUT_MS });
  return {
    call: (key) => limiter.consume(key),
    admits: (decision) => (decision as Decision).allowed,
    // onStoreError 'allow' would admit a call the store never saw: count it as a failure, so it shows.
    failure: (decision) => (decision as Decision).storeError,
  };
};

/** rate-limiter-flexible's stores take a callback that says when their table is made. */
function created<T>(make: (ready: (error?: unknown) => void) => T): Promise<T> {
  return new Promise((resolve, reject) => {
    const limiter = make((error) => (error ? reject(error instanceof Error ? error : new Error(String(error))) : resolve(limiter)));
  });
}

/**
 * A pg pool whose idle connections may end under it (the run's database is dropped WITH (FORCE) as
 * the pools close) without an unhandled 'error' event.
 */
function quiet<T extends { on(event: 'error', listener: (error: Error) => void): unknown }>(pool: T): T {
  pool.on('error', () => undefined);
  return pool;
}

/** Counts calls of `object[method]` (every statement a pool runs goes through its query()). */
function counting<T extends object>(object: T, method: keyof T & string): () => number {
  let calls = 0;
  const original = (object[method] as (...args: unknown[]) => unknown).bind(object);
  (object as Record<string, unknown>)[method] = (...args: unknown[]) => {
    calls++;
    return original(...args);
  };
  return () => calls;
}

// ---------------------------------------------------------------------------------------------- PostgreSQL

async function pgStorage(admin: pg.Client, tables: readonly string[]): Promise<TableStorage> {
  let rows = 0;
  let bytes = 0;
  for (const table of tables) {
    const { rows: result } = await admin.query<{ rows: string; bytes: string }>(
      `SELECT (SELECT count(*) FROM ${table}) AS rows, pg_total_relation_size($1::regclass) AS bytes`,
      [table],
    );
    rows += Number(result[0]?.rows);
    bytes += Number(result[0]?.bytes);
  }
  return { rows, bytes };
}

async function pgExample(admin: pg.Client, table: string, column: string): Promise<string> {
  const { rows } = await admin.query<{ key: string }>(`SELECT ${column}::text AS key FROM ${table} WHERE ${column}::text ~ '10\\.0\\.0\\.1(?!\\d)' LIMIT 1`);
  return rows[0]?.key ?? '?';
}

/** Waits until @acpr/rate-limit-postgresql's migrations (which its constructor starts and does not await) have run. */
async function acprMigrated(admin: pg.Client): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const { rows } = await admin.query<{ done: boolean }>(
      "SELECT to_regprocedure('rate_limit.ind_increment(text,text,double precision,timestamptz)') IS NOT NULL AS done",
    );
    if (rows[0]?.done) return;
    if (Date.now() > deadline) throw new Error('@acpr/rate-limit-postgresql: its migrations did not finish within 60 s');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export async function createPostgresContender(id: SqlContenderId, server: BenchPostgres): Promise<SqlContender> {
  const { admin } = server;
  switch (id) {
    case 'floodgate-postgres': {
      const pool = quiet(new pg.Pool({ connectionString: server.url, max: SQL_POOL_SIZE }));
      const sent = counting(pool, 'query');
      const table = 'floodgate_state';
      return {
        ...floodgateCall(new PostgresStore({ pool })),
        tables: table,
        clear: async () => void (await admin.query(`TRUNCATE ${table}`)),
        storage: () => pgStorage(admin, [table]),
        sent,
        prepared: () => Number.NaN,
        exampleKey: () => pgExample(admin, table, 'key'),
        close: () => pool.end(),
      };
    }
    case 'rate-limiter-flexible-postgres': {
      const pool = quiet(new pg.Pool({ connectionString: server.url, max: SQL_POOL_SIZE }));
      const sent = counting(pool, 'query');
      const table = 'rlflx'; // its default: the key prefix
      const limiter = await created(
        (ready) => new RateLimiterPostgres({ storeClient: pool, storeType: 'pool', points: LIMIT, duration: Math.ceil(WINDOW_MS / 1000) }, ready),
      );
      return {
        call: (key) => limiter.consume(key),
        admits: () => true, // consume() rejects when it denies
        tables: table,
        clear: async () => void (await admin.query(`TRUNCATE ${table}`)),
        storage: () => pgStorage(admin, [table]),
        sent,
        prepared: () => Number.NaN,
        exampleKey: () => pgExample(admin, table, 'key'),
        close: () => pool.end(),
      };
    }
    case 'acpr-postgres': {
      // Its default export (PostgresStoreAggregatedIP): a count per key, in a session row per prefix whose expiry is the window's end.
      const store = new AcprPostgresStore({ connectionString: server.url, max: SQL_POOL_SIZE }, 'fg-bench');
      await acprMigrated(admin);
      store.init({ windowMs: WINDOW_MS } as ExpressRateLimitOptions);
      quiet(store.pool as pg.Pool);
      const sent = counting(store.pool as { query(...args: unknown[]): unknown }, 'query');
      const tables = ['rate_limit.records_aggregated', 'rate_limit.sessions'];
      return {
        call: (key) => store.increment(key),
        admits: (info) => (info as { totalHits: number }).totalHits <= LIMIT,
        tables: tables.join(' + '),
        // The session row stays (its window has an hour to go): the counts go.
        clear: async () => void (await admin.query('TRUNCATE rate_limit.records_aggregated')),
        storage: () => pgStorage(admin, tables),
        sent,
        prepared: () => Number.NaN,
        exampleKey: () => pgExample(admin, 'rate_limit.records_aggregated', 'key'),
        close: () => (store.pool as pg.Pool).end(),
      };
    }
    default:
      throw new Error(`${id} is not a PostgreSQL contender`);
  }
}

// ---------------------------------------------------------------------------------------------- MySQL / MariaDB

async function mysqlStorage(admin: mysql.Connection, table: string): Promise<TableStorage> {
  // InnoDB's sizes in information_schema are its statistics: brought up to date first.
  await admin.query(`ANALYZE TABLE \`${table}\``);
  const [[count]] = (await admin.query(`SELECT COUNT(*) AS n FROM \`${table}\``)) as unknown as [{ n: number }[]];
  const [[size]] = (await admin.query(
    'SELECT data_length + index_length AS bytes FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?',
    [table],
  )) as unknown as [{ bytes: number }[]];
  return { rows: Number(count?.n), bytes: Number(size?.bytes) };
}

async function mysqlExample(admin: mysql.Connection, table: string): Promise<string> {
  const [rows] = (await admin.query(`SELECT \`key\` AS k FROM \`${table}\` WHERE \`key\` LIKE '%10.0.0.1%'`)) as unknown as [{ k: string }[]];
  return rows.map((row) => row.k).find((key) => /10\.0\.0\.1(?!\d)/.test(key)) ?? '?';
}

export async function createMySqlContender(id: SqlContenderId, server: BenchMySql): Promise<SqlContender> {
  const { admin } = server;
  switch (id) {
    case 'floodgate-mysql': {
      const pool = mysql.createPool({ uri: server.url, connectionLimit: SQL_POOL_SIZE });
      const sent = counting(pool, 'query');
      const table = 'floodgate_state';
      return {
        ...floodgateCall(new MySqlStore({ pool })),
        tables: table,
        clear: async () => void (await admin.query(`TRUNCATE TABLE \`${table}\``)),
        storage: () => mysqlStorage(admin, table),
        sent,
        prepared: () => Number.NaN,
        exampleKey: () => mysqlExample(admin, table),
        close: () => pool.end(),
      };
    }
    case 'rate-limiter-flexible-mysql': {
      // Its own kind of pool: mysql2's callback API (getConnection(callback)).
      const pool = mysqlCallbacks.createPool({ uri: server.url, connectionLimit: SQL_POOL_SIZE });
      // It runs its statements on connections it takes from the pool: each connection's query() counted once it is handed out.
      let sent = 0;
      const counted = new WeakSet<object>();
      const getConnection = pool.getConnection.bind(pool);
      pool.getConnection = ((callback: (error: unknown, connection: mysqlCallbacks.PoolConnection) => void) =>
        getConnection((error, connection) => {
          if (connection !== undefined && !counted.has(connection)) {
            counted.add(connection);
            const query = connection.query.bind(connection) as (...args: unknown[]) => unknown;
            (connection as unknown as Record<string, unknown>).query = (...args: unknown[]) => {
              sent++;
              return query(...args);
            };
          }
          callback(error, connection);
        })) as typeof pool.getConnection;
      const table = 'rlflx';
      const limiter = await created(
        (ready) =>
          new RateLimiterMySQL({ storeClient: pool, storeType: 'pool', dbName: server.name, points: LIMIT, duration: Math.ceil(WINDOW_MS / 1000) }, ready),
      );
      return {
        call: (key) => limiter.consume(key),
        admits: () => true, // consume() rejects when it denies
        tables: table,
        clear: async () => void (await admin.query(`TRUNCATE TABLE \`${table}\``)),
        storage: () => mysqlStorage(admin, table),
        sent: () => sent,
        prepared: () => Number.NaN,
        exampleKey: () => mysqlExample(admin, table),
        close: () => new Promise<void>((resolve) => pool.end(() => resolve())),
      };
    }
    default:
      throw new Error(`${id} is not a MySQL contender`);
  }
}

// ---------------------------------------------------------------------------------------------- SQLite

/** Statements run and prepared on each open database (counted by countStatements). */
const sqliteCounts = new WeakMap<object, { statements: number; prepared: number }>();
let statementsCounted = false;

/**
 * Counts the statements every database runs, at the same small cost for every library: better-sqlite3's
 * Statement methods are patched once, on their prototype, and count into their database's entry (the
 * BEGIN and COMMIT of its transaction() included: they are statements of that class too).
 */
function countStatements(db: Database.Database): void {
  if (statementsCounted) return;
  statementsCounted = true;
  const prototype = Object.getPrototypeOf(db.prepare('SELECT 1')) as Record<string, unknown>;
  for (const method of ['run', 'get', 'all', 'iterate']) {
    const original = prototype[method] as (this: { database: object }, ...args: unknown[]) => unknown;
    prototype[method] = function (this: { database: object }, ...args: unknown[]) {
      const counts = sqliteCounts.get(this.database);
      if (counts !== undefined) counts.statements++;
      return original.apply(this, args);
    };
  }
}

/** A database file of its own in `dir`, in WAL mode (what both libraries' docs advise), every statement it runs and prepares counted. */
function openSqlite(dir: string, name: string) {
  const db = new Database(join(dir, `${name}.db`));
  db.pragma('journal_mode = WAL');
  countStatements(db);
  const counts = { statements: 0, prepared: 0 };
  sqliteCounts.set(db, counts);
  const prepare = db.prepare.bind(db);
  db.prepare = ((source: string) => {
    counts.prepared++;
    return prepare(source);
  }) as typeof db.prepare;
  const exec = db.exec.bind(db);
  db.exec = ((source: string) => {
    counts.statements++;
    return exec(source);
  }) as typeof db.exec;
  return { db, statements: () => counts.statements, prepared: () => counts.prepared };
}

/** "SQLite 3.50.4 (journal_mode wal, synchronous 1)": the library's SQLite, as a file in `dir` opened as the contenders open theirs. */
export function describeSqlite(dir: string): string {
  const { db } = openSqlite(dir, 'probe');
  try {
    const version = (db.prepare('SELECT sqlite_version() AS v').get() as { v: string }).v;
    const synchronous = ['OFF', 'NORMAL', 'FULL', 'EXTRA'][Number(db.pragma('synchronous', { simple: true }))] ?? '?';
    const journal = String(db.pragma('journal_mode', { simple: true })).toUpperCase();
    const durability = journal === 'WAL' && synchronous === 'NORMAL' ? ': a commit waits for no fsync' : '';
    return `SQLite ${version} (better-sqlite3's, a file per library; journal_mode ${journal}, synchronous ${synchronous}${durability})`;
  } finally {
    db.close();
  }
}

function sqliteStorage(db: Database.Database, table: string): TableStorage {
  // Pages the file uses once the WAL is folded in (its free pages, left by the deletes of clear(), not counted).
  db.pragma('wal_checkpoint(TRUNCATE)');
  const pages = Number(db.pragma('page_count', { simple: true })) - Number(db.pragma('freelist_count', { simple: true }));
  const pageSize = Number(db.pragma('page_size', { simple: true }));
  const rows = Number((db.prepare(`SELECT COUNT(*) AS n FROM "${table}"`).get() as { n: number }).n);
  return { rows, bytes: pages * pageSize };
}

function sqliteExample(db: Database.Database, table: string): string {
  const rows = db.prepare(`SELECT key FROM "${table}" WHERE key LIKE '%10.0.0.1%'`).all() as { key: string }[];
  return rows.map((row) => row.key).find((key) => /10\.0\.0\.1(?!\d)/.test(key)) ?? '?';
}

export async function createSqliteContender(id: SqlContenderId, dir: string): Promise<SqlContender> {
  switch (id) {
    case 'floodgate-sqlite': {
      const { db, statements, prepared } = openSqlite(dir, 'floodgate');
      const table = 'floodgate_state';
      return {
        ...floodgateCall(new SqliteStore({ database: db })),
        tables: table,
        clear: async () => void db.exec(`DELETE FROM "${table}"`),
        storage: async () => sqliteStorage(db, table),
        sent: statements,
        prepared,
        exampleKey: async () => sqliteExample(db, table),
        close: async () => void db.close(),
      };
    }
    case 'rate-limiter-flexible-sqlite': {
      const { db, statements, prepared } = openSqlite(dir, 'rate-limiter-flexible');
      const table = 'rlflx';
      const limiter = await created(
        (ready) =>
          new RateLimiterSQLite(
            { storeClient: db, storeType: 'better-sqlite3', tableName: table, points: LIMIT, duration: Math.ceil(WINDOW_MS / 1000) },
            ready,
          ),
      );
      return {
        call: (key) => limiter.consume(key),
        admits: () => true, // consume() rejects when it denies
        tables: table,
        clear: async () => void db.exec(`DELETE FROM "${table}"`),
        storage: async () => sqliteStorage(db, table),
        sent: statements,
        prepared,
        exampleKey: async () => sqliteExample(db, table),
        close: async () => void db.close(),
      };
    }
    default:
      throw new Error(`${id} is not a SQLite contender`);
  }
}
