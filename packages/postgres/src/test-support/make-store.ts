// The store the contract's multi-process test makes in each of its processes: a pool of its own to the test's table.
import pg from 'pg';
import { PostgresStore } from '../store.js';

export default () => {
  const pool = new pg.Pool({ connectionString: process.env.FLOODGATE_PG_URL, max: 4 });
  const store = new PostgresStore({ pool, table: process.env.FLOODGATE_PG_TABLE as string });
  const close = store.close.bind(store);
  store.close = async () => {
    await close();
    await pool.end();
  };
  return store;
};
