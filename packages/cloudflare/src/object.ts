import { type CompiledRule, compileRule, decodeEntry, encodeEntry, endOf, evaluate } from '@floodgate/core/store';
import { type Answer, type Call, encodeVerdict, type Operation } from './protocol.js';

/** The part of a Durable Object's storage (`ctx.storage`) the object uses: its key-value API, and alarms. */
export interface DurableObjectStorageLike {
  get(keys: string[]): Promise<Map<string, unknown>>;
  put(entries: Record<string, unknown>): Promise<void>;
  delete(keys: string[]): Promise<number>;
  list(options: { prefix?: string; startAfter?: string; limit?: number }): Promise<Map<string, unknown>>;
  getAlarm(): Promise<number | null>;
  setAlarm(scheduledTime: number): Promise<void>;
}

/** The state a Durable Object is constructed with (`ctx`): only its storage is used. */
export interface DurableObjectStateLike {
  readonly storage: DurableObjectStorageLike;
}

/**
 * One key's state under one rule, as stored: when the object may forget it
 * (its state has ended and its block is forgotten, on the clock of the
 * calls), and the entry in the engine's text encoding (@floodgate/core/store),
 * which only its rule can read. Storage keys carry the encoding's version
 * (DurableObjectStore puts it there), so a value of another build's encoding
 * is never read: the sweep drops such values once they are found.
 */
type Stored = readonly [end: number, text: string];

const isStored = (value: unknown): value is Stored =>
  Array.isArray(value) && value.length === 2 && typeof value[0] === 'number' && typeof value[1] === 'string';

/** Storage keys: entries under `e:`, records under `r:`, and the object's own record of the calls' clock. */
const ENTRY = 'e:';
const RECORD = 'r:';

/** A call of the store's records (see record()). */
interface RecordCall {
  op?: unknown;
  name?: unknown;
  names?: unknown;
  value?: unknown;
  ttlMs?: unknown;
  prefix?: unknown;
  after?: unknown;
  count?: unknown;
}
const CLOCK = 'm:clock';
/** Keys per get, put and delete: the storage API takes at most 128. */
const BATCH = 128;
/** The clock of the calls is written again when it has moved this far from the object's (see noteClock). */
const CLOCK_SLACK_MS = 1_000;

class BadCall extends Error {}

/**
 * The Durable Object behind DurableObjectStore. It holds the state of the
 * keys the store sends it (one key, or a shard of keys), decides each call
 * with the pure algorithms of @floodgate/core, composed all or nothing as
 * MemoryStore composes them (the same decisions, field by field), blocks
 * (blockMs, maxBlockMs) included: a key's block is kept beside its state, as
 * MemoryStore keeps it. Every state is kept in its transactional storage,
 * written before the answer leaves (so an evicted or restarted object loses
 * nothing). One alarm drops the states that have ended and the blocks
 * forgotten, so that storage does not grow without bound.
 *
 * Export it from your Worker and bind it in your wrangler config; it needs no
 * configuration of its own (rules travel with each call).
 *
 * @example
 * ```ts
 * // worker.ts
 * export { FloodgateDurableObject } from '@floodgate/cloudflare';
 * // wrangler.jsonc
 * // "durable_objects": { "bindings": [{ "name": "FLOODGATE", "class_name": "FloodgateDurableObject" }] },
 * // "migrations": [{ "tag": "v1", "new_sqlite_classes": ["FloodgateDurableObject"] }]
 * ```
 */
export class FloodgateDurableObject {
  /**
   * Least time between two sweeps of ended state, in ms: a sweep reads every
   * entry the object holds, so an object of many keys is not swept for each.
   * A subclass may change it.
   */
  protected sweepIntervalMs = 5_000;
  /** Entries kept in memory besides storage, which holds them all. A subclass may change it. */
  protected maxCachedEntries = 10_000;

  private readonly storage: DurableObjectStorageLike;
  /** Values read or written, or known to be absent (null): storage is written through, so this never disagrees with it. */
  private readonly cache = new Map<string, Stored | null>();
  private readonly rules = new Map<string, CompiledRule>();
  /** The clock of the calls minus the object's own (0 on the object's clock), or undefined until read. */
  private offset: number | undefined;
  /** When the alarm is set for (the object's clock), null for none, undefined until read. */
  private alarmAt: number | null | undefined;
  /** When the object last swept, or started: as MemoryStore's sweeper, the first sweep comes sweepIntervalMs after the start. */
  private lastSweep = Date.now();
  /** What recent consumes named `undo` replaced: per key, the value before and the value they wrote. */
  private readonly undoable = new Map<string, { key: string; before: Stored | null; after: Stored | null }[]>();
  /** Calls and sweeps, one at a time: each reads, decides and writes before the next starts. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(ctx: DurableObjectStateLike, _env?: unknown) {
    this.storage = ctx.storage;
  }

  /** One call of the store: a POST of a JSON call, answered with JSON. A GET answers what inspect() says. */
  async fetch(request: Request): Promise<Response> {
    if (request.method === 'GET') return Response.json(await this.inspect());
    if (new URL(request.url).pathname === '/records') {
      try {
        const call = (await request.json()) as RecordCall;
        return Response.json(await this.serially(() => this.record(call)));
      } catch (error) {
        return Response.json({ error: messageOf(error) }, { status: 400 });
      }
    }
    let call: Call;
    try {
      call = this.parse(await request.json());
    } catch (error) {
      return Response.json({ error: `Floodgate's Durable Object takes calls of DurableObjectStore: ${messageOf(error)}` }, { status: 400 });
    }
    try {
      return Response.json(
        await this.serially(async () => {
          const answer = await this.handle(call);
          this.trim(); // after the decision: nothing leaves memory between a call's read and its decision
          return answer;
        }),
      );
    } catch (error) {
      return Response.json({ error: messageOf(error) }, { status: error instanceof BadCall ? 400 : 500 });
    }
  }

  /**
   * The store's records (blocks by hand and their reasons), in the object
   * DurableObjectStore keeps them in: under `r:`, each [expires (the
   * object's clock), value]. One that has expired reads as none, and goes
   * when a call comes across it.
   */
  private async record(call: RecordCall): Promise<unknown> {
    const now = Date.now();
    const names = Array.isArray(call.names) ? call.names.filter((name): name is string => typeof name === 'string') : [];
    if (call.op === 'set') {
      if (typeof call.name !== 'string' || typeof call.value !== 'string' || !Number.isSafeInteger(call.ttlMs) || (call.ttlMs as number) < 1) {
        throw new BadCall('set takes a name, a value and a ttlMs');
      }
      await this.storage.put({ [RECORD + call.name]: [now + (call.ttlMs as number), call.value] });
      return {};
    }
    if (call.op === 'delete') {
      for (let i = 0; i < names.length; i += BATCH) await this.storage.delete(names.slice(i, i + BATCH).map((name) => RECORD + name));
      return {};
    }
    const live = async (found: Map<string, unknown>): Promise<Map<string, string>> => {
      const values = new Map<string, string>();
      const expired: string[] = [];
      for (const [key, stored] of found) {
        if (isStored(stored) && stored[0] > now) values.set(key.slice(RECORD.length), stored[1]);
        else expired.push(key);
      }
      if (expired.length > 0) await this.storage.delete(expired);
      return values;
    };
    if (call.op === 'get') {
      const values = new Map<string, string>();
      for (let i = 0; i < names.length; i += BATCH) {
        for (const [name, value] of await live(await this.storage.get(names.slice(i, i + BATCH).map((name) => RECORD + name)))) values.set(name, value);
      }
      return { values: names.map((name) => values.get(name) ?? null) };
    }
    if (
      call.op !== 'list' ||
      typeof call.prefix !== 'string' ||
      typeof call.after !== 'string' ||
      !Number.isSafeInteger(call.count) ||
      (call.count as number) < 1
    ) {
      throw new BadCall('a records call is set, get, delete or list (prefix, after, count)');
    }
    const count = call.count as number;
    const page = await this.storage.list({ prefix: RECORD + call.prefix, limit: count + 1, ...(call.after === '' ? {} : { startAfter: RECORD + call.after }) });
    const keys = [...page.keys()];
    const records = [...(await live(new Map([...page].slice(0, count))))];
    return { records, next: keys.length > count ? (keys[count - 1] as string).slice(RECORD.length) : '' };
  }

  /** The alarm: drops every entry that has ended, and sets the next alarm for the next to end. */
  async alarm(): Promise<void> {
    await this.serially(() => this.sweep());
  }

  /** How many entries the object holds, and when its alarm is set for (for tests and metrics). */
  async inspect(): Promise<{ entries: number; alarm: number | null }> {
    return this.serially(async () => {
      let entries = 0;
      await this.eachEntry(async (page) => {
        entries += page.size;
      });
      return { entries, alarm: await this.storage.getAlarm() };
    });
  }

  private serially<T>(work: () => Promise<T>): Promise<T> {
    const run = this.queue.then(work);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private parse(body: unknown): Call {
    const call = body as Partial<Call> | null;
    const ops: readonly Operation[] = ['consume', 'peek', 'deny', 'refund', 'release', 'undo', 'reset', 'block', 'unblock'];
    if (typeof call !== 'object' || call === null || !ops.includes(call.op as Operation)) throw new BadCall('no known op');
    if (call.now !== null && !Number.isSafeInteger(call.now)) throw new BadCall('now must be an integer of ms or null');
    if (!Number.isSafeInteger(call.cost) || (call.cost as number) < 1) throw new BadCall('cost must be a positive integer');
    if (typeof call.lease !== 'string') throw new BadCall('lease must be a string');
    if (!Array.isArray(call.rules) || call.rules.length === 0) throw new BadCall('rules must be a non-empty list');
    if (call.undo !== undefined && typeof call.undo !== 'string') throw new BadCall('undo must be a string');
    for (const rule of call.rules) {
      if (!Array.isArray(rule) || typeof rule[1] !== 'string' || !rule[1].startsWith(ENTRY)) throw new BadCall('each rule is [options, storage key]');
    }
    return call as Call;
  }

  /** A rule from its options: compiled once (validated like the limiter's own), kept while the object lives. */
  private compiled(options: unknown): CompiledRule {
    const text = JSON.stringify(options);
    let rule = this.rules.get(text);
    if (rule === undefined) {
      try {
        rule = compileRule(options, 'rule');
      } catch (error) {
        throw new BadCall(messageOf(error));
      }
      if (this.rules.size >= 1_000) this.rules.clear();
      this.rules.set(text, rule);
    }
    return rule;
  }

  private async handle(call: Call): Promise<Answer> {
    const keys = call.rules.map(([, key]) => key);
    if (call.op === 'reset') {
      this.remove(keys); // the blocks with the states: a reset lifts a block
      return {};
    }
    const rules = call.rules.map(([options]) => this.compiled(options));
    await this.load(keys);
    const now = call.now ?? Date.now();
    this.noteClock(now);
    if (call.op === 'undo' && call.undo !== undefined && this.restore(call.undo)) return {};
    const before = keys.map((key) => this.cache.get(key) ?? null);
    const entries = before.map((stored, i) => (stored === null ? null : decodeEntry(rules[i] as CompiledRule, stored[1])));
    // The engine decides, as every store of Floodgate does; the object keeps what it says.
    const outcome = evaluate({ op: call.op, rules, now, cost: call.cost, leaseId: call.lease }, entries);
    outcome.writes.forEach((entry, i) => {
      if (entry !== undefined) this.write(keys[i] as string, entry === null ? null : [endOf(entry), encodeEntry(rules[i] as CompiledRule, entry)]);
    });
    if (call.op === 'consume' && outcome.admitted && call.undo !== undefined) {
      this.remember(
        call.undo,
        keys.map((key, i) => ({ key, before: before[i] ?? null, after: this.cache.get(key) ?? null })),
      );
    }
    const decided: readonly Operation[] = ['consume', 'peek', 'deny'];
    return decided.includes(call.op) ? { admitted: outcome.admitted ? 1 : 0, verdicts: outcome.verdicts.map(encodeVerdict) } : {};
  }

  /** Notes what a consume that may be undone replaced and wrote, for a few recent consumes. */
  private remember(token: string, changes: { key: string; before: Stored | null; after: Stored | null }[]): void {
    if (this.undoable.size >= 256) this.undoable.delete(this.undoable.keys().next().value as string);
    this.undoable.set(token, changes);
  }

  /**
   * Puts back the states a consume replaced, if every one of them is still
   * what that consume wrote; else (another call changed them since, or the
   * object restarted) the undo is a refund and a release, as on Redis.
   */
  private restore(token: string): boolean {
    const changes = this.undoable.get(token);
    this.undoable.delete(token);
    if (changes === undefined || !changes.every(({ key, after }) => this.cache.get(key) === after)) return false;
    for (const { key, before } of changes) this.write(key, before);
    return true;
  }

  /** Lets the oldest entries go from memory (storage keeps them) once there are more than maxCachedEntries. */
  private trim(): void {
    for (const key of this.cache.keys()) {
      if (this.cache.size <= this.maxCachedEntries) return;
      this.cache.delete(key);
    }
  }

  /** Reads the entries of `keys` that are not in memory: one storage read, at most, per call. */
  private async load(keys: readonly string[]): Promise<void> {
    const missing = keys.filter((key) => !this.cache.has(key));
    if (this.offset === undefined) missing.push(CLOCK);
    if (missing.length === 0 && this.alarmAt !== undefined) return;
    const [found, alarm] = await Promise.all([
      missing.length > 0 ? this.storage.get(missing) : new Map<string, unknown>(),
      this.alarmAt === undefined ? this.storage.getAlarm() : this.alarmAt,
    ]);
    this.alarmAt = alarm;
    if (this.offset === undefined) {
      const offset = found.get(CLOCK);
      this.offset = typeof offset === 'number' ? offset : undefined;
    }
    for (const key of missing) {
      if (key === CLOCK || this.cache.has(key)) continue;
      const value = found.get(key);
      // A value this object could not have written reads as no state, and is overwritten by the next call.
      this.cache.set(key, isStored(value) ? value : null);
    }
  }

  /**
   * Notes how the clock of the calls (the limiter's, with clock: 'client')
   * stands to the object's, so that the alarm, which runs on the object's
   * clock, can tell which states have ended on the calls' clock. Written to
   * storage only when it has moved by more than a second.
   */
  private noteClock(now: number): void {
    const offset = now - Date.now();
    if (this.offset !== undefined && Math.abs(offset - this.offset) <= CLOCK_SLACK_MS) return;
    this.offset = offset;
    void this.storage.put({ [CLOCK]: offset });
  }

  /**
   * Keeps a key's state, or forgets it (null). Not awaited: the runtime's
   * output gate holds the answer until storage has the write, and orders
   * reads after it, so that the next call can decide from memory at once.
   */
  private write(key: string, stored: Stored | null): void {
    if (stored === null) {
      this.remove([key]);
      return;
    }
    this.cache.set(key, stored);
    void this.storage.put({ [key]: stored });
    this.alarmFor(stored[0]);
  }

  private remove(keys: readonly string[]): void {
    for (const key of keys) this.cache.set(key, null);
    for (let i = 0; i < keys.length; i += BATCH) void this.storage.delete(keys.slice(i, i + BATCH));
  }

  /** Sets the alarm for when a state ends (on the calls' clock), unless it is set sooner; never sooner than sweepIntervalMs after the last sweep. */
  private alarmFor(expiresAt: number): void {
    const at = Math.max(Math.ceil(expiresAt - (this.offset ?? 0)), this.lastSweep + this.sweepIntervalMs);
    if (this.alarmAt !== null && this.alarmAt !== undefined && this.alarmAt <= at) return;
    this.alarmAt = at;
    void this.storage.setAlarm(at);
  }

  private async sweep(): Promise<void> {
    const clock = Date.now();
    this.alarmAt = null;
    this.lastSweep = clock;
    if (this.offset === undefined) {
      const offset = (await this.storage.get([CLOCK])).get(CLOCK);
      this.offset = typeof offset === 'number' ? offset : 0;
    }
    const now = clock + this.offset;
    let next = Number.POSITIVE_INFINITY;
    await this.eachEntry(async (page) => {
      const ended: string[] = [];
      for (const [key, value] of page) {
        if (!isStored(value) || value[0] <= now) ended.push(key);
        else next = Math.min(next, value[0]);
      }
      if (ended.length > 0) this.remove(ended);
    });
    if (next !== Number.POSITIVE_INFINITY) this.alarmFor(next);
  }

  /** Every entry in storage, a page at a time. */
  private async eachEntry(visit: (page: Map<string, unknown>) => Promise<void>): Promise<void> {
    let startAfter: string | undefined;
    for (;;) {
      const page = await this.storage.list({ prefix: ENTRY, limit: 1_000, ...(startAfter === undefined ? {} : { startAfter }) });
      await visit(page);
      if (page.size < 1_000) return;
      startAfter = [...page.keys()].pop();
    }
  }
}

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));
