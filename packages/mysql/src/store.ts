import { ErrorCodes, FloodgateError } from '@floodgate/core';
import { KeyValueStore, VersionedBackend, type VersionedDatabase, type VersionedRead, type VersionedWrite } from '@floodgate/core/store';
import { isTableName, listSql, readSql, schemaStatements, sweepSql, writeSql } from './schema.js';

/** A connection of a mysql2 pool, for the DDL (which takes a named lock across statements). */
export interface MySqlConnectionLike {
  query(sql: string, values?: unknown[]): Promise<unknown>;
  release(): void;
}

/** A mysql2 pool (`mysql2/promise`'s `createPool()`, or the callback pool's `.promise()`). */
export interface MySqlPoolLike {
  query(sql: string, values?: unknown[]): Promise<[unknown, unknown]>;
  getConnection(): Promise<MySqlConnectionLike>;
}

export interface MySqlStoreOptions {
  /** A mysql2 promise pool. MySQL 8.0.4+ or MariaDB 10.6+ (JSON_TABLE). */
  pool: MySqlPoolLike;
  /** The table (letters, digits and `_`). @defaultValue 'floodgate_state' */
  table?: string;
  /** Create the table and its write procedure on first use; false when your migrations own them (sql/floodgate_state.sql). @defaultValue true */
  createTable?: boolean;
  /** Whose clock decides: the database's (`'server'`), or the limiter's `now()` (`'client'`: tests, replays). @defaultValue 'server' */
  clock?: 'server' | 'client';
  /** Prepended to every key, before the limiter's prefix. @defaultValue '' */
  prefix?: string;
}

const OPTIONS = ['pool', 'table', 'createTable', 'clock', 'prefix'];

const describe = (value: unknown): string => (typeof value === 'string' ? `'${value}'` : value === null ? 'null' : typeof value);

/** SQLSTATE 40001: the procedure's conflict signal, and InnoDB's deadlock. */
const isConflict = (error: unknown): boolean => (error as { sqlState?: unknown } | null)?.sqlState === '40001';

/** The table's statements over a mysql2 pool, for VersionedBackend. */
class MySqlDatabase implements VersionedDatabase {
  private readonly statements: { read: string; write: string; sweep: string };
  private ready: Promise<void> | undefined;

  constructor(
    private readonly pool: MySqlPoolLike,
    private readonly table: string,
    private readonly createTable: boolean,
  ) {
    this.statements = { read: readSql(table), write: writeSql(table), sweep: sweepSql(table) };
  }

  async read(keys: readonly string[]): Promise<VersionedRead> {
    await this.created();
    const [rows] = (await this.pool.query(this.statements.read, [JSON.stringify(keys)])) as [Record<string, unknown>[], unknown];
    if (!Array.isArray(rows) || rows.length !== keys.length) {
      throw new FloodgateError(ErrorCodes.STORE_REPLY, `MySQL answered ${Array.isArray(rows) ? rows.length : 'no'} rows for ${keys.length} keys.`);
    }
    const now = Number(rows[0]?.now);
    const alive = (row: Record<string, unknown>) => row.value !== null && Number(row.expires_at) > now;
    return {
      values: rows.map((row) => (alive(row) ? String(row.value) : null)),
      versions: rows.map((row) => (row.version === null ? 0 : Number(row.version))),
      now,
    };
  }

  async write(rows: readonly VersionedWrite[]): Promise<void> {
    await this.pool.query(this.statements.write, [JSON.stringify(rows)]);
  }

  isConflict = isConflict;

  async sweep(limit: number): Promise<number> {
    const [result] = (await this.pool.query(this.statements.sweep, [limit])) as [{ affectedRows?: number }, unknown];
    return Number(result.affectedRows ?? 0);
  }

  async list(prefix: string, after: string, count: number): Promise<[string, string][]> {
    await this.created();
    const [rows] = (await this.pool.query(listSql(this.table), [prefix, `${prefix}\u{10FFFF}`, after, count])) as [{ k: unknown; v: unknown }[], unknown];
    return rows.map((row) => [String(row.k), String(row.v)]);
  }

  /**
   * Creates the table and its procedure on first use (createTable), once per store, under a named
   * lock so that instances starting together take turns; a failure is tried again by the next call.
   */
  private created(): Promise<void> {
    if (!this.createTable) return Promise.resolve();
    this.ready ??= this.create().catch((error: unknown) => {
      // A read-only server (a replica) cannot create: reads go on, writes fail as store errors.
      if ((error as { sqlState?: unknown } | null)?.sqlState === '25006' || /read.only/i.test(String((error as Error)?.message))) return;
      this.ready = undefined;
      throw error;
    });
    return this.ready;
  }

  private async create(): Promise<void> {
    const connection = await this.pool.getConnection();
    const lock = `floodgate:${this.table}`;
    try {
      await connection.query('SELECT GET_LOCK(?, 30)', [lock]);
      try {
        const [exists] = (await connection.query(
          'SELECT COUNT(*) AS n FROM information_schema.routines WHERE routine_schema = DATABASE() AND routine_name = ?',
          [`${this.table}_write1`],
        )) as [{ n: number }[]];
        // The procedure is made once: dropping it under other instances' calls would fail them.
        const statements = schemaStatements(this.table);
        await connection.query(statements[0] as string);
        if (Number(exists?.[0]?.n) === 0) for (const statement of statements.slice(1)) await connection.query(statement);
      } finally {
        await connection.query('SELECT RELEASE_LOCK(?)', [lock]);
      }
    } finally {
      connection.release();
    }
  }
}

/**
 * Limiter state in MySQL 8 or MariaDB 10.6+, shared by every process that
 * uses the same database. Every algorithm, all rules and scopes of a call all
 * or nothing, blocks and leases, decided by Floodgate's engine on the
 * database's clock. A denied call or a peek is one statement; an admitted call
 * two (a read, then a procedure call that writes only if no other process
 * changed those rows in between, else read and decide again).
 *
 * @example
 * ```ts
 * import mysql from 'mysql2/promise';
 * const pool = mysql.createPool({ uri: process.env.DATABASE_URL });
 * const limiter = createLimiter({ limit: 100, windowMs: 60_000, store: new MySqlStore({ pool }) });
 * ```
 */
export class MySqlStore extends KeyValueStore {
  constructor(options: MySqlStoreOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new FloodgateError(ErrorCodes.OPTION, `MySqlStore takes { pool }, got ${describe(options)}.`);
    }
    for (const key of Object.keys(options)) {
      if (!OPTIONS.includes(key)) throw new FloodgateError(ErrorCodes.UNKNOWN_OPTION, `MySqlStore has no option '${key}'; it takes ${OPTIONS.join(', ')}.`);
    }
    const { pool, table = 'floodgate_state', createTable = true, clock = 'server', prefix = '' } = options;
    if (typeof pool?.query !== 'function' || typeof pool.getConnection !== 'function') {
      throw new FloodgateError(
        ErrorCodes.OPTION,
        `MySqlStore pool must be a mysql2 promise pool (mysql.createPool() from 'mysql2/promise', or pool.promise()), got ${describe(pool)}.`,
      );
    }
    if (typeof table !== 'string' || !isTableName(table)) {
      throw new FloodgateError(ErrorCodes.OPTION, `MySqlStore table must be a name of letters, digits and _ (at most 57), got ${describe(table)}.`);
    }
    super(new VersionedBackend(new MySqlDatabase(pool, table, createTable)), { clock, prefix });
  }
}
