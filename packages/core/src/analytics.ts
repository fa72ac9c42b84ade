/*
 * Who is limited most (createLimiter({ analytics: true }), limiter.top()):
 * each process counts its denied calls by key in a summary of fixed size,
 * per period, and writes it to the store now and then as a record of its
 * own; top() adds up the records of every process for the period under way
 * and the one before. Memory is bounded everywhere: `size` counters per
 * process (and per period in the store, each record expiring after two
 * periods), whatever the number of keys. A denied call changes no rule's
 * state: the summary is kept apart from the rules'.
 *
 * The summary is space-saving (Metwally, Agrawal, El Abbadi, 2005): a key not
 * counted takes the place of the smallest counter and inherits its count as
 * its possible overcount (`error`). Every key denied more than total/size
 * times in a period is in it, and a count is never under the truth.
 */
import { describe, ErrorCodes, FloodgateError } from './errors.js';
import type { StoreRecords } from './stores/types.js';

/** A key's count in a summary: `count` is at most `error` above the truth. */
interface Counter {
  count: number;
  error: number;
}

/** Space-saving: at most `size` counters. */
export class SpaceSaving {
  readonly counters = new Map<string, Counter>();

  constructor(private readonly size: number) {}

  add(key: string, by = 1): void {
    const counter = this.counters.get(key);
    if (counter !== undefined) {
      counter.count += by;
      return;
    }
    if (this.counters.size < this.size) {
      this.counters.set(key, { count: by, error: 0 });
      return;
    }
    // Full: the smallest counter makes room (a scan of `size` counters, only for a key not counted yet).
    let smallest: string | undefined;
    let least = Number.POSITIVE_INFINITY;
    for (const [other, { count }] of this.counters) {
      if (count < least) {
        least = count;
        smallest = other;
      }
    }
    this.counters.delete(smallest as string);
    this.counters.set(key, { count: least + by, error: least });
  }
}

/** A key among the most limited, as limiter.top() gives it. */
export interface TopKey {
  /** The key the denying rule counts under (for a rule of another scope than `key`, that scope's key). */
  key: string;
  scope: string;
  /** Denied calls counted, over every process; at most `error` above the truth. */
  denied: number;
  error: number;
}

/** What analytics need of their limiter. */
export interface AnalyticsHost {
  readonly prefix: string;
  readonly records: StoreRecords;
  now(): number;
  timed<T>(value: T | Promise<T>): Promise<T>;
  failed(error: Error): void;
}

/** How often a process writes its summary while keys are denied. */
const FLUSH_MS = 5_000;

export class Analytics {
  private readonly instance = Math.random().toString(36).slice(2, 10);
  private period = Number.NaN;
  private summary: SpaceSaving;
  private dirty = false;
  private writing: Promise<void> = Promise.resolve();
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly host: AnalyticsHost,
    readonly periodMs: number,
    readonly size: number,
  ) {
    this.summary = new SpaceSaving(size);
  }

  /** Counts a denied call of `key` (in `scope`) at `now`. */
  denied(scope: string, key: string, now: number): void {
    const period = Math.floor(now / this.periodMs);
    if (period !== this.period) {
      if (this.dirty) this.flush().catch(() => {}); // the period that ended: written as it stands
      this.period = period;
      this.summary = new SpaceSaving(this.size);
    }
    this.summary.add(JSON.stringify([scope, key]));
    this.dirty = true;
    if (this.timer === undefined) {
      this.timer = setInterval(
        () => {
          if (this.dirty) this.flush().catch(() => {});
        },
        Math.min(FLUSH_MS, this.periodMs),
      );
      this.timer.unref?.();
    }
  }

  /** Writes this process's summary of the period under way (one write at a time; reported when it fails). */
  flush(): Promise<void> {
    if (!this.dirty) return this.writing;
    this.dirty = false;
    const period = this.period;
    const entries = [...this.summary.counters].map(([name, { count, error }]) => [name, count, error]);
    const record = `${this.recordPrefix(period)}${this.instance}`;
    this.writing = this.writing
      .catch(() => {}) // a write that failed was reported by its caller
      .then(() => this.host.timed(this.host.records.set(record, JSON.stringify(entries), 2 * this.periodMs + FLUSH_MS)))
      .catch((error: unknown) => {
        this.dirty = true; // written again next time
        const failed = new FloodgateError(ErrorCodes.STORE_UNAVAILABLE, `Writing the denial counts failed: ${(error as Error)?.message ?? describe(error)}`, {
          cause: error,
        });
        this.host.failed(failed);
        throw failed;
      });
    return this.writing;
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** The `n` keys denied most over the period under way and the one before, on every process. */
  async top(n: number): Promise<{ items: TopKey[]; sinceMs: number }> {
    await this.flush();
    const period = Math.floor(this.host.now() / this.periodMs);
    const totals = new Map<string, Counter>();
    for (const p of [period - 1, period]) {
      const prefix = this.recordPrefix(p);
      let after = '';
      do {
        const page = await this.host.timed(this.host.records.list(prefix, after, 1000));
        for (const [, value] of page.records) {
          for (const [name, count, error] of parseSummary(value)) {
            const total = totals.get(name);
            if (total === undefined) totals.set(name, { count, error });
            else {
              total.count += count;
              total.error += error;
            }
          }
        }
        after = page.next;
      } while (after !== '');
    }
    const items = [...totals]
      .sort(([a, x], [b, y]) => y.count - x.count || (a < b ? -1 : 1))
      .slice(0, n)
      .map(([name, { count, error }]) => {
        const [scope, key] = JSON.parse(name) as [string, string];
        return { key, scope, denied: count, error };
      });
    return { items, sinceMs: (period - 1) * this.periodMs };
  }

  private recordPrefix(period: number): string {
    return `${this.host.prefix}top:${this.periodMs}:${period}:`;
  }
}

/** A summary from its record; nothing from one this module did not write. */
function parseSummary(value: string): [string, number, number][] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return [];
  }
  if (!Array.isArray(parsed)) return [];
  return parsed.filter(
    (entry): entry is [string, number, number] =>
      Array.isArray(entry) && typeof entry[0] === 'string' && Number.isSafeInteger(entry[1]) && Number.isSafeInteger(entry[2]),
  );
}
