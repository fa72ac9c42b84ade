// The store the contract's multi-process test makes in each of its processes: a pool of its own to the test's database.
import mysql from 'mysql2/promise';
import { MySqlStore } from '../store.js';

export default () => {
  const pool = mysql.createPool({ uri: process.env.FLOODGATE_MYSQL_URL, connectionLimit: 4 });
  const store = new MySqlStore({ pool });
  const close = store.close.bind(store);
  store.close = async () => {
    await close();
    await pool.end();
  };
  return store;
};
