/*
 * What a SQL limiter keeps per client: rows and bytes its tables grow by
 * over N distinct keys (one call each, awaited in turn), from empty tables. Bytes
 * as each database counts its tables: pg_total_relation_size (heap, indexes,
 * TOAST), InnoDB's data_length + index_length after ANALYZE TABLE (16 KB
 * pages), and SQLite's pages in use × page_size (one file per library).
 */
import { ipKey } from './keys.js';
import { log } from './log.js';
import { runCalls } from './redis-contenders.js';
import type { SqlContender, SqlContenderId } from './sql-contenders.js';

export interface SqlStorageRow {
  contender: SqlContenderId;
  /** The tables it wrote. */
  tables: string;
  /** One example of the library's key for client 10.0.0.1. */
  exampleKey: string;
  keys: number;
  rowsPerKey: number;
  bytesPerKey: number;
}

export async function sqlStoragePerKey(id: SqlContenderId, contender: SqlContender, keys: number, inFlight: number): Promise<SqlStorageRow> {
  await contender.clear();
  const before = await contender.storage();
  const clients = Array.from({ length: keys }, (_, i) => ipKey(i));
  const outcome = await runCalls(contender, clients, keys, inFlight);
  if (outcome.errors > 0) throw new Error(`${id}: ${outcome.firstError}`);
  const after = await contender.storage();
  const row: SqlStorageRow = {
    contender: id,
    tables: contender.tables,
    exampleKey: await contender.exampleKey(),
    keys,
    rowsPerKey: (after.rows - before.rows) / keys,
    bytesPerKey: Math.round(((after.bytes - before.bytes) / keys) * 10) / 10,
  };
  await contender.clear();
  log(`sql storage ${id.padEnd(32)} ${keys} keys: ${row.rowsPerKey} rows/key, ${row.bytesPerKey} B/key (${row.exampleKey})`);
  return row;
}
