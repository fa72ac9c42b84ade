import { readFileSync } from 'node:fs';
import { createLimiter } from '@floodgate/core';
import { storeContract } from '@floodgate/core/testing';
import { useMySql } from '@floodgate/test-support';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrationSql } from './schema.js';
import { MySqlStore } from './store.js';

const database = useMySql();
let pool: mysql.Pool;

beforeAll(() => {
  // For the processes of the contract's multi-process test (test-support/make-store.ts).
  process.env.FLOODGATE_MYSQL_URL = database.url;
  pool = mysql.createPool({ uri: database.url, connectionLimit: 8 });
});
afterAll(async () => {
  await pool?.end();
});

storeContract('MySqlStore (mysql2 pool)', () => new MySqlStore({ pool, clock: 'client' }), {
  processes: { module: new URL('./test-support/make-store.ts', import.meta.url), execArgv: ['--import', 'tsx', '--conditions', '@floodgate/source'] },
});

describe('MySqlStore', () => {
  it('ships sql/floodgate_state.sql: the schema createTable makes, for the default table', () => {
    // Stale? pnpm --filter @floodgate/mysql exec tsx -e "import('./src/schema.ts').then((s) => process.stdout.write(s.migrationSql('floodgate_state')))" > sql/floodgate_state.sql
    expect(readFileSync(new URL('../sql/floodgate_state.sql', import.meta.url), 'utf8')).toBe(migrationSql('floodgate_state'));
  });

  it("decides on the database's clock: limiters with wildly wrong clocks share one limit", async () => {
    const store = new MySqlStore({ pool, table: 'server_clock' });
    const limiters = [0, 1_000_000_000_000, 4_000_000_000_000].map((at) =>
      createLimiter({ algorithm: 'fixed-window', limit: 3, windowMs: 60_000, store, prefix: 'shared:', now: () => at, onStoreError: 'deny' }),
    );
    const allowed = [];
    for (const limiter of [...limiters, ...limiters]) allowed.push((await limiter.consume('k')).allowed);
    expect(allowed).toEqual([true, true, true, false, false, false]);
  });

  it('keeps one row per key and rule, and keys of any characters apart (case, NUL, quotes, emoji)', async () => {
    const limiter = createLimiter({
      rules: [
        { name: 'a', algorithm: 'fixed-window', limit: 1, windowMs: 60_000 },
        { name: 'b', algorithm: 'sliding-log', limit: 1, windowMs: 60_000 },
      ],
      store: new MySqlStore({ pool, table: 'keys_apart' }),
    });
    const keys = ['A', 'a', 'x\u0000y', 'x', "'; DROP TABLE x; --", '"', '\u00e9', 'e\u0301', '🔥'];
    for (const key of keys) expect((await limiter.consume(key)).allowed, key).toBe(true);
    for (const key of keys) expect((await limiter.consume(key)).allowed, key).toBe(false);
    const [rows] = (await pool.query('SELECT COUNT(*) AS n FROM keys_apart')) as [{ n: number }[], unknown];
    expect(Number(rows[0]?.n)).toBe(keys.length * 2);
  });

  it('makes one statement of a denied call or a peek, and two of an admitted call', async () => {
    const statements: string[] = [];
    const counted = new Proxy(pool, {
      get(target, name) {
        if (name !== 'query') return Reflect.get(target, name);
        return (sql: string, values: unknown[]) => {
          statements.push(sql.trimStart().slice(0, 6));
          return target.query(sql, values);
        };
      },
    });
    const limiter = createLimiter({
      algorithm: 'gcra',
      limit: 1,
      windowMs: 60_000,
      store: new MySqlStore({ pool: counted, table: 'trips' }),
      prefix: 'trips:',
    });
    await limiter.peek('warm'); // creates the table on first use: not counted below
    statements.length = 0;
    await limiter.consume('k');
    expect(statements).toEqual(['SELECT', 'CALL `']);
    statements.length = 0;
    await limiter.consume('k');
    await limiter.peek('k');
    expect(statements).toEqual(['SELECT', 'SELECT']);
  });

  it('answers a clear error for a pool it cannot use, a bad table name, and unknown options', () => {
    expect(() => new MySqlStore({ pool: {} as never })).toThrow(/mysql2 promise pool/);
    expect(() => new MySqlStore({ pool, table: 'x; DROP TABLE y' })).toThrow(/table must be a name/);
    expect(() => new MySqlStore({ pool, tableName: 'x' } as never)).toThrow(/no option 'tableName'/);
  });
});
