import { ErrorCodes, FloodgateError } from '@floodgate/core';
import { KeyValueStore, VersionedBackend, type VersionedDatabase, type VersionedRead, type VersionedWrite } from '@floodgate/core/store';
import { Batches, connectionsOf } from './batches.js';
import { type PgPoolLike, type PostgresJsLike, type PostgresRow, type QueryFunction, type Runner, runnerOf } from './clients.js';
import { createSql, isTableName, listSql, type Names, namesOf, readSql, sweepSql, writeSql } from './schema.js';

export type { PgPoolLike, PostgresJsLike, PostgresRow, QueryFunction };

export interface PostgresStoreOptions {
  /** A node-postgres `Pool` (or `Client`). One of `pool`, `client` and `query` is required. */
  pool?: PgPoolLike;
  /** A postgres.js `sql` (or a node-postgres `Client`). */
  client?: PostgresJsLike | PgPoolLike;
  /** Any function that runs one parameterized statement (`$1`, `$2`, ...) and returns its rows. */
  query?: QueryFunction;
  /** The table, `name` or `schema.name` (letters, digits and `_`). @defaultValue 'floodgate_state' */
  table?: string;
  /** Create the table, its index and its function on first use; false when your migrations own them (sql/floodgate_state.sql). @defaultValue true */
  createTable?: boolean;
  /**
   * Create the table UNLOGGED: writes skip the write-ahead log (faster, less I/O), but a crash of
   * the database empties it and replicas do not have it. Only when the table is created here.
   * @defaultValue false
   */
  unlogged?: boolean;
  /** Whose clock decides: the database's (`'server'`), or the limiter's `now()` (`'client'`: tests, replays). @defaultValue 'server' */
  clock?: 'server' | 'client';
  /** Prepended to every key, before the limiter's prefix. @defaultValue '' */
  prefix?: string;
}

const OPTIONS = ['pool', 'client', 'query', 'table', 'createTable', 'unlogged', 'clock', 'prefix'];

const describe = (value: unknown): string => (typeof value === 'string' ? `'${value}'` : value === null ? 'null' : typeof value);

/** PostgreSQL text holds no NUL: a key's NUL is stored as %00 (a key's own % is %25 already, so the two never meet). */
const storable = (key: string): string => (key.includes('\u0000') ? key.replaceAll('\u0000', '%00') : key);

const isConflict = (error: unknown): boolean => {
  const code = (error as { code?: unknown } | null)?.code;
  return code === '40001' || code === '40P01';
};

/** What the write function answers for a call it did not write: another writer came first (isConflict knows it). */
const changed = (): Error => Object.assign(new Error('floodgate: a state changed since it was read'), { code: '40001' });

/** The table's statements over whichever client was given, for VersionedBackend; those of calls that wait for a connection go together. */
class PostgresDatabase implements VersionedDatabase {
  private readonly run: Runner;
  private readonly batches: Batches;
  private readonly names: Names;
  private readonly statements: { read: string; write: string; sweep: string; list: string };
  private ready: Promise<void> | undefined;
  /** A call's keys: its rows, one per key in order, read with others' or alone. */
  private readonly readRows: (keys: readonly string[]) => Promise<readonly PostgresRow[]>;
  /** A call's rows to write, as JSON: whether the write function wrote them (null: not tried, a row is held elsewhere). */
  private readonly writeRows: (rows: { json: string; count: number }) => Promise<boolean | null>;

  constructor(
    options: PostgresStoreOptions,
    private readonly createTable: boolean,
    private readonly unlogged: boolean,
    table: string,
  ) {
    this.run = runnerOf(options);
    this.names = namesOf(table);
    this.statements = { read: readSql(this.names), write: writeSql(this.names), sweep: sweepSql(this.names), list: listSql(this.names) };
    this.batches = new Batches(connectionsOf(options.pool ?? options.client ?? options.query));
    this.readRows = this.batches.kind(
      (calls) => this.readAll(calls),
      (keys) => keys.length,
    );
    this.writeRows = this.batches.kind(
      (calls) => this.writeAll(calls),
      (rows) => rows.count,
    );
  }

  async read(keys: readonly string[]): Promise<VersionedRead> {
    await this.created();
    const rows = await this.readRows(keys.map(storable));
    const now = Number(rows[0]?.now);
    const alive = (row: PostgresRow) => row.value !== null && Number(row.expires_at) > now;
    return {
      values: rows.map((row) => (alive(row) ? String(row.value) : null)),
      versions: rows.map((row) => (row.version === null ? 0 : Number(row.version))),
      now,
    };
  }

  async write(rows: readonly VersionedWrite[]): Promise<void> {
    const json = JSON.stringify(rows.map(([key, ...rest]) => [storable(key), ...rest]));
    const written = await this.writeRows({ json, count: rows.length });
    // A row another transaction holds: this call alone waits for it, not the calls it would have gone with.
    if (written === null) await this.batches.run(() => this.run(this.statements.write, [`[${json}]`]));
    else if (!written) throw changed();
  }

  /** The rows of every call's keys, in one read. */
  private async readAll(calls: readonly (readonly string[])[]): Promise<(readonly PostgresRow[])[]> {
    const keys = calls.length === 1 ? (calls[0] as readonly string[]) : calls.flat();
    const rows = await this.run(this.statements.read, [JSON.stringify(keys)]);
    if (rows.length !== keys.length) throw new FloodgateError(ErrorCodes.STORE_REPLY, `PostgreSQL answered ${rows.length} rows for ${keys.length} keys.`);
    if (calls.length === 1) return [rows];
    let at = 0;
    return calls.map((call) => {
      const from = at;
      at += call.length;
      return rows.slice(from, at);
    });
  }

  /** Every call's write in one statement, each written whole or not at all. */
  private async writeAll(calls: readonly { json: string }[]): Promise<(boolean | null)[]> {
    const answer = await this.run(this.statements.write, [`[${calls.map((call) => call.json).join(',')}]`]);
    if (answer.length !== calls.length)
      throw new FloodgateError(ErrorCodes.STORE_REPLY, `PostgreSQL answered ${answer.length} rows for ${calls.length} writes.`);
    return answer.map((row) => (row.written === null ? null : row.written === true || row.written === 't'));
  }

  isConflict = isConflict;

  async sweep(limit: number): Promise<number> {
    return (await this.batches.run(() => this.run(this.statements.sweep, [String(limit)]))).length;
  }

  async list(prefix: string, after: string, count: number): Promise<[string, string][]> {
    await this.created();
    const from = storable(prefix);
    const rows = await this.batches.run(() => this.run(this.statements.list, [from, `${from}\u{10FFFF}`, storable(after), String(count)]));
    return rows.map((row) => [String(row.key), String(row.value)]);
  }

  /** Creates the table on first use (createTable), once per store; a failure is tried again by the next call. */
  private created(): Promise<void> {
    if (!this.createTable) return Promise.resolve();
    this.ready ??= this.run(createSql(this.names, this.unlogged), [], true).then(
      () => undefined,
      (error: unknown) => {
        // A read-only server (a replica, or read-only on purpose) cannot create: reads go on, writes fail as store errors.
        if ((error as { code?: unknown } | null)?.code === '25006') return;
        this.ready = undefined;
        throw error;
      },
    );
    return this.ready;
  }
}

/**
 * Limiter state in PostgreSQL, shared by every process that uses the same
 * database. Every algorithm, all rules and scopes of a call all or nothing,
 * blocks and leases, decided by Floodgate's engine on the database's clock.
 * A denied call or a peek is one statement; an admitted call two (a read,
 * then a write that applies only if no other process changed those rows in
 * between, else read and decide again). One row per key and rule.
 *
 * @example
 * ```ts
 * import pg from 'pg';
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
 * const limiter = createLimiter({ limit: 100, windowMs: 60_000, store: new PostgresStore({ pool }) });
 * ```
 */
export class PostgresStore extends KeyValueStore {
  constructor(options: PostgresStoreOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new FloodgateError(ErrorCodes.OPTION, `PostgresStore takes { pool }, { client } or { query }, got ${describe(options)}.`);
    }
    for (const key of Object.keys(options)) {
      if (!OPTIONS.includes(key)) {
        throw new FloodgateError(ErrorCodes.UNKNOWN_OPTION, `PostgresStore has no option '${key}'; it takes ${OPTIONS.join(', ')}.`);
      }
    }
    const { table = 'floodgate_state', createTable = true, unlogged = false, clock = 'server', prefix = '' } = options;
    if (typeof table !== 'string' || !isTableName(table)) {
      throw new FloodgateError(ErrorCodes.OPTION, `PostgresStore table must be a name or schema.name of letters, digits and _, got ${describe(table)}.`);
    }
    if (typeof createTable !== 'boolean' || typeof unlogged !== 'boolean') {
      throw new FloodgateError(ErrorCodes.OPTION, 'PostgresStore createTable and unlogged must be true or false.');
    }
    super(new VersionedBackend(new PostgresDatabase(options, createTable, unlogged, table)), { clock, prefix });
  }
}
