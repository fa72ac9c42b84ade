/*
 * One transaction in flight per set of keys, in this process; the calls that
 * come meanwhile go together in the next one. KeyValueStore decides each of
 * them in turn within that transaction (the engine is pure: a batch of calls
 * decided in turn on one read is what the same calls in turn would decide,
 * at one instant), so a hot key costs one read and one write per batch, not
 * per call, and the calls of one process never conflict with each other.
 *
 * Bench: "SQL stores, 64 in flight on one hot key" (BENCHMARKS.md). Without
 * it, 64 optimistic transactions on one row conflict and retry; with a
 * locking backend they would queue in the database one round trip at a time.
 */

/** A call waiting for its turn: what the batch's transaction decides for it, and how to answer it. */
export interface Queued<C, R> {
  readonly call: C;
  resolve(result: R): void;
  reject(error: unknown): void;
}

/**
 * Runs `transact` for batches of the calls queued under one id: at most one
 * batch in flight per id; the calls queued while it runs make the next batch.
 */
export class KeyQueue<C, R> {
  /** Per id with a batch in flight: the calls queued for the next one. */
  private readonly waiting = new Map<string, Queued<C, R>[]>();

  constructor(private readonly transact: (id: string, batch: readonly C[]) => Promise<readonly R[]>) {}

  /** Queues a call under `id`; resolves with what its batch decided for it. */
  push(id: string, call: C): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      const queued = { call, resolve, reject };
      const waiting = this.waiting.get(id);
      if (waiting !== undefined) {
        waiting.push(queued);
        return;
      }
      this.waiting.set(id, []);
      void this.drain(id, [queued]);
    });
  }

  private async drain(id: string, first: Queued<C, R>[]): Promise<void> {
    let batch = first;
    for (;;) {
      try {
        const results = await this.transact(
          id,
          batch.map((queued) => queued.call),
        );
        batch.forEach((queued, i) => {
          queued.resolve(results[i] as R);
        });
      } catch (error) {
        for (const queued of batch) queued.reject(error);
      }
      const next = this.waiting.get(id) as Queued<C, R>[];
      if (next.length === 0) {
        this.waiting.delete(id);
        return;
      }
      this.waiting.set(id, []);
      batch = next;
    }
  }
}
