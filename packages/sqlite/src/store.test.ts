import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createLimiter } from '@floodgate/core';
import { storeContract } from '@floodgate/core/testing';
import { node22 } from '@floodgate/test-support';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { migrationSql, SqliteStore } from './store.js';

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'floodgate-sqlite-'));
const file = join(dir, 'limits.db');
const database = new Database(file, { timeout: 10_000 });
database.pragma('journal_mode = WAL');
// For the processes of the contract's multi-process test (test-support/make-store.ts).
process.env.FLOODGATE_SQLITE_FILE = file;

afterAll(() => {
  database.close();
  rmSync(dir, { recursive: true, force: true });
});

storeContract('SqliteStore (better-sqlite3, one file)', () => new SqliteStore({ database, clock: 'client' }), {
  numRuns: 1000,
  processes: { module: new URL('./test-support/make-store.ts', import.meta.url), execArgv: ['--import', 'tsx', '--conditions', '@floodgate/source'] },
});

describe('SqliteStore', () => {
  it('ships sql/floodgate_state.sql: the schema createTable makes, for the default table', () => {
    // Stale? pnpm --filter @floodgate/sqlite exec tsx -e "import('./src/store.ts').then((s) => process.stdout.write(s.migrationSql('floodgate_state')))" > sql/floodgate_state.sql
    expect(readFileSync(new URL('../sql/floodgate_state.sql', import.meta.url), 'utf8')).toBe(migrationSql('floodgate_state'));
  });

  it('keeps one row per key and rule, and keys of any characters apart (NUL, quotes, JSON, emoji)', async () => {
    const limiter = createLimiter({
      rules: [
        { name: 'a', algorithm: 'fixed-window', limit: 1, windowMs: 60_000 },
        { name: 'b', algorithm: 'concurrency', limit: 1, windowMs: 60_000 },
      ],
      store: new SqliteStore({ database, table: 'keys' }),
    });
    const keys = ['x\u0000y', 'x', "'; DROP TABLE keys; --", '["a"]', '"', '🔥'];
    for (const key of keys) expect((await limiter.consume(key)).allowed, key).toBe(true);
    for (const key of keys) expect((await limiter.consume(key)).allowed, key).toBe(false);
    expect((database.prepare('SELECT count(*) AS n FROM keys').get() as { n: number }).n).toBe(keys.length * 2);
  });

  it('deletes rows whose time is up as new ones come: the table stays bounded over many windows of distinct keys', async () => {
    let now = Date.now();
    const limiter = createLimiter({ algorithm: 'gcra', limit: 5, windowMs: 1_000, store: new SqliteStore({ database, table: 'bounded' }) });
    for (let window = 0; window < 10; window++) {
      await Promise.all(Array.from({ length: 2000 }, (_, i) => limiter.consume(`w${window}:${i}`)));
      // The window's rows end 200 ms after their call (one gcra unit); wait for them to.
      now += 300;
      while (Date.now() < now) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    // 20,000 keys in all; the last window's 2000 and at most one sweep's worth more.
    expect((database.prepare('SELECT count(*) AS n FROM bounded').get() as { n: number }).n).toBeLessThanOrEqual(2000 + 1000);
  });

  it('runs on node:sqlite too (Node 22): the same decisions, one file shared by two connections', async () => {
    const other = join(dir, 'node-sqlite.db');
    const script = fileURLToPath(new URL('./test-support/node-sqlite.ts', import.meta.url));
    const { stdout } = await run(node22(), ['--no-warnings', '--import', 'tsx', script, other], { cwd: fileURLToPath(new URL('..', import.meta.url)) });
    const result = JSON.parse(stdout.trim().split('\n').pop() as string);
    expect(result.version).toMatch(/^v22\./);
    expect(result.allowed).toEqual([true, true, false, false]);
    expect(result.rows).toBe(2);
  });

  it('answers a clear error for a database it cannot use, a bad table name, and unknown options', () => {
    expect(() => new SqliteStore({ database: {} as never })).toThrow(/open better-sqlite3 Database or node:sqlite DatabaseSync/);
    expect(() => new SqliteStore({ database, table: 'x; DROP TABLE y' })).toThrow(/table must be a name/);
    expect(() => new SqliteStore({ database, path: 'x.db' } as never)).toThrow(/no option 'path'/);
  });
});
