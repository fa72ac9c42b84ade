/*
 * A store of your own, on Floodgate's store API (@floodgate/core/store).
 *
 * The "database" here is a Map behind an asynchronous API, as a remote
 * key-value service would be: every read and write takes a turn of the event
 * loop, so other calls run in between. A backend has one job: run a
 * transaction over the few keys of one call: read them, let Floodgate decide,
 * write what it says, with no other transaction on those keys in between.
 * Floodgate's engine does everything else: every algorithm, several rules and
 * scopes all or nothing, blocks, leases, refunds, peeks, the encoding.
 *
 * Databases that have transactions hold row locks for this (SELECT ... FOR
 * UPDATE); this one takes an in-process lock per key. Locks are taken in
 * sorted order, so that two calls over the same keys never wait for each
 * other in a circle.
 */
import { byCodePoints, type KeyValueBackend, KeyValueStore, type StateChange } from '@floodgate/core/store';

/** What the Map holds per key: the text Floodgate gave, and when it may be forgotten (on this backend's clock). */
interface Held {
  value: string;
  expiresAt: number;
}

/** A pause of one event-loop turn: what a network round trip does to the calls around it. */
const roundTrip = () => new Promise<void>((resolve) => setImmediate(resolve));

class MapBackend implements KeyValueBackend {
  private readonly data = new Map<string, Held>();
  /** Per key, the end of the last transaction queued on it. */
  private readonly locks = new Map<string, Promise<void>>();
  private readonly sweeper: ReturnType<typeof setInterval>;

  constructor(sweepIntervalMs: number) {
    // Values whose time is up are dropped, so that the Map does not grow without bound.
    this.sweeper = setInterval(() => this.sweep(), sweepIntervalMs);
    this.sweeper.unref();
  }

  async transact<T>(keys: readonly string[], decide: (values: readonly (string | null)[], now: number) => StateChange<T>): Promise<T> {
    const unlock = await this.lock([...keys].sort());
    try {
      await roundTrip(); // the read
      const now = Date.now();
      const values = keys.map((key) => {
        const held = this.data.get(key);
        return held !== undefined && held.expiresAt > now ? held.value : null;
      });
      const { writes, result } = decide(values, now);
      if (writes.length > 0) await roundTrip(); // the write
      for (const { key, value, ttlMs } of writes) {
        if (value === null) this.data.delete(key);
        else this.data.set(key, { value, expiresAt: now + ttlMs });
      }
      return result;
    } finally {
      unlock();
    }
  }

  /** Live keys that start with `prefix`, after `after`, in code point order: the store's records (blocks by hand). */
  async list(prefix: string, after: string, count: number): Promise<[string, string][]> {
    const now = Date.now();
    const keys = [...this.data.keys()].filter((key) => key.startsWith(prefix) && byCodePoints(key, after) > 0 && (this.data.get(key) as Held).expiresAt > now);
    return keys
      .sort(byCodePoints)
      .slice(0, count)
      .map((key) => [key, (this.data.get(key) as Held).value]);
  }

  close(): void {
    clearInterval(this.sweeper);
  }

  /** Number of keys held (for the demo). */
  get size(): number {
    return this.data.size;
  }

  /** Waits for the transactions queued on `keys` before this one, then holds them until the returned function is called. */
  private async lock(keys: readonly string[]): Promise<() => void> {
    let release!: () => void;
    const done = new Promise<void>((resolve) => {
      release = resolve;
    });
    const before = keys.map((key) => this.locks.get(key));
    for (const key of keys) this.locks.set(key, done);
    for (const previous of before) await previous;
    return () => {
      for (const key of keys) if (this.locks.get(key) === done) this.locks.delete(key);
      release();
    };
  }

  private sweep(): void {
    const now = Date.now();
    for (const [key, held] of this.data) if (held.expiresAt <= now) this.data.delete(key);
  }
}

export interface MapStoreOptions {
  /** Whose clock decides: this process's (`'server'`), or the limiter's `now()` (`'client'`: tests, replays). @defaultValue 'server' */
  clock?: 'server' | 'client';
  /** How often values whose time is up are dropped, in ms. @defaultValue 5_000 */
  sweepIntervalMs?: number;
}

/**
 * The store: Floodgate's KeyValueStore over the backend above.
 *
 * @example
 * ```ts
 * const limiter = createLimiter({ limit: 100, windowMs: 60_000, store: new MapStore() });
 * ```
 */
export class MapStore extends KeyValueStore {
  private readonly map: MapBackend;

  constructor({ clock = 'server', sweepIntervalMs = 5_000 }: MapStoreOptions = {}) {
    const backend = new MapBackend(sweepIntervalMs);
    super(backend, { clock });
    this.map = backend;
  }

  /** Number of keys the store holds. */
  get size(): number {
    return this.map.size;
  }
}
