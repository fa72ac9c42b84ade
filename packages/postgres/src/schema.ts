/*
 * The table PostgresStore keeps its states in, and the function that writes
 * them. One row per key and rule: the state's text in the engine's encoding
 * (@floodgate/core/store), a version (a random number each write draws), and
 * when the row may be deleted (ms since the epoch, on the database's clock).
 *
 * A call reads its rows in one statement, without locking, and writes in a
 * second one, through the function below, only if every row still holds the
 * version it read; if one does not, nothing of that call is written and the
 * store reads again and decides again. So a denied call or a peek is one
 * statement, an admitted call two, and no lock is held between them (row
 * locks on the calls' keys for the length of one statement; never a table
 * lock). The reads, and the writes, of calls that wait for a connection go
 * together (batches.ts): the function writes each call of a batch whole or
 * not at all, on its own. It is plain PL/pgSQL, no algorithm in it:
 * Floodgate's engine decides, in the app.
 *
 * sql/floodgate_state.sql is this schema for the default table name, for
 * teams whose migrations create it (createTable: false); a test checks the
 * two agree.
 */

/** A table name as the options take it: a name, or schema.name; letters, digits and _, as unquoted SQL identifiers are. */
const TABLE_NAME = /^(?:[A-Za-z_][A-Za-z0-9_]{0,62}\.)?[A-Za-z_][A-Za-z0-9_]{0,62}$/;

export const isTableName = (name: string): boolean => TABLE_NAME.test(name);

/**
 * The identifiers of a table's objects, quoted: the table, its index, its write function. The
 * function's name carries its version (`_write2`, which writes several calls): a build that writes
 * differently creates a function of its own beside it, and instances of both builds run side by
 * side during a deploy. `_write1` (one call; builds before it) is left where it is: those builds
 * create it themselves (createTable), or the migration that made their table did, and nothing
 * drops it.
 */
export interface Names {
  readonly table: string;
  readonly index: string;
  readonly write: string;
  /** What the advisory lock of createTable is taken on. */
  readonly lock: string;
}

const quote = (identifier: string): string => `"${identifier}"`;

export function namesOf(table: string): Names {
  const dot = table.indexOf('.');
  const schema = dot < 0 ? '' : `${quote(table.slice(0, dot))}.`;
  const name = dot < 0 ? table : table.slice(dot + 1);
  return { table: schema + quote(name), index: quote(`${name}_expires_at`), write: `${schema}${quote(`${name}_write2`)}`, lock: `floodgate:${table}` };
}

/** The database's clock in ms, as a double (exact: ms since the epoch stay far below 2^53). */
const NOW_MS = 'floor(extract(epoch from clock_timestamp()) * 1000)';

/** The DDL: the table, its index on expiry, and its write function. Idempotent. */
export function schemaSql(names: Names, unlogged: boolean): string {
  return `CREATE ${unlogged ? 'UNLOGGED ' : ''}TABLE IF NOT EXISTS ${names.table} (
  key text COLLATE "C" PRIMARY KEY,
  value text NOT NULL,
  version bigint NOT NULL,
  expires_at bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS ${names.index} ON ${names.table} (expires_at);
-- calls: a JSON array of calls, each a JSON array of its rows to write: [key, version read (0: no row), new value
-- (null: delete), ms to keep it, new version]. Each call is written whole if every row of it still holds the
-- version read (and no call before it in the array writes that row), else not at all; the answer, a row per call
-- in order: whether it was written, or null where another transaction holds a row of it (not tried, not waited for).
CREATE OR REPLACE FUNCTION ${names.write}(calls text) RETURNS TABLE (written boolean) LANGUAGE plpgsql AS $fg$
-- A table may have any name, that of a variable below too (a whole-row reference): the names below are the variables.
#variable_conflict use_variable
DECLARE
  now_ms bigint := ${NOW_MS};
  batch jsonb := calls::jsonb;
  held boolean[] := '{}';
  claimed text[] := '{}';
  locked text[];
  one jsonb;
  w jsonb;
  ok boolean;
  n integer;
BEGIN
  IF jsonb_array_length(batch) = 1 THEN
    -- One call: written as it goes; a row that changed undoes it (below). The cheaper way when nothing waits.
    held := '{true}';
  ELSE
    -- The rows the calls write, locked in key order (two statements never wait for each other in a circle), but
    -- those another transaction holds: a call with one of those is not tried (null), the store sends it alone.
    locked := ARRAY(SELECT key FROM ${names.table}
      WHERE key = ANY (ARRAY(SELECT r->>0 FROM jsonb_array_elements(batch) b(rows), jsonb_array_elements(b.rows) r))
      ORDER BY key FOR UPDATE SKIP LOCKED);
    FOR one IN SELECT * FROM jsonb_array_elements(batch) LOOP
      SELECT CASE WHEN bool_or(s.version IS NOT NULL AND r->>0 <> ALL (locked)) THEN NULL
        ELSE bool_and(COALESCE(s.version, 0) = (r->>1)::bigint AND r->>0 <> ALL (claimed)) END INTO ok
        FROM jsonb_array_elements(one) r LEFT JOIN LATERAL (SELECT version FROM ${names.table} WHERE key = r->>0 LIMIT 1) s ON true;
      held := held || ok;
      IF ok THEN
        claimed := claimed || ARRAY(SELECT r->>0 FROM jsonb_array_elements(one) r);
      END IF;
    END LOOP;
  END IF;
  FOR w IN SELECT r FROM jsonb_array_elements(batch) WITH ORDINALITY b(rows, i), jsonb_array_elements(b.rows) r
      WHERE held[b.i] ORDER BY (r->>0) COLLATE "C" LOOP
    IF (w->>1)::bigint = 0 THEN
      CONTINUE WHEN w->2 = 'null'::jsonb;
      INSERT INTO ${names.table} (key, value, version, expires_at)
        VALUES (w->>0, w->>2, (w->>4)::bigint, now_ms + (w->>3)::bigint)
        ON CONFLICT (key) DO NOTHING;
    ELSIF w->2 = 'null'::jsonb THEN
      DELETE FROM ${names.table} WHERE key = w->>0 AND version = (w->>1)::bigint;
    ELSE
      UPDATE ${names.table} SET value = w->>2, version = (w->>4)::bigint, expires_at = now_ms + (w->>3)::bigint
        WHERE key = w->>0 AND version = (w->>1)::bigint;
    END IF;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n = 0 THEN
      -- One call whose row changed, or in a batch a row another writer made since the check (where a call read
      -- none): all undone, every call of the statement reads again.
      RAISE EXCEPTION USING ERRCODE = '40001', MESSAGE = 'floodgate: a state changed since it was read';
    END IF;
  END LOOP;
  RETURN QUERY SELECT unnest(held);
END
$fg$;
`;
}

/**
 * createTable's statement: the DDL in one DO block under a transaction-scoped
 * advisory lock, so that instances starting together do not race on it.
 */
export function createSql(names: Names, unlogged: boolean): string {
  return `DO $create$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext(${literal(names.lock)}));
  EXECUTE ${literal(schemaSql(names, unlogged))};
END
$create$`;
}

/** A SQL string literal (standard_conforming_strings: only quotes are doubled). */
const literal = (text: string): string => `'${text.replaceAll("'", "''")}'`;

/**
 * Reads the rows of a call's keys, in the keys' order, with the database's clock. $1: the keys as a JSON array.
 * One index lookup per key, whatever the table holds: a plain join lets the planner, which takes a JSON array
 * for 100 keys, hash the whole table instead (a scan per call, ~0.9 ms at 4,000 rows); LIMIT 1 keeps the
 * lookup a subquery of its own.
 */
export const readSql = (names: Names): string =>
  `SELECT s.value, s.version::float8 AS version, s.expires_at::float8 AS expires_at, ${NOW_MS}::float8 AS now
FROM jsonb_array_elements_text($1::text::jsonb) WITH ORDINALITY AS k(key, i)
LEFT JOIN LATERAL (SELECT value, version, expires_at FROM ${names.table} WHERE key = k.key LIMIT 1) s ON true
ORDER BY k.i`;

/** Writes the states of calls, each whole or not at all; a row per call: whether it was written. $1: the calls as JSON (see the function). */
export const writeSql = (names: Names): string => `SELECT written FROM ${names.write}($1)`;

/** Deletes up to `limit` rows whose time is up, skipping rows other statements hold; returns a row per row deleted. $1: the limit. */
export const sweepSql = (names: Names): string =>
  `DELETE FROM ${names.table} WHERE key IN (
  SELECT key FROM ${names.table} WHERE expires_at < ${NOW_MS} ORDER BY expires_at LIMIT $1::integer FOR UPDATE SKIP LOCKED
) RETURNING 1 AS deleted`;

/**
 * A page of live rows whose keys start with a prefix, in key order (COLLATE "C": code points). $1: the
 * prefix, $2: the prefix with U+10FFFF after it (above every key that starts with it), $3: the key to
 * list after, $4: the count.
 */
export const listSql = (names: Names): string =>
  `SELECT key, value FROM ${names.table} WHERE key >= $1 AND key < $2 AND key > $3 AND expires_at > ${NOW_MS} ORDER BY key LIMIT $4::integer`;

/** sql/floodgate_state.sql: the DDL as a migration file. */
export const migrationSql = (table: string): string =>
  `-- Floodgate's PostgresStore: its table and write function (createTable: false).\n${schemaSql(namesOf(table), false)}`;
