import { ErrorCodes, FloodgateError } from '@floodgate/core';
import { type KeyValueBackend, KeyValueStore, type StateChange } from '@floodgate/core/store';
import { createSql, isTableName, type Names, namesOf, readSql, sweepSql, writeSql } from './schema.js';

/** A row as drivers hand it over. */
export type PostgresRow = Record<string, unknown>;

/** node-postgres: a `Pool` (or a `Client`). */
export interface PgPoolLike {
  query(text: string, values: string[]): Promise<{ rows: PostgresRow[] }>;
}

/** postgres.js: the `sql` function `postgres()` returns. */
export interface PostgresJsLike {
  unsafe(text: string, values: string[]): PromiseLike<readonly PostgresRow[]>;
}

/** One parameterized statement, its rows back: what Drizzle, Kysely, Prisma (`$queryRawUnsafe`) or a serverless driver can run. */
export type QueryFunction = (text: string, params: string[]) => Promise<readonly PostgresRow[] | { rows: readonly PostgresRow[] }>;

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

/** How many times a call reads and decides again when its rows changed under it, before it fails as a store error. */
const MAX_ATTEMPTS = 50;
/** Rows the store deletes once their time is up, per that many rows it wrote: expired rows never outgrow what was written. */
const SWEEP_EVERY = 1000;

const describe = (value: unknown): string => (typeof value === 'string' ? `'${value}'` : value === null ? 'null' : typeof value);

/** The one statement runner over whichever client was given. */
/** Every parameter is text (JSON where it is a list): drivers bind text alike. */
function runnerOf(options: PostgresStoreOptions): (text: string, params: string[]) => Promise<readonly PostgresRow[]> {
  const given = [options.pool, options.client, options.query].filter((c) => c !== undefined);
  if (given.length !== 1) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `PostgresStore takes one of pool (a pg Pool), client (a postgres.js sql) or query (a function that runs a statement), got ${given.length === 0 ? 'none' : 'several'}.`,
    );
  }
  const client = given[0] as unknown;
  if (typeof (client as PostgresJsLike).unsafe === 'function') {
    const sql = client as PostgresJsLike;
    return async (text, params) => [...(await sql.unsafe(text, params))];
  }
  if (typeof (client as PgPoolLike).query === 'function') {
    const pool = client as PgPoolLike;
    return async (text, params) => (await pool.query(text, params)).rows;
  }
  if (typeof client === 'function') {
    const query = client as QueryFunction;
    return async (text, params) => {
      const result = await query(text, params);
      return Array.isArray(result) ? result : (result as { rows: readonly PostgresRow[] }).rows;
    };
  }
  throw new FloodgateError(
    ErrorCodes.OPTION,
    `PostgresStore pool/client must be a pg Pool or a postgres.js sql, and query a function, got ${describe(client)}.`,
  );
}

/** PostgreSQL text holds no NUL: a key's NUL is stored as %00 (a key's own % is %25 already, so the two never meet). */
const storable = (key: string): string => (key.includes('\u0000') ? key.replaceAll('\u0000', '%00') : key);

/** A fresh version for a row: a random integer from 1 to 2^53 - 1. */
function newVersion(): number {
  const [high, low] = crypto.getRandomValues(new Uint32Array(2)) as unknown as [number, number];
  return (high & 0x1fffff) * 2 ** 32 + low || 1;
}

const isConflict = (error: unknown): boolean => {
  const code = (error as { code?: unknown } | null)?.code;
  return code === '40001' || code === '40P01';
};

/** What one row read tells: its value (null when missing or its time is up), and the version a write must find. */
interface Read {
  values: (string | null)[];
  versions: number[];
  now: number;
}

class PostgresBackend implements KeyValueBackend {
  private readonly run: (text: string, params: string[]) => Promise<readonly PostgresRow[]>;
  private readonly names: Names;
  private readonly statements: { read: string; write: string; sweep: string };
  private ready: Promise<void> | undefined;
  private written = 0;
  private sweeping = false;

  constructor(
    options: PostgresStoreOptions,
    private readonly createTable: boolean,
    private readonly unlogged: boolean,
    table: string,
  ) {
    this.run = runnerOf(options);
    this.names = namesOf(table);
    this.statements = { read: readSql(this.names), write: writeSql(this.names), sweep: sweepSql(this.names) };
  }

  async transact<T>(keys: readonly string[], decide: (values: readonly (string | null)[], now: number) => StateChange<T>): Promise<T> {
    await this.created();
    const stored = keys.map(storable);
    for (let attempt = 1; ; attempt++) {
      const read = await this.read(stored);
      const { writes, result } = decide(read.values, read.now);
      if (writes.length === 0) return result;
      const byKey = new Map(stored.map((key, i) => [key, i]));
      const rows = writes
        .map(({ key, value, ttlMs }) => {
          const at = byKey.get(storable(key)) as number;
          return [stored[at] as string, read.versions[at] as number, value, ttlMs, newVersion()] as const;
        })
        // Rows in one order for every statement: two calls over the same keys never wait for each other in a circle.
        .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
      try {
        await this.run(this.statements.write, [JSON.stringify(rows)]);
      } catch (error) {
        if (!isConflict(error) || attempt >= MAX_ATTEMPTS) throw error;
        // Another process wrote one of these rows since the read: read again, decide again.
        if (attempt > 3) await new Promise((resolve) => setTimeout(resolve, Math.random() * attempt));
        continue;
      }
      this.wrote(rows.length);
      return result;
    }
  }

  private async read(keys: readonly string[]): Promise<Read> {
    const rows = await this.run(this.statements.read, [JSON.stringify(keys)]);
    if (rows.length !== keys.length) throw new FloodgateError(ErrorCodes.STORE_REPLY, `PostgreSQL answered ${rows.length} rows for ${keys.length} keys.`);
    const now = Number(rows[0]?.now);
    const read: Read = { values: [], versions: [], now };
    for (const row of rows) {
      const version = row.version === null ? 0 : Number(row.version);
      const alive = row.value !== null && Number(row.expires_at) > now;
      read.values.push(alive ? String(row.value) : null);
      read.versions.push(version);
    }
    return read;
  }

  /**
   * Counts rows written; after every SWEEP_EVERY, deletes rows whose time is up in the background,
   * SWEEP_EVERY at a time while there are that many: the table never holds more ended rows than
   * were written since the last sweep, and a backlog drains at once.
   */
  private wrote(rows: number): void {
    this.written += rows;
    if (this.written < SWEEP_EVERY || this.sweeping) return;
    this.written = 0;
    this.sweeping = true;
    const sweep = async (): Promise<void> => {
      while ((await this.run(this.statements.sweep, [String(SWEEP_EVERY)])).length >= SWEEP_EVERY);
    };
    sweep()
      .catch(() => {
        // The next sweep tries again; a failing database shows in the calls themselves.
      })
      .finally(() => {
        this.sweeping = false;
      });
  }

  /** Creates the table on first use (createTable), once per store; a failure is tried again by the next call. */
  private created(): Promise<void> {
    if (!this.createTable) return Promise.resolve();
    this.ready ??= this.run(createSql(this.names, this.unlogged), []).then(
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
    super(new PostgresBackend(options, createTable, unlogged, table), { clock, prefix });
  }
}
