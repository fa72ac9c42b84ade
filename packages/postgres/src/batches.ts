/*
 * The reads, and the writes, of different calls in one statement when the
 * connections are busy.
 *
 * A store's statements run on as many connections as its client has. While
 * they are all in use, a call's statement would wait in the pool's queue;
 * here it waits instead for the store's next statement to end, and then
 * every read waiting goes as one statement, or every write waiting (each
 * call still gets its own rows, and is written whole or not at all on its
 * own). Alone, a statement goes at once, by itself; under load, one
 * statement, one round trip and one commit serve many calls.
 *
 * A write whose batch finds a row of it held by another transaction is not
 * tried there (the write function answers null for it): it goes again alone
 * and waits for that row by itself, so the calls it would have gone with
 * never wait for a lock that is not theirs.
 *
 * This exists for speed. Bench target: the SQL section's "PostgresStore vs
 * RateLimiterPostgres, 64 in flight, 100k keys" row (issue #28), measured
 * against the store without each step in one run, 5 rounds, medians:
 * reads together took 1357 → 1655 calls/s (0.64× → 0.78× rate-limiter-
 * flexible; the server's CPU per call 390 → 285 µs, the client's 307 → 158
 * µs); writes together then 3035 → 5917 calls/s (0.74× → 1.45×; server 203
 * → 125 µs, client 122 → 75 µs). Calls one at a time do not change (a write
 * of one call costs the server ~20 µs more than `_write1` did).
 */

/** A call's statement that waits for a connection. */
interface Waiting<I, O> {
  readonly item: I;
  resolve(output: O): void;
  reject(error: unknown): void;
}

/** One kind of statement: how to run a batch of items (one output per item, in order), and how much of a batch an item takes. */
interface Kind<I, O> {
  readonly send: (items: readonly I[]) => Promise<readonly O[]>;
  readonly size: (item: I) => number;
  waiting: Waiting<I, O>[];
}

/** The most keys (or rows) in one statement. */
const MOST = 500;

/**
 * How many statements the client runs at once: a pg Pool's or postgres.js's `max` (10 by default in
 * both), 1 for a pg Client; 10 for a query function (its pool is not known here).
 */
export function connectionsOf(client: unknown): number {
  const max = (client as { options?: { max?: unknown } } | undefined)?.options?.max;
  if (typeof max === 'number' && Number.isInteger(max) && max > 0) return max;
  return typeof (client as { connectionParameters?: unknown } | undefined)?.connectionParameters === 'object' ? 1 : 10;
}

/** A store's statements, at most one per connection in flight; those that come meanwhile go together, per kind, each kind in turn. */
export class Batches {
  private inFlight = 0;
  private readonly kinds: Kind<never, unknown>[] = [];
  private turn = 0;

  constructor(private readonly connections: number) {}

  /** A kind of statement that batches: the function returned queues an item and resolves with its output once its batch has run. */
  kind<I, O>(send: (items: readonly I[]) => Promise<readonly O[]>, size: (item: I) => number): (item: I) => Promise<O> {
    const kind: Kind<I, O> = { send, size, waiting: [] };
    this.kinds.push(kind as unknown as Kind<never, unknown>);
    return (item) =>
      new Promise<O>((resolve, reject) => {
        kind.waiting.push({ item, resolve, reject });
        this.next();
      });
  }

  /** Runs a statement that does not batch, counted among those in flight. */
  async run<T>(statement: () => Promise<T>): Promise<T> {
    this.inFlight++;
    try {
      return await statement();
    } finally {
      this.inFlight--;
      this.next();
    }
  }

  /** Sends what waits, a batch at a time, while a connection is free. */
  private next(): void {
    while (this.inFlight < this.connections) {
      const kind = this.waitingKind();
      if (kind === undefined) return;
      let size = 0;
      let taken = 0;
      for (const { item } of kind.waiting) {
        size += kind.size(item);
        if (taken > 0 && size > MOST) break;
        taken++;
      }
      const batch = kind.waiting.slice(0, taken);
      kind.waiting = kind.waiting.slice(taken);
      this.inFlight++;
      kind
        .send(batch.map((waiting) => waiting.item))
        .then((outputs) => {
          batch.forEach((waiting, i) => {
            waiting.resolve(outputs[i]);
          });
        })
        .catch((error: unknown) => {
          for (const waiting of batch) waiting.reject(error);
        })
        .finally(() => {
          this.inFlight--;
          this.next();
        });
    }
  }

  /** The next kind with statements waiting, each kind in turn. */
  private waitingKind(): Kind<never, unknown> | undefined {
    for (let i = 0; i < this.kinds.length; i++) {
      const at = (this.turn + i) % this.kinds.length;
      const kind = this.kinds[at] as Kind<never, unknown>;
      if (kind.waiting.length > 0) {
        this.turn = (at + 1) % this.kinds.length;
        return kind;
      }
    }
    return undefined;
  }
}
