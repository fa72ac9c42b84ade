import type { KeyValueBackend, StateChange } from './key-value-store.js';

/** The rows of a call as a database read them. */
export interface VersionedRead {
  /** Per key: its value, or null when it has none (or its time is up). */
  readonly values: readonly (string | null)[];
  /** Per key: the version its row holds, 0 when there is no row at all (an expired row still has one). */
  readonly versions: readonly number[];
  /** The database's clock, ms since the epoch. */
  readonly now: number;
}

/**
 * One row to write: [key, the version read (0: no row), the new value (null:
 * delete it), ms to keep it, the new version]. In key order across a call.
 */
export type VersionedWrite = readonly [key: string, versionRead: number, value: string | null, ttlMs: number, newVersion: number];

/** What a database with conditional writes gives VersionedBackend. */
export interface VersionedDatabase {
  /** Reads the rows of `keys`, in their order, with the database's clock. */
  read(keys: readonly string[]): Promise<VersionedRead>;
  /** Writes every row, or none: none when any row no longer holds the version read (rejecting with an error `isConflict` knows). */
  write(rows: readonly VersionedWrite[]): Promise<void>;
  /** Whether an error of `write` says another writer came first (then read and decide again). */
  isConflict(error: unknown): boolean;
  /** Deletes up to `limit` rows whose time is up; resolves with how many it deleted. */
  sweep(limit: number): Promise<number>;
  /** The keys and values of live rows whose keys start with `prefix`, after `after`, in key order (see KeyValueBackend.list). */
  list?(prefix: string, after: string, count: number): Promise<[key: string, value: string][]>;
}

/** How many times a call reads and decides again when its rows changed under it, before it fails as a store error. */
const MAX_ATTEMPTS = 50;
/** Rows deleted once their time is up, per that many rows written: ended rows never outgrow what was written. */
const SWEEP_EVERY = 1000;

/** A fresh version for a row: a random integer from 1 to 2^53 - 1, so that a row deleted and made again never looks unchanged. */
function newVersion(): number {
  const [high, low] = crypto.getRandomValues(new Uint32Array(2)) as unknown as [number, number];
  return (high & 0x1fffff) * 2 ** 32 + low || 1;
}

/**
 * A KeyValueBackend over a database that can write rows on a condition
 * (optimistic concurrency): a transaction reads the rows of its keys with
 * their versions, and writes all of them only if each still holds the
 * version read; if one does not, it reads and decides again. No lock is held
 * between the read and the write, and each is one statement, so it works on
 * any connection of a pool (through PgBouncer, over serverless drivers). A
 * denied call or a peek writes nothing: one statement. The SQL stores use it;
 * so could DynamoDB (condition expressions) or any store with compare-and-set.
 *
 * After every 1,000 rows written it deletes rows whose time is up, 1,000 at
 * a time while there are that many, in the background.
 */
export class VersionedBackend implements KeyValueBackend {
  private written = 0;
  private sweeping = false;

  /** The database's listing, when it has one (records: blocks by hand). */
  readonly list?: (prefix: string, after: string, count: number) => Promise<[key: string, value: string][]>;

  constructor(private readonly database: VersionedDatabase) {
    const list = database.list;
    if (list !== undefined) this.list = (prefix, after, count) => list.call(database, prefix, after, count);
  }

  async transact<T>(keys: readonly string[], decide: (values: readonly (string | null)[], now: number) => StateChange<T>): Promise<T> {
    const at = new Map(keys.map((key, i) => [key, i]));
    for (let attempt = 1; ; attempt++) {
      const read = await this.database.read(keys);
      const { writes, result } = decide(read.values, read.now);
      if (writes.length === 0) return result;
      const rows = writes
        .map(({ key, value, ttlMs }): VersionedWrite => [key, read.versions[at.get(key) as number] as number, value, ttlMs, newVersion()])
        // One order for every statement: two calls over the same keys never wait for each other in a circle.
        .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
      try {
        await this.database.write(rows);
      } catch (error) {
        if (!this.database.isConflict(error) || attempt >= MAX_ATTEMPTS) throw error;
        // Another process wrote one of these rows since the read: read again, decide again (after a short, random pause once it keeps happening).
        if (attempt > 3) await new Promise((resolve) => setTimeout(resolve, Math.random() * attempt));
        continue;
      }
      this.wrote(rows.length);
      return result;
    }
  }

  private wrote(rows: number): void {
    this.written += rows;
    if (this.written < SWEEP_EVERY || this.sweeping) return;
    this.written = 0;
    this.sweeping = true;
    const sweep = async (): Promise<void> => {
      while ((await this.database.sweep(SWEEP_EVERY)) >= SWEEP_EVERY);
    };
    sweep()
      .catch(() => {
        // The next sweep tries again; a failing database shows in the calls themselves.
      })
      .finally(() => {
        this.sweeping = false;
      });
  }
}
