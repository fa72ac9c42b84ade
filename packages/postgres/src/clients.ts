/*
 * The one statement runner over whichever client a PostgresStore was given:
 * a pg Pool or Client, a postgres.js sql, or a function that runs a statement.
 *
 * The store's few statements go as named (prepared) statements where the
 * client can name them, so PostgreSQL parses and plans each once per
 * connection, not on every call. That is for speed. Bench target: the SQL
 * section's "PostgresStore vs RateLimiterPostgres" rows (issue #28). Measured
 * on one connection (bench's PostgreSQL 15, 2,000 statements): the read took
 * 240–290 µs of the server's CPU unnamed and 80–95 µs named; the write 250–295
 * µs and 225–255 µs. postgres.js sends an unnamed statement with parameters
 * in two round trips (a describe first), a named one in one.
 *
 * Behind a pooler that does not keep prepared statements apart per client
 * (PgBouncer in transaction mode before 1.21, or without
 * max_prepared_statements), a named statement meets a server connection that
 * lacks it, or has it already (SQLSTATE 26000, 42P05): nothing ran, so the
 * store runs it again unnamed, and every statement after it. postgres.js
 * follows its own `prepare` option (`postgres(url, { prepare: false })`) and
 * retries on its own.
 */
import { ErrorCodes, FloodgateError } from '@floodgate/core';

/** A row as drivers hand it over. */
export type PostgresRow = Record<string, unknown>;

/** node-postgres: a `Pool` (or a `Client`). */
export interface PgPoolLike {
  query(config: { name?: string; text: string; values: string[] }): Promise<{ rows: PostgresRow[] }>;
}

/** postgres.js: the `sql` function `postgres()` returns. */
export interface PostgresJsLike {
  unsafe(text: string, values: string[], options?: { prepare?: boolean }): PromiseLike<readonly PostgresRow[]>;
}

/** One parameterized statement, its rows back: what Drizzle, Kysely, Prisma (`$queryRawUnsafe`) or a serverless driver can run. */
export type QueryFunction = (text: string, params: string[]) => Promise<readonly PostgresRow[] | { rows: readonly PostgresRow[] }>;

/** The clients PostgresStore takes, as its options name them. */
export interface Clients {
  pool?: PgPoolLike;
  client?: PostgresJsLike | PgPoolLike;
  query?: QueryFunction;
}

/**
 * Runs one of the store's statements (a few texts, fixed per store; every parameter text, JSON where
 * it is a list: drivers bind text alike). `once`: a statement run once (the DDL), never named.
 */
export type Runner = (text: string, params: string[], once?: boolean) => Promise<readonly PostgresRow[]>;

const describe = (value: unknown): string => (typeof value === 'string' ? `'${value}'` : value === null ? 'null' : typeof value);

/** SQLSTATEs of a named statement the server connection lacks, or has already: a pooler between that does not keep them. */
const isLostStatement = (error: unknown): boolean => {
  const code = (error as { code?: unknown } | null)?.code;
  return code === '26000' || code === '42P05';
};

/** A statement's name: its text's FNV-1a hash, so one text has one name in every process, and two stores' texts (two tables) two. */
function nameOf(text: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193);
  return `floodgate_${(hash >>> 0).toString(36)}_${text.length}`;
}

/** A pg Pool or Client: named statements, unnamed from the first one a pooler lost on. */
function pgRunner(pool: PgPoolLike): Runner {
  const names = new Map<string, string>();
  let named = true;
  return async (text, values, once) => {
    if (!named || once) return (await pool.query({ text, values })).rows;
    let name = names.get(text);
    if (name === undefined) {
      name = nameOf(text);
      names.set(text, name);
    }
    try {
      return (await pool.query({ name, text, values })).rows;
    } catch (error) {
      if (!isLostStatement(error)) throw error;
      named = false;
      return (await pool.query({ text, values })).rows;
    }
  };
}

/** The runner over whichever client was given. */
export function runnerOf(clients: Clients): Runner {
  const given = [clients.pool, clients.client, clients.query].filter((c) => c !== undefined);
  if (given.length !== 1) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `PostgresStore takes one of pool (a pg Pool), client (a postgres.js sql) or query (a function that runs a statement), got ${given.length === 0 ? 'none' : 'several'}.`,
    );
  }
  const client = given[0] as unknown;
  if (typeof (client as PostgresJsLike).unsafe === 'function') {
    const sql = client as PostgresJsLike;
    const named = { prepare: true };
    const unnamed = { prepare: false };
    return async (text, params, once) => [...(await sql.unsafe(text, params, once ? unnamed : named))];
  }
  if (typeof (client as PgPoolLike).query === 'function') return pgRunner(client as PgPoolLike);
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
