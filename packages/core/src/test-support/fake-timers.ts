/*
 * A clock and timers that tests move by hand, for code that takes a WaitClock
 * (waiting): `advance(ms)` runs every timer due in that span, in time order,
 * each at its own time, and lets promises settle after each one.
 */
import type { WaitClock } from '../wait.js';

/** Lets every promise chain that can settle now settle (one turn of the event loop). */
export const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

export class FakeTimers implements WaitClock {
  time: number;
  /** Every delay a timer was set for, in order. */
  readonly delays: number[] = [];
  private readonly timers = new Map<number, { at: number; callback: () => void }>();
  private ids = 0;

  constructor(start = 1_700_000_000_000) {
    this.time = start;
  }

  /** The clock, to hand to createLimiter({ now }) as well. */
  readonly now = (): number => this.time;

  setTimeout(callback: () => void, ms: number): unknown {
    const id = ++this.ids;
    this.delays.push(ms);
    this.timers.set(id, { at: this.time + ms, callback });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number);
  }

  /** Timers set and not yet run or cleared. */
  get pending(): number {
    return this.timers.size;
  }

  /** Moves the clock `ms` ahead, running the timers due on the way at their times. */
  async advance(ms: number): Promise<void> {
    const end = this.time + ms;
    await settle();
    for (;;) {
      let next: [number, { at: number; callback: () => void }] | undefined;
      for (const entry of this.timers) if (entry[1].at <= end && (next === undefined || entry[1].at < next[1].at)) next = entry;
      if (next === undefined) break;
      this.timers.delete(next[0]);
      this.time = Math.max(this.time, next[1].at);
      next[1].callback();
      await settle();
    }
    this.time = end;
    await settle();
  }
}
