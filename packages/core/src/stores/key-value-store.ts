import { decodeEntry, encodeEntry, STATE_VERSION } from '../codec.js';
import { decisionsOf, endOf, evaluate, type Operation } from '../engine.js';
import { describe, ErrorCodes, FloodgateError } from '../errors.js';
import type { CompiledRule } from '../rules.js';
import { KeyQueue } from './key-queue.js';
import { keyOfRule, type RuleDecision, type RuleSet, type Store, type StoreKeys, type StoreRecords } from './types.js';

/** A call waiting for its transaction. */
interface Pending {
  readonly storageKeys: readonly string[];
  readonly op: Operation;
  readonly rules: readonly CompiledRule[];
  readonly cost: number;
  /** The limiter's clock. */
  readonly now: number;
  readonly leaseId: string;
}

/** One write of a transaction: a new value for a key, or null to delete it. */
export interface StateWrite {
  readonly key: string;
  /** The new value (an encoded entry), or null: delete the key. */
  readonly value: string | null;
  /** How long the backend must keep the value, from its own clock (ms, >= 1); after that it may delete it. 0 with a null value. */
  readonly ttlMs: number;
}

/** What a transaction's decision returns: the writes to make, all or none, and what `transact` resolves with. */
export interface StateChange<T> {
  readonly writes: readonly StateWrite[];
  readonly result: T;
}

/**
 * What a store over a transactional key-value system implements: atomic
 * access to the few text values of one call. Floodgate's engine does the
 * rest (every algorithm, all or nothing over rules and scopes, blocks,
 * leases, refunds, peeks). See docs/writing-a-store.md.
 */
export interface KeyValueBackend {
  /**
   * Reads the values of `keys` (null for a key that holds none, or whose
   * value has expired), calls `decide` with them and the backend's clock
   * (ms since the epoch), and makes the writes it returns, in one
   * transaction: no other transaction may change these keys between the
   * read and the writes. `decide` is pure and may be called more than once
   * (a backend that retries after a conflict). With `readOnly`, `decide`
   * returns no writes, and the backend may read without locking.
   */
  transact<T>(
    keys: readonly string[],
    decide: (values: readonly (string | null)[], now: number) => StateChange<T>,
    options: { readonly readOnly: boolean },
  ): Promise<T>;
  /**
   * A page of the keys that start with `prefix` and hold a value that has
   * not expired, with their values, in the order of the keys' code points
   * (a binary collation), from the first key after `after` ('' from the
   * start), at most `count`. Optional: without it the store keeps no
   * records (limiter.blocked() then says so).
   */
  list?(prefix: string, after: string, count: number): Promise<[key: string, value: string][]>;
  /** Releases what the backend owns (its pool, if it made one, and timers). */
  close?(): void | Promise<void>;
}

export interface KeyValueStoreOptions {
  /**
   * Whose clock decides. `'server'` (default): the backend's (the database's
   * clock), so app servers' clocks never matter. `'client'`: the limiter's
   * `now()`, at any epoch (tests, replays); the backend's clock then only
   * tells when a value may be deleted, from each write's ttlMs.
   * @defaultValue 'server'
   */
  clock?: 'server' | 'client';
  /** Prepended to every key, before the limiter's prefix. @defaultValue '' */
  prefix?: string;
}

/**
 * A Store over a transactional key-value backend: each call is one
 * `transact` over the keys of its rules, decided by the engine, its states
 * kept as text in one encoding (STATE_VERSION). Keys are
 * `${prefix}${limiterPrefix}{${key}}:${rule}:v${STATE_VERSION}`.
 *
 * @example
 * ```ts
 * class MyStore extends KeyValueStore {
 *   constructor() { super(new MyBackend()); }
 * }
 * const limiter = createLimiter({ limit: 100, windowMs: 60_000, store: new MyStore() });
 * ```
 */
export class KeyValueStore implements Store {
  private readonly backend: KeyValueBackend;
  private readonly clientClock: boolean;
  private readonly prefix: string;
  private readonly queue = new KeyQueue<Pending, RuleDecision[] | undefined>((_, batch) => this.transactBatch(batch));

  constructor(backend: KeyValueBackend, options: KeyValueStoreOptions = {}) {
    if (typeof backend?.transact !== 'function') {
      throw new FloodgateError(ErrorCodes.OPTION, `KeyValueStore takes a backend with a transact() method, got ${describe(backend)}.`);
    }
    const { clock = 'server', prefix = '' } = options;
    if (clock !== 'server' && clock !== 'client') {
      throw new FloodgateError(ErrorCodes.OPTION, `clock must be 'server' or 'client', got ${describe(clock)}.`);
    }
    if (typeof prefix !== 'string') throw new FloodgateError(ErrorCodes.OPTION, `prefix must be a string, got ${describe(prefix)}.`);
    this.backend = backend;
    this.clientClock = clock === 'client';
    this.prefix = prefix;
    this.records = this.recordsOf(backend);
  }

  consume(keys: StoreKeys, ruleSet: RuleSet, cost: number, now: number, leaseId = ''): Promise<RuleDecision[]> {
    return this.run('consume', keys, ruleSet, cost, now, leaseId) as Promise<RuleDecision[]>;
  }

  peek(keys: StoreKeys, ruleSet: RuleSet, now: number): Promise<RuleDecision[]> {
    return this.run('peek', keys, ruleSet, 1, now, '') as Promise<RuleDecision[]>;
  }

  async refund(keys: StoreKeys, ruleSet: RuleSet, cost: number, now: number): Promise<void> {
    await this.run('refund', keys, ruleSet, cost, now, '');
  }

  async release(keys: StoreKeys, ruleSet: RuleSet, leaseId: string, now: number): Promise<void> {
    // Only concurrency rules hold leases.
    if (ruleSet.rules.some((rule) => rule.algorithm === 'concurrency')) await this.run('release', keys, ruleSet, 1, now, leaseId);
  }

  async reset(keys: StoreKeys, ruleSet: RuleSet): Promise<void> {
    await this.run('reset', keys, ruleSet, 1, 0, '');
  }

  async block(keys: StoreKeys, ruleSet: RuleSet, ms: number, now: number): Promise<void> {
    await this.run('block', keys, ruleSet, ms, now, '');
  }

  async unblock(keys: StoreKeys, ruleSet: RuleSet, now: number): Promise<void> {
    await this.run('unblock', keys, ruleSet, 1, now, '');
  }

  async close(): Promise<void> {
    await this.backend.close?.();
  }

  /**
   * Records (blocks by hand and their reasons) under `${prefix}!records!`,
   * beside the states, when the backend can list its keys.
   */
  readonly records: StoreRecords | undefined;

  private recordsOf(backend: KeyValueBackend): StoreRecords | undefined {
    const list = backend.list;
    if (list === undefined) return undefined;
    const space = `${this.prefix}!records!`;
    const change = (names: readonly string[], value: string | null, ttlMs: number) =>
      backend.transact(
        names.map((name) => space + name),
        () => ({ writes: names.map((name) => ({ key: space + name, value, ttlMs })), result: undefined }),
        { readOnly: false },
      );
    return {
      set: (name, value, ttlMs) => change([name], value, Math.max(1, Math.ceil(ttlMs))),
      delete: (names) => (names.length === 0 ? undefined : change(names, null, 0)),
      get: (names) =>
        names.length === 0
          ? []
          : backend.transact(
              names.map((name) => space + name),
              (values) => ({ writes: [], result: [...values] }),
              { readOnly: true },
            ),
      list: async (prefix, after, count) => {
        const page = await list.call(backend, space + prefix, after === '' ? '' : space + after, count + 1);
        const records = page.slice(0, count).map(([key, value]): [string, string] => [key.slice(space.length), value]);
        return { records, next: page.length > count ? (records[records.length - 1]?.[0] ?? '') : '' };
      },
    };
  }

  /** The keys a call's states live under, in rule order (for inspection and tests). */
  keysOf(keys: StoreKeys, ruleSet: Pick<RuleSet, 'prefix' | 'rules'>): string[] {
    return ruleSet.rules.map((rule, i) => `${this.prefix}${ruleSet.prefix}{${keyOfRule(keys, i)}}:${rule.name}:v${STATE_VERSION}`);
  }

  private run(op: Operation, keys: StoreKeys, ruleSet: RuleSet, cost: number, now: number, leaseId: string): Promise<RuleDecision[] | undefined> {
    const storageKeys = this.keysOf(keys, ruleSet);
    return this.queue.push(storageKeys.join('\n'), { storageKeys, op, rules: ruleSet.rules, cost, now, leaseId });
  }

  /**
   * One transaction over the keys of a batch of calls (see key-queue.ts):
   * each call decided in turn on what the ones before it left, the states
   * that changed written once.
   */
  private transactBatch(batch: readonly Pending[]): Promise<(RuleDecision[] | undefined)[]> {
    const storageKeys = (batch[0] as Pending).storageKeys;
    return this.backend.transact(
      storageKeys,
      (read, serverNow) => {
        if (read.length !== storageKeys.length) {
          throw new FloodgateError(ErrorCodes.STORE_REPLY, `The backend read ${read.length} values for ${storageKeys.length} keys.`);
        }
        const values = [...read];
        const writes = new Map<number, StateWrite>();
        const results = batch.map(({ op, rules, cost, now, leaseId }) => {
          const at = this.clientClock ? now : Math.floor(serverNow);
          const call = { op, rules, now: at, cost, leaseId };
          const outcome = evaluate(
            call,
            values.map((value, i) => decodeEntry(rules[i] as CompiledRule, value)),
          );
          outcome.writes.forEach((entry, i) => {
            if (entry === undefined) return;
            const key = storageKeys[i] as string;
            const value = entry === null ? null : encodeEntry(rules[i] as CompiledRule, entry);
            values[i] = value;
            writes.set(i, { key, value, ttlMs: entry === null ? 0 : Math.max(1, endOf(entry) - at) });
          });
          return op === 'consume' || op === 'peek' ? decisionsOf(call, outcome) : undefined;
        });
        return { writes: [...writes.values()], result: results };
      },
      { readOnly: batch.every((pending) => pending.op === 'peek') },
    );
  }
}
