import { readFileSync } from 'node:fs';
import { createLimiter } from '@floodgate/core';
import { storeContract } from '@floodgate/core/testing';
import { usePostgres } from '@floodgate/test-support';
import pg from 'pg';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrationSql, namesOf, writeSql } from './schema.js';
import { type PgPoolLike, type PostgresJsLike, PostgresStore } from './store.js';

const database = usePostgres();
let pool: pg.Pool;
let sql: postgres.Sql;

beforeAll(() => {
  // For the processes of the contract's multi-process test (test-support/make-store.ts).
  process.env.FLOODGATE_PG_URL = database.url;
  process.env.FLOODGATE_PG_TABLE = `${database.schema}.floodgate_state`;
  pool = new pg.Pool({ connectionString: database.url, max: 8 });
  sql = postgres(database.url, { max: 8, onnotice: () => {} });
});
afterAll(async () => {
  await pool?.end();
  await sql?.end();
});

const table = (name = 'floodgate_state') => `${database.schema}.${name}`;

// Over a pg Pool: the whole conformance suite, and 4 processes sharing one table.
storeContract('PostgresStore (pg Pool)', () => new PostgresStore({ pool, table: table(), clock: 'client' }), {
  processes: { module: new URL('./test-support/make-store.ts', import.meta.url), execArgv: ['--import', 'tsx', '--conditions', '@floodgate/source'] },
});
// Over postgres.js, and over a bare query function (what Drizzle, Kysely or Prisma users pass).
storeContract('PostgresStore (postgres.js)', () => new PostgresStore({ client: sql, table: table(), clock: 'client' }), { numRuns: 100 });
storeContract(
  'PostgresStore (query function)',
  () => new PostgresStore({ query: async (text, params) => (await pool.query(text, params)).rows, table: table(), clock: 'client' }),
  { numRuns: 100 },
);

describe('PostgresStore', () => {
  it('ships sql/floodgate_state.sql: the schema createTable makes, for the default table', () => {
    // Stale? pnpm --filter @floodgate/postgres exec tsx -e "import('./src/schema.ts').then((s) => process.stdout.write(s.migrationSql('floodgate_state')))" > sql/floodgate_state.sql
    expect(readFileSync(new URL('../sql/floodgate_state.sql', import.meta.url), 'utf8')).toBe(migrationSql('floodgate_state'));
  });

  it("decides on the database's clock: limiters with wildly wrong clocks share one limit", async () => {
    const store = new PostgresStore({ pool, table: table('server_clock') });
    const limiters = [0, 1_000_000_000_000, 4_000_000_000_000].map((at) =>
      createLimiter({ algorithm: 'fixed-window', limit: 3, windowMs: 60_000, store, prefix: 'shared:', now: () => at, onStoreError: 'deny' }),
    );
    const allowed = [];
    for (const limiter of [...limiters, ...limiters]) allowed.push((await limiter.consume('k')).allowed);
    expect(allowed).toEqual([true, true, true, false, false, false]);
  });

  it('makes one statement of a denied call or a peek, and two of an admitted call', async () => {
    const statements: string[] = [];
    const counted = new PostgresStore({
      query: async (text, params) => {
        statements.push(text.trimStart().slice(0, 6));
        return (await pool.query(text, params)).rows;
      },
      table: table(),
    });
    const limiter = createLimiter({ algorithm: 'gcra', limit: 1, windowMs: 60_000, store: counted, prefix: 'trips:' });
    await limiter.peek('warm'); // creates the table on first use: not counted below
    statements.length = 0;
    await limiter.consume('k');
    expect(statements).toEqual(['SELECT', 'SELECT']);
    statements.length = 0;
    await limiter.consume('k');
    expect(statements).toEqual(['SELECT']);
    statements.length = 0;
    await limiter.peek('k');
    expect(statements).toEqual(['SELECT']);
  });

  it('prepares its statements on a pg Pool and through postgres.js: the same name for the same statement, never for the DDL', async () => {
    const names: (string | undefined)[] = [];
    const spied: PgPoolLike = {
      query: (config) => {
        names.push(config.name);
        return pool.query(config);
      },
    };
    const prepared: (boolean | undefined)[] = [];
    const spiedSql: PostgresJsLike = {
      unsafe: (text, values, options) => {
        prepared.push(options?.prepare);
        return sql.unsafe(text, values, options);
      },
    };
    for (const [client, store] of Object.entries({
      pg: new PostgresStore({ pool: spied, table: table('named') }),
      js: new PostgresStore({ client: spiedSql, table: table('named') }),
    })) {
      const limiter = createLimiter({ limit: 5, windowMs: 60_000, store, prefix: `named-${client}:`, onStoreError: 'deny' });
      expect((await limiter.consume('k')).remaining).toBe(4);
      expect((await limiter.consume('k')).remaining).toBe(3);
      expect((await limiter.peek('k')).remaining).toBe(3);
    }
    // The DDL first, then read, write, read, write, read.
    expect(names[0]).toBeUndefined();
    expect(names.slice(1)).toHaveLength(5);
    expect(new Set(names.slice(1)).size).toBe(2);
    for (const name of names.slice(1)) expect(name).toMatch(/^floodgate_\w+$/);
    expect(prepared).toEqual([false, true, true, true, true, true]);
  });

  it('goes on unnamed when the server lost its prepared statements (a pooler that does not keep them, as PgBouncer before 1.21)', async () => {
    const single = new pg.Pool({ connectionString: database.url, max: 1 });
    try {
      const names: (string | undefined)[] = [];
      const spied: PgPoolLike = {
        query: (config) => {
          names.push(config.name);
          return single.query(config);
        },
      };
      const limiter = createLimiter({ limit: 10, windowMs: 60_000, store: new PostgresStore({ pool: spied, table: table('lost') }), onStoreError: 'deny' });
      const errors: Error[] = [];
      limiter.on('error', ({ error }) => errors.push(error));
      expect((await limiter.consume('k')).remaining).toBe(9);
      // The server forgets them; pg's client still counts on them, as when a pooler moves it to another server connection.
      await single.query('DEALLOCATE ALL');
      names.length = 0;
      expect(await limiter.consume('k')).toMatchObject({ allowed: true, remaining: 8 });
      expect(await limiter.consume('k')).toMatchObject({ allowed: true, remaining: 7 });
      expect(errors).toEqual([]);
      // The statement that failed, the same one unnamed, and every one after it unnamed.
      expect(names[0]).toMatch(/^floodgate_/);
      expect(names.slice(1)).toEqual(names.slice(1).map(() => undefined));
    } finally {
      await single.end();
    }
  });

  it('reads and writes the calls that wait for a busy pool together, each decided on its own rows', async () => {
    const two = new pg.Pool({ connectionString: database.url, max: 2 });
    try {
      const statements: string[] = [];
      const spied = {
        options: two.options,
        query: (config: { name?: string; text: string; values: string[] }) => {
          statements.push(config.text.includes('LATERAL') ? 'read' : config.text.includes('written') ? 'write' : 'other');
          return two.query(config);
        },
      };
      const limiter = createLimiter({ limit: 2, windowMs: 60_000, store: new PostgresStore({ pool: spied, table: table('together') }), onStoreError: 'deny' });
      await limiter.peek('warm');
      statements.length = 0;
      const keys = Array.from({ length: 40 }, (_, i) => `k${i}`);
      for (const remaining of [1, 0]) {
        const decisions = await Promise.all(keys.map((key) => limiter.consume(key)));
        expect(decisions.map((decision) => [decision.allowed, decision.remaining])).toEqual(keys.map(() => [true, remaining]));
      }
      expect((await Promise.all(keys.map((key) => limiter.consume(key)))).some((decision) => decision.allowed)).toBe(false);
      // 120 calls, 40 keys at a time: far fewer statements than calls.
      expect(statements.filter((statement) => statement === 'read').length).toBeLessThan(30);
      expect(statements.filter((statement) => statement === 'write').length).toBeLessThan(20);
    } finally {
      await two.end();
    }
  });

  it('writes each call of a batch whole or not at all, on its own: a call whose row changed, or that a call before it writes, is left out', async () => {
    const name = table('batch'); // also the name of a variable of the function: a table may have it
    await createLimiter({ limit: 1, windowMs: 60_000, store: new PostgresStore({ pool, table: name }) }).peek('create');
    await pool.query(`INSERT INTO ${name} VALUES ('a', 'A', 7, 9e15), ('b', 'B', 8, 9e15)`);
    const write = (calls: unknown[]) => pool.query(writeSql(namesOf(name)), [JSON.stringify(calls)]);
    const { rows } = await write([
      [['a', 7, 'A2', 60_000, 70]], // holds
      [['b', 9, 'B2', 60_000, 80]], // b is at 8, not 9
      [
        ['c', 0, 'C', 60_000, 90],
        ['a', 7, 'A3', 60_000, 71],
      ], // a: written by the first call
      [
        ['d', 0, 'D', 60_000, 100],
        ['b', 8, null, 0, 0],
      ], // holds: makes d, deletes b
    ]);
    expect(rows.map((row) => row.written)).toEqual([true, false, false, true]);
    const after = await pool.query(`SELECT key, value, version::int FROM ${name} WHERE key <> 'create' ORDER BY key`);
    expect(after.rows).toEqual([
      { key: 'a', value: 'A2', version: 70 },
      { key: 'd', value: 'D', version: 100 },
    ]);
    // One call alone whose row changed: an error isConflict knows (SQLSTATE 40001), nothing written.
    await expect(write([[['d', 99, 'D2', 60_000, 101]]])).rejects.toMatchObject({ code: '40001' });
    // A row another transaction holds: that call is not tried (null) and the others do not wait for it.
    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM ${name} WHERE key = 'a' FOR UPDATE`);
      const held = await write([[['a', 70, 'A4', 60_000, 72]], [['d', 100, 'D3', 60_000, 102]]]);
      expect(held.rows.map((row) => row.written)).toEqual([null, true]);
    } finally {
      await holder.query('COMMIT');
      holder.release();
    }
    expect((await pool.query(`SELECT value FROM ${name} WHERE key IN ('a', 'd') ORDER BY key`)).rows).toEqual([{ value: 'A2' }, { value: 'D3' }]);
  });

  it('keeps one row per key and rule, and keys of any characters apart (NUL, quotes, braces, emoji)', async () => {
    const store = new PostgresStore({ pool, table: table('keys') });
    const limiter = createLimiter({
      rules: [
        { name: 'a', algorithm: 'fixed-window', limit: 1, windowMs: 60_000 },
        { name: 'b', algorithm: 'sliding-log', limit: 1, windowMs: 60_000 },
      ],
      store,
    });
    const keys = ['x\u0000y', 'x%00y', "'; DROP TABLE x; --", '{}', '🔥', 'x'];
    for (const key of keys) expect((await limiter.consume(key)).allowed, key).toBe(true);
    for (const key of keys) expect((await limiter.consume(key)).allowed, key).toBe(false);
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM ${table('keys')}`);
    expect(rows[0].n).toBe(keys.length * 2);
  });

  it('creates the table UNLOGGED when asked, and not at all with createTable: false (a clear store error until it exists)', async () => {
    const unlogged = createLimiter({ limit: 1, windowMs: 60_000, store: new PostgresStore({ pool, table: table('unlogged'), unlogged: true }) });
    await unlogged.consume('k');
    const { rows } = await pool.query(`SELECT relpersistence FROM pg_class WHERE oid = $1::regclass`, [table('unlogged')]);
    expect(rows[0].relpersistence).toBe('u');
    const errors: Error[] = [];
    const missing = createLimiter({
      limit: 1,
      windowMs: 60_000,
      store: new PostgresStore({ pool, table: table('missing'), createTable: false }),
      onStoreError: 'deny',
    });
    missing.on('error', ({ error }) => errors.push(error));
    expect((await missing.consume('k')).allowed).toBe(false);
    expect(errors[0]?.message).toMatch(/does not exist/);
  });

  it('answers a clear error for a bad table name, no client or several, and unknown options', () => {
    expect(() => new PostgresStore({ pool, table: 'x; DROP TABLE y' })).toThrow(/table must be a name or schema.name/);
    expect(() => new PostgresStore({ table: 'x' })).toThrow(/one of pool .* got none/);
    expect(() => new PostgresStore({ pool, client: sql })).toThrow(/got several/);
    expect(() => new PostgresStore({ pool, tableName: 'x' } as never)).toThrow(/no option 'tableName'/);
  });
});
