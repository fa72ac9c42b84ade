/*
 * Waiting instead of refusing: `limiter.wait()`.
 *
 * Calls that wait for the same queue (the same store keys under the same rule
 * set) stand in one line, by priority (higher first), then in arrival order:
 * only the first of the line asks the store, and when it is denied, it asks
 * again exactly when the denial's `retryAfterMs` says, on the one timer its
 * line keeps. A later call never overtakes an earlier one of its priority,
 * even when its smaller cost would fit sooner (no starvation of large costs).
 * Priorities are strict, as Bottleneck's: lower ones wait while higher ones
 * keep coming, bounded only by their `maxWaitMs`. A waiter is rejected as
 * soon as its line shows that its turn cannot come within its `maxWaitMs`:
 * the line's next try is a lower bound for everyone behind the first (a
 * newcomer can only push them back), so a waiter is told at or before its
 * deadline without a timer of its own. Only a slow store delays that: a
 * waiter whose time ran out while the calls ahead of it were being decided
 * is rejected when its turn comes, without asking, so it never consumes
 * after its `maxWaitMs`; one whose own store call is under way at its
 * deadline is decided by that call (it asked in time).
 *
 * Across processes there is no line: each process's first waiter asks the
 * store at its retry time, and the store's atomic consume decides. That is
 * one call per process and key per retry, never one per waiter, so no jitter
 * is added (it would only leave admissible time unused).
 *
 * Timers stay referenced while someone waits: a process whose work waits on a
 * rate limit must not exit because only a timer is left. Once a line is
 * empty, its timer is gone, so waiting never keeps an idle process alive.
 */
import type { Decision } from './decision.js';
import { describe, ErrorCodes, FloodgateError } from './errors.js';
import type { Keys } from './keys.js';
import { RateLimitedError, ruleOf } from './rate-limited-error.js';
import type { CompiledRule, RuleOptions } from './rules.js';
import { MAX_TIMER_MS } from './sleep.js';

/** Options of `limiter.wait()`. */
export interface WaitOptions {
  /** Units this call takes: a positive integer. @defaultValue 1 */
  cost?: number;
  /**
   * The longest this call may wait to be admitted, in ms. When its turn
   * cannot come within it, the call is rejected at once with
   * `ERR_FG_WAIT_TIMEOUT`, rather than after waiting. @defaultValue Infinity
   */
  maxWaitMs?: number;
  /** Aborting it rejects the call with the signal's reason; an aborted call consumes nothing. */
  signal?: AbortSignal;
  /**
   * Its place in the line of its keys in this process: higher first, arrival
   * order within a priority. An integer from -1000 to 1000. Strict: a lower
   * priority waits while higher ones keep coming (bound it with `maxWaitMs`).
   * @defaultValue 0
   */
  priority?: number;
  /** Decide under these rules instead of the limiter's own (as `consume({ rules })`). */
  rules?: readonly RuleOptions[];
}

/** The range of `priority`: wide enough for any ranking, small enough to print in an error. */
export const MIN_PRIORITY = -1000;
export const MAX_PRIORITY = 1000;

/** What waiting needs of a limiter. */
export interface Admitter {
  consume(keys: Keys, options: { cost: number; rules: readonly RuleOptions[] | undefined }): Promise<Decision>;
  refund(keys: Keys, options: { cost: number; rules: readonly RuleOptions[] | undefined }): Promise<void>;
  release(keys: Keys, leaseId: string, options: { rules: readonly RuleOptions[] | undefined }): Promise<void>;
  rulesFor(rules: readonly RuleOptions[] | undefined): readonly CompiledRule[];
  /** Names the line of a call: calls with the same line compete for the same state. Throws ERR_FG_KEY for bad keys. */
  lineOf(keys: Keys, rules: readonly RuleOptions[] | undefined): string | Promise<string>;
}

/** The clock and timers waiting runs on: the limiter's clock and the runtime's timers, or a test's. */
export interface WaitClock {
  now(): number;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

interface Waiter {
  readonly keys: Keys;
  readonly cost: number;
  readonly rules: readonly RuleOptions[] | undefined;
  readonly maxWaitMs: number;
  /** The latest time (clock ms) its admission may come at. */
  readonly deadline: number;
  readonly priority: number;
  readonly signal: AbortSignal | undefined;
  readonly resolve: (decision: Decision) => void;
  readonly reject: (error: unknown) => void;
  settled: boolean;
  onAbort: (() => void) | undefined;
  /** Admitted with a shaping delay: its reservation, resolved at `dueAt`. */
  held: Decision | undefined;
  dueAt: number;
}

/** The waiters of one queue, by priority then arrival, and its one timer. */
interface Line {
  readonly id: string;
  /** Waiting to be admitted, by priority (higher first) then arrival; the first one asks the store. */
  readonly waiting: Waiter[];
  /** Admitted under a shaping rule, waiting out their `delayMs`, in order of their due time. */
  readonly held: Waiter[];
  /** When the first waiter asks again (clock ms): a lower bound for everyone's admission. */
  retryAt: number;
  /** The denial that set `retryAt`. */
  lastDenial: Decision | undefined;
  /** The store's last answer for this line, admitted or not. */
  lastDecision: Decision | undefined;
  /** The consume in flight, if any, and for whom. */
  asking: Waiter | undefined;
  /** Woken while a consume was in flight: a denial it brings may be stale, so the first waiter asks again. */
  woken: boolean;
  inFlight: Promise<void> | undefined;
  timer: unknown;
  timerAt: number;
}

/** The real clock: the limiter's `now()` and the runtime's timers. Timers stay referenced (see the top of this file). */
export function realClock(now: () => number): WaitClock {
  return {
    now,
    setTimeout: (callback, ms) => setTimeout(callback, ms),
    clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
  };
}

/** A call to wait, its options checked. */
interface Call {
  readonly keys: Keys;
  readonly cost: number;
  readonly rules: readonly RuleOptions[] | undefined;
  readonly maxWaitMs: number;
  readonly signal: AbortSignal | undefined;
  readonly priority: number;
}

/** What an aborted wait rejects with: the signal's reason (an AbortError DOMException unless abort() was given one). */
const abortReason = (signal: AbortSignal): unknown => signal.reason ?? Object.assign(new Error('This operation was aborted'), { name: 'AbortError' });

function checkWait(maxWaitMs: unknown, signal: unknown, priority: unknown): void {
  if (maxWaitMs !== undefined && (typeof maxWaitMs !== 'number' || Number.isNaN(maxWaitMs) || maxWaitMs < 0)) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `maxWaitMs must be a number of milliseconds >= 0 (Infinity, the default: no bound), got ${describe(maxWaitMs)}.`,
    );
  }
  if (
    signal !== undefined &&
    (typeof signal !== 'object' ||
      signal === null ||
      typeof (signal as AbortSignal).aborted !== 'boolean' ||
      typeof (signal as AbortSignal).addEventListener !== 'function')
  ) {
    throw new FloodgateError(ErrorCodes.OPTION, `signal must be an AbortSignal (from an AbortController, or AbortSignal.timeout()), got ${describe(signal)}.`);
  }
  if (priority !== undefined && (!Number.isSafeInteger(priority) || (priority as number) < MIN_PRIORITY || (priority as number) > MAX_PRIORITY)) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `priority must be an integer from ${MIN_PRIORITY} to ${MAX_PRIORITY} (higher goes first; 0, the default), got ${describe(priority)}.`,
    );
  }
}

/** Every line of one limiter. */
export class WaitingRoom {
  private readonly lines = new Map<string, Line>();
  private closed = false;

  constructor(
    private readonly limiter: Admitter,
    private readonly clock: WaitClock,
  ) {}

  /** Timers armed now: one per line at most (for tests, and for the bench's "no polling" check). */
  get timers(): number {
    let count = 0;
    for (const line of this.lines.values()) if (line.timer !== undefined) count++;
    return count;
  }

  /** Calls waiting now (to be admitted, or out their shaping delay). */
  get size(): number {
    let count = 0;
    for (const line of this.lines.values()) count += line.waiting.length + line.held.length;
    return count;
  }

  /**
   * Waits until the call is admitted. `cost` and `rules` come checked (the
   * limiter's checkCall); `maxWaitMs`, `signal` and `priority` are checked
   * here. Not an async function: calls made one after another join their
   * line in that order, without a turn of the event loop in between.
   */
  wait(keys: Keys, cost: number, rules: readonly RuleOptions[] | undefined, maxWaitMs?: number, signal?: AbortSignal, priority?: number): Promise<Decision> {
    let id: string | Promise<string>;
    try {
      checkWait(maxWaitMs, signal, priority);
      if (this.closed) throw closedError();
      if (signal?.aborted) throw abortReason(signal);
      // A cost that no rule can ever hold is known without asking the store.
      for (const rule of this.limiter.rulesFor(rules)) {
        if (cost > rule.capacity) {
          throw new FloodgateError(
            ErrorCodes.COST,
            `A cost of ${cost} can never be admitted: rule '${rule.name}' holds at most ${rule.capacity} at once. Lower the cost, or raise the rule's ${rule.burst !== rule.limit ? 'burst' : 'limit'}.`,
          );
        }
      }
      id = this.limiter.lineOf(keys, rules);
    } catch (error) {
      return Promise.reject(error);
    }
    const call: Call = { keys, cost, rules, maxWaitMs: maxWaitMs ?? Number.POSITIVE_INFINITY, signal, priority: priority ?? 0 };
    if (typeof id === 'string') return this.join(id, call);
    // A key long enough to be hashed: the line is known once it is.
    return id.then((hashed) => {
      if (this.closed) throw closedError();
      if (signal?.aborted) throw abortReason(signal);
      return this.join(hashed, call);
    });
  }

  private join(id: string, { keys, cost, rules, maxWaitMs, signal, priority }: Call): Promise<Decision> {
    return new Promise<Decision>((resolve, reject) => {
      const waiter: Waiter = {
        keys,
        cost,
        rules,
        maxWaitMs,
        deadline: this.clock.now() + maxWaitMs,
        priority,
        signal,
        resolve,
        reject,
        settled: false,
        onAbort: undefined,
        held: undefined,
        dueAt: 0,
      };
      let line = this.lines.get(id);
      if (line === undefined) {
        line = {
          id,
          waiting: [],
          held: [],
          retryAt: Number.NEGATIVE_INFINITY,
          lastDenial: undefined,
          lastDecision: undefined,
          asking: undefined,
          woken: false,
          inFlight: undefined,
          timer: undefined,
          timerAt: 0,
        };
        this.lines.set(id, line);
      }
      const at = placeOf(line, priority);
      if (at > 0 && line.retryAt > waiter.deadline) {
        // Those ahead of it are admitted no sooner than the line's next try: too late for this one.
        waiter.settled = true;
        reject(this.timeout(line, waiter, at));
        return;
      }
      // A new first waiter asks now: the line's next try was the one before it's, whose cost may differ.
      if (at === 0) line.retryAt = Number.NEGATIVE_INFINITY;
      const joined = line;
      if (signal !== undefined) {
        const onAbort = () => this.abort(joined, waiter);
        waiter.onAbort = onAbort;
        signal.addEventListener('abort', onAbort, { once: true });
      }
      joined.waiting.splice(at, 0, waiter);
      this.pump(joined);
    });
  }

  /** Capacity was given back for this line (a refund, a reset, a lease released here): its first waiter asks now. */
  wake(id: string): void {
    const line = this.lines.get(id);
    if (line === undefined) return;
    line.retryAt = Number.NEGATIVE_INFINITY;
    if (line.asking !== undefined) line.woken = true;
    this.pump(line);
  }

  /** The rules changed (updateRules): what a line waits for may have changed too, so every first waiter asks now. */
  wakeAll(): void {
    for (const id of [...this.lines.keys()]) this.wake(id);
  }

  /** Rejects every waiter with ERR_FG_CLOSED, gives back the reservations of held ones, and waits for calls in flight. */
  async close(): Promise<void> {
    this.closed = true;
    const pending: Promise<unknown>[] = [];
    for (const line of this.lines.values()) {
      if (line.timer !== undefined) this.clock.clearTimeout(line.timer);
      line.timer = undefined;
      if (line.inFlight !== undefined) pending.push(line.inFlight);
      for (const waiter of line.waiting.splice(0)) this.settle(waiter, () => waiter.reject(closedError()));
      for (const waiter of line.held.splice(0)) {
        pending.push(this.giveBack(waiter, waiter.held as Decision));
        this.settle(waiter, () => waiter.reject(closedError()));
      }
    }
    this.lines.clear();
    await Promise.allSettled(pending);
  }

  /** Asks the store for the first waiter when its time has come; else keeps the line's one timer for the next thing due. */
  private pump(line: Line): void {
    const now = this.clock.now();
    while (line.asking === undefined && line.waiting.length > 0 && now >= line.retryAt) {
      const head = line.waiting[0] as Waiter;
      // Its maxWaitMs is up (the store was slow to decide those ahead of it): it never asks, so it never consumes.
      if (now > head.deadline && line.lastDecision !== undefined) {
        line.waiting.shift();
        this.settle(head, () => head.reject(this.expired(line.lastDecision as Decision, head)));
        continue;
      }
      line.asking = head;
      line.inFlight = this.limiter.consume(head.keys, { cost: head.cost, rules: head.rules }).then(
        (decision) => this.decided(line, head, decision),
        (error: unknown) => this.failed(line, head, error),
      );
    }
    this.arm(line);
  }

  /** The store's answer for the first waiter. Returns the give-back of an admission nobody waits for any more (close() awaits it). */
  private decided(line: Line, head: Waiter, decision: Decision): Promise<void> | undefined {
    line.asking = undefined;
    line.inFlight = undefined;
    if (this.closed || head.settled) {
      line.woken = false; // the next waiter asks afresh
      // Aborted (or closed) while its call was in flight: an admission is given back, so it consumes nothing.
      const given = decision.allowed ? this.giveBack(head, decision) : undefined;
      if (!this.closed) {
        this.pump(line);
        this.tidy(line);
      }
      return given;
    }
    const now = this.clock.now();
    const stale = line.woken;
    line.woken = false;
    line.lastDecision = decision;
    if (decision.allowed) {
      line.waiting.shift();
      if (decision.delayMs > 0) {
        // A shaping rule reserved a slot: wait it out, or give it back at once if it lies beyond maxWaitMs.
        if (now + decision.delayMs > head.deadline) {
          void this.giveBack(head, decision);
          this.settle(head, () => head.reject(this.timeout(line, head, { decision, waitMs: decision.delayMs })));
        } else {
          head.held = decision;
          head.dueAt = now + decision.delayMs;
          insertByDue(line.held, head);
        }
      } else {
        this.settle(head, () => head.resolve(decision));
      }
    } else if (stale) {
      // Capacity came back (or the rules changed) while this denial was on its way: the first waiter asks again now.
    } else if (decision.retryAfterMs === Number.POSITIVE_INFINITY) {
      line.waiting.shift();
      this.settle(head, () => head.reject(new FloodgateError(ErrorCodes.COST, `A cost of ${head.cost} can never be admitted by ${ruleOf(decision)}.`)));
    } else if (now + decision.retryAfterMs > head.deadline) {
      // Too late for the first waiter; those behind it may need less, so the next one asks now.
      line.waiting.shift();
      this.settle(head, () => head.reject(this.timeout(line, head, { decision, waitMs: decision.retryAfterMs })));
    } else if (outranked(line)) {
      // A higher priority came in while it was being decided: it steps back behind it, and the new first asks now.
      line.waiting.shift();
      let at = 0; // before those of its priority: they came after it
      while (at < line.waiting.length && (line.waiting[at] as Waiter).priority > head.priority) at++;
      line.waiting.splice(at, 0, head);
      line.retryAt = Number.NEGATIVE_INFINITY;
      line.lastDenial = decision;
    } else {
      line.retryAt = now + decision.retryAfterMs;
      line.lastDenial = decision;
      // Nobody behind the first waiter is admitted before it: whoever cannot wait that long is told now.
      for (let i = line.waiting.length - 1; i >= 1; i--) {
        const waiter = line.waiting[i] as Waiter;
        if (line.retryAt > waiter.deadline) {
          line.waiting.splice(i, 1);
          this.settle(waiter, () => waiter.reject(this.timeout(line, waiter, i)));
        }
      }
    }
    this.pump(line);
    this.tidy(line);
    return undefined;
  }

  /** The limiter threw (bad keys or rules, an insurance limiter that failed): this waiter fails with it, the next one asks. */
  private failed(line: Line, head: Waiter, error: unknown): void {
    line.asking = undefined;
    line.inFlight = undefined;
    line.woken = false;
    if (this.closed) return;
    if (!head.settled) {
      line.waiting.shift();
      this.settle(head, () => head.reject(error));
    }
    this.pump(line);
    this.tidy(line);
  }

  private abort(line: Line, waiter: Waiter): void {
    if (waiter.settled) return;
    const at = line.waiting.indexOf(waiter);
    if (at >= 0) {
      line.waiting.splice(at, 1);
      // The line's next try was the first waiter's: the new first one may need less.
      if (at === 0) line.retryAt = Number.NEGATIVE_INFINITY;
    } else {
      const held = line.held.indexOf(waiter);
      if (held >= 0) {
        line.held.splice(held, 1);
        void this.giveBack(waiter, waiter.held as Decision);
      }
    }
    // A waiter whose call is in flight is given back when the store answers (decided()).
    this.settle(waiter, () => waiter.reject(abortReason(waiter.signal as AbortSignal)));
    this.pump(line);
    this.tidy(line);
  }

  /** Keeps one timer per line, for the earliest of: the next held waiter's due time, the first waiter's next try. */
  private arm(line: Line): void {
    let at = line.held.length > 0 ? (line.held[0] as Waiter).dueAt : Number.POSITIVE_INFINITY;
    if (line.asking === undefined && line.waiting.length > 0 && line.retryAt < at) at = line.retryAt;
    if (line.timer !== undefined) {
      if (line.timerAt === at) return;
      this.clock.clearTimeout(line.timer);
      line.timer = undefined;
    }
    if (at === Number.POSITIVE_INFINITY) return;
    // setTimeout keeps at most 2^31 - 1 ms (a longer delay fires after 1 ms): a longer wait sleeps in chunks.
    const delay = Math.min(Math.max(at - this.clock.now(), 0), MAX_TIMER_MS);
    line.timerAt = at;
    line.timer = this.clock.setTimeout(() => this.ring(line), delay);
  }

  private ring(line: Line): void {
    line.timer = undefined;
    const now = this.clock.now();
    while (line.held.length > 0 && (line.held[0] as Waiter).dueAt <= now) {
      const waiter = line.held.shift() as Waiter;
      this.settle(waiter, () => waiter.resolve(waiter.held as Decision));
    }
    this.pump(line);
    this.tidy(line);
  }

  /** Forgets a line with nobody in it. */
  private tidy(line: Line): void {
    if (line.waiting.length === 0 && line.held.length === 0 && line.asking === undefined && line.timer === undefined && this.lines.get(line.id) === line) {
      this.lines.delete(line.id);
    }
  }

  private settle(waiter: Waiter, outcome: () => void): void {
    if (waiter.settled) return;
    waiter.settled = true;
    if (waiter.onAbort !== undefined) waiter.signal?.removeEventListener('abort', waiter.onAbort);
    outcome();
  }

  /** Gives back what an admission took (units, a lease), so that a waiter that did not get to go consumes nothing. */
  private async giveBack(waiter: Waiter, decision: Decision): Promise<void> {
    const options = { cost: waiter.cost, rules: waiter.rules };
    const leaseId = decision.leaseId;
    await Promise.allSettled([
      this.limiter.refund(waiter.keys, options),
      leaseId === undefined ? undefined : this.limiter.release(waiter.keys, leaseId, options),
    ]);
  }

  /** ERR_FG_WAIT_TIMEOUT for a first waiter whose `maxWaitMs` was up by its turn; `decision` is the line's last answer. */
  private expired(decision: Decision, waiter: Waiter): RateLimitedError {
    const lateMs = this.clock.now() - waiter.deadline;
    return new RateLimitedError(decision, {
      code: ErrorCodes.WAIT_TIMEOUT,
      retryAfterMs: 0,
      message: `Not admitted within maxWaitMs (${waiter.maxWaitMs} ms): its turn came ${lateMs} ms too late, the store being slow to decide the calls ahead of it (${ruleOf(decision)}); it was not asked for. Wait longer, or look at the store's latency.`,
    });
  }

  /**
   * ERR_FG_WAIT_TIMEOUT for a waiter: from its own answer (`own`: the denial,
   * or the shaping delay, and how long it says), or, for one behind others,
   * from the line's next try (`own` is then the number of waiters ahead).
   */
  private timeout(line: Line, waiter: Waiter, own: number | { decision: Decision; waitMs: number }): RateLimitedError {
    let decision: Decision;
    let waitMs: number;
    let why: string;
    if (typeof own === 'number') {
      decision = line.lastDenial as Decision;
      waitMs = Math.max(0, line.retryAt - this.clock.now());
      why = `${own} call(s) wait ahead of it on this key, and the first of them is admitted no sooner than in ${waitMs} ms (${ruleOf(decision)})`;
    } else {
      ({ decision, waitMs } = own);
      why = decision.allowed ? `${ruleOf(decision)} shapes it to go in ${waitMs} ms` : `${ruleOf(decision)} admits it in ${waitMs} ms at the earliest`;
    }
    return new RateLimitedError(decision, {
      code: ErrorCodes.WAIT_TIMEOUT,
      retryAfterMs: waitMs,
      message: `Not admitted within maxWaitMs (${waiter.maxWaitMs} ms): ${why}. Wait longer, or lower the cost.`,
    });
  }
}

/** Where a newcomer of this priority goes: behind every waiter of its priority or higher, and never before a first waiter being decided. */
function placeOf(line: Line, priority: number): number {
  const first = line.asking !== undefined && line.waiting[0] === line.asking ? 1 : 0;
  let at = line.waiting.length;
  while (at > first && (line.waiting[at - 1] as Waiter).priority < priority) at--;
  return at;
}

/** Whether the first waiter, just denied, has one of a higher priority behind it (it came while the first was being decided). */
function outranked(line: Line): boolean {
  return line.waiting.length > 1 && (line.waiting[1] as Waiter).priority > (line.waiting[0] as Waiter).priority;
}

function closedError(): FloodgateError {
  return new FloodgateError(ErrorCodes.CLOSED, 'The limiter was closed while this call waited to be admitted (limiter.close()); it was not admitted.');
}

/** Held waiters in order of their due time (a shaping rule hands out later slots to later calls, so this is nearly always a push). */
function insertByDue(held: Waiter[], waiter: Waiter): void {
  let i = held.length;
  while (i > 0 && (held[i - 1] as Waiter).dueAt > waiter.dueAt) i--;
  held.splice(i, 0, waiter);
}
