export { type SqliteDatabaseLike, type SqliteStatementLike, SqliteStore, type SqliteStoreOptions } from './store.js';
