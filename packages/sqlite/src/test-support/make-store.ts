// The store the contract's multi-process test makes in each of its processes: a connection of its own to the test's file.
import Database from 'better-sqlite3';
import { SqliteStore } from '../store.js';

export default () => {
  const database = new Database(process.env.FLOODGATE_SQLITE_FILE as string, { timeout: 10_000 });
  database.pragma('journal_mode = WAL');
  const store = new SqliteStore({ database });
  const close = store.close.bind(store);
  store.close = async () => {
    await close();
    database.close();
  };
  return store;
};
