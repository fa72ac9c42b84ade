export { type MySqlConnectionLike, type MySqlPoolLike, MySqlStore, type MySqlStoreOptions } from './store.js';
