export { type PgPoolLike, type PostgresJsLike, type PostgresRow, PostgresStore, type PostgresStoreOptions, type QueryFunction } from './store.js';
