import { ErrorCodes, FloodgateError } from '@floodgate/core';
import { type KeyValueBackend, KeyValueStore, type StateChange } from '@floodgate/core/store';

/** A prepared statement, as better-sqlite3 and node:sqlite both have it. */
export interface SqliteStatementLike {
  all(...params: unknown[]): unknown[];
  run(...params: unknown[]): unknown;
}

/** An open database: better-sqlite3's `Database`, or node:sqlite's `DatabaseSync` (Node 22.5+). */
export interface SqliteDatabaseLike {
  prepare(sql: string): SqliteStatementLike;
  exec(sql: string): unknown;
}

export interface SqliteStoreOptions {
  /** An open database: `new Database('limits.db')` (better-sqlite3) or `new DatabaseSync('limits.db')` (node:sqlite). */
  database: SqliteDatabaseLike;
  /** The table (letters, digits and `_`). @defaultValue 'floodgate_state' */
  table?: string;
  /** Create the table and its index on first use; false when your migrations own them (sql/floodgate_state.sql). @defaultValue true */
  createTable?: boolean;
  /** Whose clock decides: this host's (`'server'`), or the limiter's `now()` (`'client'`: tests, replays). @defaultValue 'server' */
  clock?: 'server' | 'client';
  /** Prepended to every key, before the limiter's prefix. @defaultValue '' */
  prefix?: string;
}

const OPTIONS = ['database', 'table', 'createTable', 'clock', 'prefix'];
const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
/** Rows the store deletes once their time is up, per that many rows it wrote. */
const SWEEP_EVERY = 1000;

const describe = (value: unknown): string => (typeof value === 'string' ? `'${value}'` : value === null ? 'null' : typeof value);

/** The table and its index: one row per key and rule, the state's text, and when it may go (ms, this host's clock). */
export function schemaSql(table: string): string {
  return `CREATE TABLE IF NOT EXISTS "${table}" (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL,
  expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS "${table}_expires_at" ON "${table}" (expires_at);
`;
}

/** sql/floodgate_state.sql: the DDL as a migration file. */
export const migrationSql = (table: string): string => `-- Floodgate's SqliteStore: its table (createTable: false).\n${schemaSql(table)}`;

class SqliteBackend implements KeyValueBackend {
  private readonly read: SqliteStatementLike;
  private readonly upsert: SqliteStatementLike;
  private readonly remove: SqliteStatementLike;
  private readonly sweep: SqliteStatementLike;
  private readonly page: SqliteStatementLike;
  private written = 0;

  constructor(
    private readonly db: SqliteDatabaseLike,
    table: string,
  ) {
    const t = `"${table}"`;
    this.read = db.prepare(`SELECT s.value AS value, s.expires_at AS expires_at FROM json_each(?) AS k LEFT JOIN ${t} AS s ON s.key = k.value ORDER BY k.key`);
    this.upsert = db.prepare(
      `INSERT INTO ${t} (key, value, expires_at) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at`,
    );
    this.remove = db.prepare(`DELETE FROM ${t} WHERE key = ?`);
    this.sweep = db.prepare(`DELETE FROM ${t} WHERE key IN (SELECT key FROM ${t} WHERE expires_at < ? LIMIT ${SWEEP_EVERY})`);
    // Keys in the order of their UTF-8 bytes (SQLite's BINARY collation): code points.
    this.page = db.prepare(`SELECT key, value FROM ${t} WHERE key >= ? AND key < ? AND key > ? AND expires_at > ? ORDER BY key LIMIT ?`);
  }

  /** A page of live rows whose keys start with `prefix` (records: blocks by hand). */
  async list(prefix: string, after: string, count: number): Promise<[string, string][]> {
    const rows = this.page.all(prefix, `${prefix}\u{10FFFF}`, after, Date.now(), count) as { key: string; value: string }[];
    return rows.map((row) => [row.key, row.value]);
  }

  /**
   * One SQLite transaction, synchronous from BEGIN to COMMIT: BEGIN IMMEDIATE takes the database's
   * write lock at once (other processes wait for it, up to the connection's busy timeout), so the
   * read and the writes see no other writer in between. A peek reads in a deferred transaction.
   */
  async transact<T>(
    keys: readonly string[],
    decide: (values: readonly (string | null)[], now: number) => StateChange<T>,
    options: { readonly readOnly: boolean },
  ): Promise<T> {
    this.db.exec(options.readOnly ? 'BEGIN' : 'BEGIN IMMEDIATE');
    let result: T;
    let written = 0;
    try {
      const now = Date.now();
      const rows = this.read.all(JSON.stringify(keys)) as { value: string | null; expires_at: number | bigint | null }[];
      const values = rows.map((row) => (row.value !== null && Number(row.expires_at) > now ? row.value : null));
      const change = decide(values, now);
      for (const { key, value, ttlMs } of change.writes) {
        if (value === null) this.remove.run(key);
        else this.upsert.run(key, value, now + ttlMs);
      }
      written = change.writes.length;
      result = change.result;
      this.db.exec('COMMIT');
    } catch (error) {
      this.db.exec('ROLLBACK');
      throw error;
    }
    this.wrote(written);
    return result;
  }

  /** After every SWEEP_EVERY rows written, deletes rows whose time is up, SWEEP_EVERY at a time while there are that many. */
  private wrote(rows: number): void {
    this.written += rows;
    if (this.written < SWEEP_EVERY) return;
    this.written = 0;
    try {
      while (Number((this.sweep.run(Date.now()) as { changes: number | bigint }).changes) >= SWEEP_EVERY);
    } catch {
      // Busy: the next sweep tries again.
    }
  }
}

/**
 * Limiter state in one SQLite file, shared by every process on the host that
 * opens it (PM2 or cluster workers, several app processes): no server to run.
 * Every algorithm, all rules and scopes of a call all or nothing, blocks and
 * leases, decided by Floodgate's engine on the host's clock in one
 * transaction per call (BEGIN IMMEDIATE: writers take turns, exact under any
 * concurrency).
 *
 * @example
 * ```ts
 * import Database from 'better-sqlite3';
 * const database = new Database('/var/run/myapp/limits.db');
 * database.pragma('journal_mode = WAL');
 * const limiter = createLimiter({ limit: 100, windowMs: 60_000, store: new SqliteStore({ database }) });
 * ```
 */
export class SqliteStore extends KeyValueStore {
  constructor(options: SqliteStoreOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new FloodgateError(ErrorCodes.OPTION, `SqliteStore takes { database }, got ${describe(options)}.`);
    }
    for (const key of Object.keys(options)) {
      if (!OPTIONS.includes(key)) throw new FloodgateError(ErrorCodes.UNKNOWN_OPTION, `SqliteStore has no option '${key}'; it takes ${OPTIONS.join(', ')}.`);
    }
    const { database, table = 'floodgate_state', createTable = true, clock = 'server', prefix = '' } = options;
    if (typeof database?.prepare !== 'function' || typeof database.exec !== 'function') {
      throw new FloodgateError(
        ErrorCodes.OPTION,
        `SqliteStore database must be an open better-sqlite3 Database or node:sqlite DatabaseSync, got ${describe(database)}.`,
      );
    }
    if (typeof table !== 'string' || !TABLE_NAME.test(table)) {
      throw new FloodgateError(ErrorCodes.OPTION, `SqliteStore table must be a name of letters, digits and _, got ${describe(table)}.`);
    }
    if (createTable) database.exec(schemaSql(table));
    super(new SqliteBackend(database, table), { clock, prefix });
  }
}
