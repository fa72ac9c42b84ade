/*
 * MySqlStore when the database fails: every fault is a store error within
 * timeoutMs, decided by onStoreError, never a hung call; and the store works
 * again once the database does. The server killed or frozen is a private
 * MariaDB, started for this file.
 */
import { createLimiter, type Decision, type Limiter } from '@floodgate/core';
import { type MariaDbServer, startMariaDb, useMySql } from '@floodgate/test-support';
import mysql from 'mysql2/promise';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MySqlStore } from './store.js';

const timeoutMs = 300;

function watched(store: MySqlStore, prefix: string): Limiter {
  const limiter = createLimiter({ algorithm: 'token-bucket', limit: 1000, windowMs: 60_000, store, prefix, timeoutMs, onStoreError: 'deny' });
  limiter.on('error', () => {});
  return limiter;
}

async function timed(calls: Promise<Decision>[]): Promise<{ decisions: Decision[]; slowestMs: number }> {
  const started = performance.now();
  const decisions = await Promise.all(calls.map((call) => call.then((d) => [d, performance.now() - started] as const)));
  return { decisions: decisions.map(([d]) => d), slowestMs: Math.max(...decisions.map(([, ms]) => ms)) };
}

async function recovered(limiter: Limiter, key: string): Promise<Decision> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const decision = await limiter.consume(key);
    if (decision.storeError === undefined || Date.now() > deadline) return decision;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('MySqlStore on a private MariaDB that is killed or frozen', () => {
  let server: MariaDbServer;
  let pool: mysql.Pool;
  beforeAll(async () => {
    server = await startMariaDb();
    const admin = await mysql.createConnection({ uri: server.url });
    await admin.query('CREATE DATABASE faults');
    await admin.end();
    pool = mysql.createPool({ uri: server.url.replace(/\/mysql$/, '/faults'), connectionLimit: 8, connectTimeout: 2000 });
  }, 180_000);
  afterAll(async () => {
    await pool?.end().catch(() => {});
    await server?.dispose();
  });

  it('answers every call in flight with a store error within timeoutMs when the server is killed, and decides again once it is back', async () => {
    const limiter = watched(new MySqlStore({ pool }), 'killed:');
    expect((await recovered(limiter, 'k')).allowed).toBe(true);
    const inFlight = Array.from({ length: 40 }, (_, i) => limiter.consume(`k${i % 5}`));
    await server.stop('SIGKILL');
    const { decisions, slowestMs } = await timed([...inFlight, ...Array.from({ length: 10 }, () => limiter.consume('after'))]);
    expect(slowestMs).toBeLessThan(timeoutMs + 1000);
    const failed = decisions.filter((d) => d.storeError !== undefined);
    expect(failed.length).toBeGreaterThan(0);
    expect(failed.every((d) => !d.allowed)).toBe(true);
    await server.restart();
    const back = await recovered(limiter, 'k');
    expect(back.storeError).toBeUndefined();
    expect(back.allowed).toBe(true);
  }, 120_000);

  it('answers calls with ERR_FG_STORE_TIMEOUT while the server is frozen, and decides again once it thaws', async () => {
    const limiter = watched(new MySqlStore({ pool }), 'frozen:');
    expect((await recovered(limiter, 'k')).storeError).toBeUndefined();
    server.pause();
    try {
      const { decisions, slowestMs } = await timed(Array.from({ length: 20 }, (_, i) => limiter.consume(`k${i}`)));
      expect(slowestMs).toBeLessThan(timeoutMs + 1000);
      expect(decisions.every((d) => (d.storeError as { code?: string } | undefined)?.code === 'ERR_FG_STORE_TIMEOUT')).toBe(true);
    } finally {
      server.resume();
    }
    expect((await recovered(limiter, 'k')).storeError).toBeUndefined();
  }, 120_000);
});

describe('MySqlStore when the database refuses', () => {
  const database = useMySql();
  const pools: mysql.Pool[] = [];
  const poolOf = (options: mysql.PoolOptions = {}) => {
    const pool = mysql.createPool({ uri: database.url, connectionLimit: 4, ...options });
    pools.push(pool);
    return pool;
  };
  afterAll(async () => {
    await Promise.all(pools.map((pool) => pool.end()));
  });

  it('a row locked by another transaction: the call is a store error within timeoutMs; other keys go on; once the lock is gone, it decides', async () => {
    const store = new MySqlStore({ pool: poolOf() });
    const limiter = watched(store, 'locked:');
    await limiter.consume('k');
    const [row] = store.keysOf('k', { prefix: 'locked:', rules: limiter.rules });
    const holder = await poolOf().getConnection();
    await holder.query('START TRANSACTION');
    await holder.query('SELECT 1 FROM floodgate_state WHERE `key` = ? FOR UPDATE', [row]);
    try {
      const { decisions, slowestMs } = await timed([limiter.consume('k'), limiter.consume('other')]);
      expect(slowestMs).toBeLessThan(timeoutMs + 1000);
      expect(decisions[0]?.storeError).toMatchObject({ code: 'ERR_FG_STORE_TIMEOUT' });
      expect(decisions[1]).toMatchObject({ allowed: true });
    } finally {
      await holder.query('COMMIT');
      holder.release();
    }
    expect((await recovered(limiter, 'k')).storeError).toBeUndefined();
  });

  it('a full pool: calls wait for a connection no longer than timeoutMs, then decide once one is free', async () => {
    const pool = poolOf({ connectionLimit: 1 });
    const limiter = watched(new MySqlStore({ pool }), 'full:');
    await limiter.consume('warm');
    const held = await pool.getConnection();
    try {
      const { decisions, slowestMs } = await timed([limiter.consume('k'), limiter.consume('k')]);
      expect(slowestMs).toBeLessThan(timeoutMs + 1000);
      expect(decisions.every((d) => (d.storeError as { code?: string } | undefined)?.code === 'ERR_FG_STORE_TIMEOUT')).toBe(true);
    } finally {
      held.release();
    }
    expect((await recovered(limiter, 'k')).storeError).toBeUndefined();
  });

  it('a read-only session: admitted calls are store errors, peeks still answer', async () => {
    await watched(new MySqlStore({ pool: poolOf() }), 'rw:').peek('k'); // the table exists, as on a replica
    const pool = poolOf();
    pool.on('connection', (connection) => {
      connection.query('SET SESSION TRANSACTION READ ONLY');
    });
    const limiter = watched(new MySqlStore({ pool }), 'ro:');
    const denied = await limiter.consume('k');
    expect(denied.allowed).toBe(false);
    expect(denied.storeError?.message).toMatch(/READ ONLY/i);
    const peek = await limiter.peek('k');
    expect(peek.storeError).toBeUndefined();
    expect(peek.remaining).toBe(1000);
  });
});
