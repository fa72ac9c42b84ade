/*
 * PostgresStore when the database fails: every fault is a store error within
 * timeoutMs, decided by onStoreError, never a hung call; and the store works
 * again once the database does, without a restart of the app. The server
 * killed or frozen is a private one, started for this file.
 */
import { createLimiter, type Decision, type Limiter } from '@floodgate/core';
import { type PostgresServer, startPostgres, usePostgres } from '@floodgate/test-support';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostgresStore } from './store.js';

const timeoutMs = 300;

/** A limiter that denies on a store error and records each one. */
function watched(store: PostgresStore, prefix: string): { limiter: Limiter; errors: Error[] } {
  const errors: Error[] = [];
  const limiter = createLimiter({ algorithm: 'sliding-window', limit: 1000, windowMs: 60_000, store, prefix, timeoutMs, onStoreError: 'deny' });
  limiter.on('error', ({ error }) => errors.push(error));
  return { limiter, errors };
}

/** Runs `calls` and says how long the slowest took. */
async function timed(calls: Promise<Decision>[]): Promise<{ decisions: Decision[]; slowestMs: number }> {
  const started = performance.now();
  const decisions = await Promise.all(calls.map((call) => call.then((d) => [d, performance.now() - started] as const)));
  return { decisions: decisions.map(([d]) => d), slowestMs: Math.max(...decisions.map(([, ms]) => ms)) };
}

async function recovered(limiter: Limiter, key: string): Promise<Decision> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const decision = await limiter.consume(key);
    if (decision.storeError === undefined || Date.now() > deadline) return decision;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('PostgresStore on a private server that is killed or frozen', () => {
  let server: PostgresServer;
  let pool: pg.Pool;
  beforeAll(async () => {
    server = await startPostgres();
    pool = new pg.Pool({ connectionString: server.url, max: 8, connectionTimeoutMillis: 2000 });
    pool.on('error', () => {}); // idle clients of a killed server
  }, 60_000);
  afterAll(async () => {
    await pool?.end().catch(() => {});
    await server?.dispose();
  });

  it('answers every call in flight with a store error within timeoutMs when the server is killed, and decides again once it is back', async () => {
    const { limiter, errors } = watched(new PostgresStore({ pool }), 'killed:');
    expect((await limiter.consume('k')).allowed).toBe(true);
    const inFlight = Array.from({ length: 40 }, (_, i) => limiter.consume(`k${i % 5}`));
    await server.stop('SIGKILL');
    const { decisions, slowestMs } = await timed([...inFlight, ...Array.from({ length: 10 }, () => limiter.consume('after'))]);
    expect(slowestMs).toBeLessThan(timeoutMs + 1000);
    const failed = decisions.filter((d) => d.storeError !== undefined);
    expect(failed.length).toBeGreaterThan(0);
    expect(failed.every((d) => !d.allowed)).toBe(true);
    expect(errors.length).toBeGreaterThan(0);
    await server.restart();
    const back = await recovered(limiter, 'k');
    expect(back).toMatchObject({ allowed: true });
    expect(back.storeError).toBeUndefined();
  }, 60_000);

  it('answers calls with ERR_FG_STORE_TIMEOUT while the server is frozen, and decides again once it thaws', async () => {
    const { limiter } = watched(new PostgresStore({ pool }), 'frozen:');
    expect((await recovered(limiter, 'k')).storeError).toBeUndefined();
    await server.pause();
    try {
      const { decisions, slowestMs } = await timed(Array.from({ length: 20 }, (_, i) => limiter.consume(`k${i}`)));
      expect(slowestMs).toBeLessThan(timeoutMs + 1000);
      expect(decisions.every((d) => d.storeError !== undefined && !d.allowed)).toBe(true);
      expect(decisions.some((d) => (d.storeError as { code?: string }).code === 'ERR_FG_STORE_TIMEOUT')).toBe(true);
    } finally {
      await server.resume();
    }
    expect((await recovered(limiter, 'k')).storeError).toBeUndefined();
  }, 60_000);
});

describe('PostgresStore when the database refuses', () => {
  const database = usePostgres();
  const pools: pg.Pool[] = [];
  const poolOf = (config: pg.PoolConfig = {}) => {
    const pool = new pg.Pool({ connectionString: database.url, max: 4, ...config });
    pools.push(pool);
    return pool;
  };
  const table = () => `${database.schema}.floodgate_state`;
  afterAll(async () => {
    await Promise.all(pools.map((pool) => pool.end()));
  });

  it('a row locked by another transaction: the call is a store error within timeoutMs; other keys go on; once the lock is gone, it decides', async () => {
    const pool = poolOf();
    const store = new PostgresStore({ pool, table: table() });
    const { limiter } = watched(store, 'locked:');
    await limiter.consume('k');
    const [row] = store.keysOf('k', { prefix: 'locked:', rules: limiter.rules });
    const holder = await poolOf().connect();
    await holder.query('BEGIN');
    await holder.query(`SELECT 1 FROM ${table()} WHERE key = $1 FOR UPDATE`, [row]);
    try {
      const { decisions, slowestMs } = await timed([limiter.consume('k'), limiter.consume('other')]);
      expect(slowestMs).toBeLessThan(timeoutMs + 1000);
      expect(decisions[0]?.storeError).toMatchObject({ code: 'ERR_FG_STORE_TIMEOUT' });
      expect(decisions[1]).toMatchObject({ allowed: true });
      expect(decisions[1]?.storeError).toBeUndefined();
    } finally {
      await holder.query('COMMIT');
      holder.release();
    }
    expect((await recovered(limiter, 'k')).storeError).toBeUndefined();
  });

  it('a row locked by another transaction while the pool is busy: the calls that would have gone with it in one statement go on', async () => {
    const pool = poolOf({ max: 2 });
    const store = new PostgresStore({ pool, table: table() });
    const { limiter } = watched(store, 'locked-busy:');
    await limiter.consume('k');
    const [row] = store.keysOf('k', { prefix: 'locked-busy:', rules: limiter.rules });
    const others = Array.from({ length: 30 }, (_, i) => `other${i}`);
    await Promise.all(others.map((key) => limiter.consume(key)));
    const holder = await poolOf().connect();
    await holder.query('BEGIN');
    await holder.query(`SELECT 1 FROM ${table()} WHERE key = $1 FOR UPDATE`, [row]);
    try {
      const { decisions, slowestMs } = await timed([...others.slice(0, 15), 'k', ...others.slice(15)].map((key) => limiter.consume(key)));
      expect(slowestMs).toBeLessThan(timeoutMs + 1000);
      expect(decisions[15]?.storeError).toMatchObject({ code: 'ERR_FG_STORE_TIMEOUT' });
      expect(decisions.filter((d) => d.storeError === undefined && d.allowed)).toHaveLength(30);
    } finally {
      await holder.query('COMMIT');
      holder.release();
    }
    expect((await recovered(limiter, 'k')).storeError).toBeUndefined();
  });

  it('a full pool: calls wait for a connection no longer than timeoutMs, then decide once one is free', async () => {
    const pool = poolOf({ max: 1 });
    const { limiter } = watched(new PostgresStore({ pool, table: table() }), 'full:');
    await limiter.consume('warm');
    const held = await pool.connect();
    try {
      const { decisions, slowestMs } = await timed([limiter.consume('k'), limiter.consume('k')]);
      expect(slowestMs).toBeLessThan(timeoutMs + 1000);
      expect(decisions.every((d) => (d.storeError as { code?: string } | undefined)?.code === 'ERR_FG_STORE_TIMEOUT')).toBe(true);
    } finally {
      held.release();
    }
    expect((await recovered(limiter, 'k')).storeError).toBeUndefined();
  });

  it('a statement timeout, and a read-only database: store errors for the writes; peeks still answer there', async () => {
    const slow = watched(new PostgresStore({ pool: poolOf({ statement_timeout: 1, query_timeout: 2000 }), table: table() }), 'slow:');
    await slow.limiter.consume('k').catch(() => undefined);
    await watched(new PostgresStore({ pool: poolOf(), table: table() }), 'rw:').limiter.peek('k'); // the table exists, as on a replica
    const readOnly = watched(new PostgresStore({ pool: poolOf({ options: '-c default_transaction_read_only=on' }), table: table() }), 'ro:');
    const denied = await readOnly.limiter.consume('k');
    expect(denied).toMatchObject({ allowed: false });
    expect(denied.storeError?.message).toMatch(/read-only transaction/);
    const peek = await readOnly.limiter.peek('k');
    expect(peek.storeError).toBeUndefined();
    expect(peek.remaining).toBe(1000);
    // A statement timeout of 1 ms fails some statement of the first calls at least: a store error, never a hang.
    const { decisions, slowestMs } = await timed(Array.from({ length: 20 }, (_, i) => slow.limiter.consume(`k${i}`)));
    expect(slowestMs).toBeLessThan(timeoutMs + 1000);
    for (const d of decisions) if (d.storeError !== undefined) expect(d.allowed).toBe(false);
  });

  it('keeps the table bounded: ended rows are deleted as new ones come, and a backlog of a million drains', async () => {
    const pool = poolOf();
    const store = new PostgresStore({ pool, table: `${database.schema}.bounded` });
    const limiter = createLimiter({
      algorithm: 'fixed-window',
      limit: 5,
      windowMs: 60_000,
      store,
      prefix: 'bounded:',
      timeoutMs: 30_000,
      onStoreError: 'deny',
    });
    await limiter.consume('warm'); // creates the table
    // A million rows whose time is up, as a million distinct keys over past windows leave them.
    await pool.query(
      `INSERT INTO ${database.schema}.bounded (key, value, version, expires_at) SELECT 'old:' || i, 'fw:1:1,1', 1, 1 FROM generate_series(1, 1000000) i`,
    );
    for (let round = 0; round < 3; round++) await Promise.all(Array.from({ length: 1000 }, (_, i) => limiter.consume(`new${round}:${i}`)));
    const count = async () => (await pool.query(`SELECT count(*)::int AS n FROM ${database.schema}.bounded`)).rows[0].n as number;
    const deadline = Date.now() + 60_000;
    while ((await count()) > 3001 + 1000 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 200));
    // The 3001 live keys, and at most one sweep's worth of anything else.
    expect(await count()).toBeLessThanOrEqual(3001 + 1000);
  }, 120_000);
});
