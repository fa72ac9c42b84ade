import type { StoreRecords } from './types.js';

/** A code unit of UTF-16 as it ranks among code points: surrogates (code points above U+FFFF) after U+E000..U+FFFF. */
const rank = (unit: number): number => (unit >= 0xe000 ? unit - 0x800 : unit >= 0xd800 ? unit + 0x2000 : unit);

/** Two strings in the order of their code points (the order of their UTF-8 bytes, as Redis and binary SQL collations sort). */
export function byCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return rank(x) - rank(y);
  }
  return a.length - b.length;
}

/** Records dropped at once when the map has grown this much since its last sweep of expired ones. */
const SWEEP_EVERY = 1_000;

/** StoreRecords in this process's memory (MemoryStore's), on a clock of ms. */
export class MemoryRecords implements StoreRecords {
  private readonly records = new Map<string, { value: string; expiresAt: number }>();
  private sizeAtSweep = 0;

  constructor(private readonly clock: () => number = Date.now) {}

  set(name: string, value: string, ttlMs: number): void {
    this.records.set(name, { value, expiresAt: this.clock() + ttlMs });
    if (this.records.size >= this.sizeAtSweep + SWEEP_EVERY) this.sweep();
  }

  get(names: readonly string[]): (string | null)[] {
    const now = this.clock();
    return names.map((name) => {
      const record = this.records.get(name);
      return record !== undefined && record.expiresAt > now ? record.value : null;
    });
  }

  delete(names: readonly string[]): void {
    for (const name of names) this.records.delete(name);
  }

  list(prefix: string, after: string, count: number): { records: [string, string][]; next: string } {
    this.sweep();
    const names = [...this.records.keys()].filter((name) => name.startsWith(prefix) && (after === '' || byCodePoints(name, after) > 0)).sort(byCodePoints);
    const page = names.slice(0, count);
    return {
      records: page.map((name) => [name, (this.records.get(name) as { value: string }).value]),
      next: names.length > count ? (page[page.length - 1] as string) : '',
    };
  }

  /** Drops the records that have expired. */
  private sweep(): void {
    const now = this.clock();
    for (const [name, record] of this.records) if (record.expiresAt <= now) this.records.delete(name);
    this.sizeAtSweep = this.records.size;
  }
}
