import { ErrorCodes, FloodgateError, type RuleDecision, type Store } from '@floodgate/core';
import type { CompiledRule, RuleSet, StoreKeys, StoreRecords } from '@floodgate/core/store';
import { decisionsOf, STATE_VERSION, stateSizeOf } from '@floodgate/core/store';
import { type Answer, type Call, callUrl, decodeVerdict, type Operation, ruleOptionsOf } from './protocol.js';

/** A Durable Object stub, as `namespace.get(id)` hands it out: only its fetch is used. */
export interface DurableObjectStubLike {
  fetch(url: string, init: { method: 'POST'; body: string; headers: Record<string, string> }): Promise<Response>;
}

/** A Durable Object namespace binding (`env.FLOODGATE`), bound to FloodgateDurableObject. */
export interface DurableObjectNamespaceLike {
  idFromName(name: string): unknown;
  get(id: never): DurableObjectStubLike;
}

export interface DurableObjectStoreOptions {
  /** The binding of FloodgateDurableObject in your Worker's environment (`env.FLOODGATE`). */
  namespace: DurableObjectNamespaceLike;
  /**
   * Where keys live. Unset (default): each key in an object of its own, so
   * that the load spreads over as many objects as there are keys (a Durable
   * Object serves one call at a time, about a thousand a second). A number:
   * that many objects, each holding the keys whose hash falls to it (fewer
   * objects to wake, a cap on each one's load). Changing it moves keys to other
   * objects, where they start over.
   */
  shards?: number;
  /** Prepended to every object name: stores with different prefixes share no object. @defaultValue '' */
  prefix?: string;
  /**
   * Whose clock decides. `'server'` (default): the Durable Object's own,
   * the same for every Worker that calls it. `'client'`: the limiter's
   * `now()`, for tests and replays.
   * @defaultValue 'server'
   */
  clock?: 'server' | 'client';
}

/** Per rule set: where each rule's state lives in an object, and its options as they travel. */
interface Prepared {
  /** Per rule: the storage key of its state, before the store key. */
  readonly heads: readonly string[];
  readonly options: readonly ReturnType<typeof ruleOptionsOf>[];
}

/** The rules of a call that one object holds. */
interface Batch {
  readonly object: string;
  /** Indexes of the rules in the rule set. */
  readonly rules: number[];
  readonly call: Array<readonly [ReturnType<typeof ruleOptionsOf>, string]>;
  global: boolean;
}

type Verdicts = NonNullable<ReturnType<typeof decodeVerdict>>[];

const describe = (value: unknown): string => (typeof value === 'string' ? `'${value}'` : String(value));

/** FNV-1a over UTF-16 code units: the same shard for a key in every runtime. */
function hash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/**
 * Limiter state in Cloudflare Durable Objects, shared by every Worker of
 * every location that has the binding. A call goes to the object that holds
 * its key (one object per key, or per shard of keys), which decides it with
 * the same TypeScript algorithms as MemoryStore, all rules at once, all or
 * nothing, blocks (blockMs, maxBlockMs) included, and keeps the state in its
 * transactional storage. Calls of one object run one at a time, so a limit
 * holds exactly under any concurrency.
 *
 * A call whose rules count under several scopes (`consume({ ip, user })`)
 * may span several objects: they are called in turn, the object of `global`
 * rules last, and when one denies, those that admitted give back what they
 * took before `consume()` returns (as RedisStore does across Cluster slots):
 * no rule ever admits past its limit. Every object's denying rules start
 * their blocks, as in one object.
 *
 * @example
 * ```ts
 * import { withRateLimit } from '@floodgate/fetch';
 * import { DurableObjectStore } from '@floodgate/cloudflare';
 * export { FloodgateDurableObject } from '@floodgate/cloudflare';
 *
 * export default {
 *   fetch: (request: Request, env: { FLOODGATE: DurableObjectNamespace }) =>
 *     withRateLimit(handler, { limit: 100, windowMs: 60_000, store: new DurableObjectStore({ namespace: env.FLOODGATE }) })(request),
 * };
 * ```
 */
export class DurableObjectStore implements Store {
  private readonly namespace: DurableObjectNamespaceLike;
  private readonly shards: number | undefined;
  private readonly prefix: string;
  private readonly clientClock: boolean;
  private readonly prepared = new WeakMap<RuleSet, Prepared>();

  constructor(options: DurableObjectStoreOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new FloodgateError(ErrorCodes.OPTION, `DurableObjectStore takes { namespace }, got ${describe(options)}.`);
    }
    for (const key of Object.keys(options)) {
      if (key !== 'namespace' && key !== 'shards' && key !== 'prefix' && key !== 'clock') {
        throw new FloodgateError(ErrorCodes.UNKNOWN_OPTION, `DurableObjectStore has no option '${key}'; it takes namespace, shards, prefix and clock.`);
      }
    }
    const { namespace, shards, prefix = '', clock = 'server' } = options;
    if (typeof namespace?.idFromName !== 'function' || typeof namespace.get !== 'function') {
      throw new FloodgateError(
        ErrorCodes.OPTION,
        `DurableObjectStore namespace must be a Durable Object namespace binding (env.FLOODGATE, bound to FloodgateDurableObject), got ${describe(namespace)}.`,
      );
    }
    if (shards !== undefined && (!Number.isSafeInteger(shards) || shards < 1)) {
      throw new FloodgateError(
        ErrorCodes.OPTION,
        `DurableObjectStore shards must be a positive integer (or unset: one object per key), got ${describe(shards)}.`,
      );
    }
    if (typeof prefix !== 'string') throw new FloodgateError(ErrorCodes.OPTION, `DurableObjectStore prefix must be a string, got ${describe(prefix)}.`);
    if (clock !== 'server' && clock !== 'client') {
      throw new FloodgateError(ErrorCodes.OPTION, `DurableObjectStore clock must be 'server' or 'client', got ${describe(clock)}.`);
    }
    this.namespace = namespace;
    this.shards = shards;
    this.prefix = prefix;
    this.clientClock = clock === 'client';
  }

  /** The name of the object that holds a store key of a limiter (for inspection and tests). */
  objectName(storeKey: string, ruleSet: Pick<RuleSet, 'prefix'>): string {
    const name = `${ruleSet.prefix}${storeKey}`;
    return this.shards === undefined ? `${this.prefix}key:${name}` : `${this.prefix}shard:${hash(name) % this.shards}/${this.shards}`;
  }

  async consume(keys: StoreKeys, ruleSet: RuleSet, cost: number, now: number, leaseId = ''): Promise<RuleDecision[]> {
    const batches = this.batches(keys, ruleSet);
    if (batches.length === 1) {
      const [admitted, verdicts] = await this.decide(batches[0] as Batch, 'consume', cost, now, leaseId);
      return this.decisions(ruleSet, batches, [verdicts], admitted ? 'admitted' : 'unchanged');
    }
    // Several objects: in turn, the object of `global` rules (shared by every client) last. When one
    // denies, the objects that admitted give back what they took before this call returns, and the
    // objects not asked yet are told the call was denied: they record nothing, but start their rules'
    // blocks, as one object holding every rule would.
    const replies: Verdicts[] = [];
    const undo = crypto.randomUUID();
    let denied = false;
    for (const batch of batches) {
      const [admitted, verdicts] = await this.decide(batch, 'consume', cost, now, leaseId, undo);
      replies.push(verdicts);
      if (!admitted) {
        denied = true;
        break;
      }
    }
    if (denied) {
      const taken = batches.slice(0, replies.length - 1);
      await Promise.all(taken.map((batch) => this.send(batch, 'undo', cost, now, leaseId, undo)));
      for (const batch of batches.slice(replies.length)) replies.push((await this.decide(batch, 'deny', cost, now, ''))[1]);
    }
    return this.decisions(ruleSet, batches, replies, denied ? 'unchanged' : 'admitted');
  }

  async peek(keys: StoreKeys, ruleSet: RuleSet, now: number): Promise<RuleDecision[]> {
    const batches = this.batches(keys, ruleSet);
    const replies = await Promise.all(batches.map(async (batch) => (await this.decide(batch, 'peek', 1, now, ''))[1]));
    return this.decisions(ruleSet, batches, replies, 'peek');
  }

  async refund(keys: StoreKeys, ruleSet: RuleSet, cost: number, now: number): Promise<void> {
    await Promise.all(this.batches(keys, ruleSet).map((batch) => this.send(batch, 'refund', cost, now, '')));
  }

  async release(keys: StoreKeys, ruleSet: RuleSet, leaseId: string, now: number): Promise<void> {
    const batches = this.batches(keys, ruleSet).filter((batch) => batch.rules.some((i) => ruleSet.rules[i]?.algorithm === 'concurrency'));
    await Promise.all(batches.map((batch) => this.send(batch, 'release', 1, now, leaseId)));
  }

  async reset(keys: StoreKeys, ruleSet: RuleSet): Promise<void> {
    await Promise.all(this.batches(keys, ruleSet).map((batch) => this.send(batch, 'reset', 1, 0, '')));
  }

  async block(keys: StoreKeys, ruleSet: RuleSet, ms: number, now: number): Promise<void> {
    await Promise.all(this.batches(keys, ruleSet).map((batch) => this.send(batch, 'block', ms, now, '')));
  }

  async unblock(keys: StoreKeys, ruleSet: RuleSet, now: number): Promise<void> {
    await Promise.all(this.batches(keys, ruleSet).map((batch) => this.send(batch, 'unblock', 1, now, '')));
  }

  private prepare(ruleSet: RuleSet): Prepared {
    let prepared = this.prepared.get(ruleSet);
    if (prepared === undefined) {
      // As MemoryStore's tables: state is found by what shapes it (rule name, algorithm, state size),
      // so a hot update that keeps a rule's name and algorithm keeps its keys' state; and by the
      // version of the encoding its value is in, so that no build reads another's encoding.
      prepared = {
        heads: ruleSet.rules.map(
          (rule) => `e:v${STATE_VERSION}\u0000${ruleSet.prefix}\u0000${rule.name}\u0000${rule.algorithm}\u0000${stateSizeOf(rule)}\u0000`,
        ),
        options: ruleSet.rules.map(ruleOptionsOf),
      };
      this.prepared.set(ruleSet, prepared);
    }
    return prepared;
  }

  /** The rules of a call by the object that holds them, in rule order, but the object of `global` rules last. */
  private batches(keys: StoreKeys, ruleSet: RuleSet): Batch[] {
    const prepared = this.prepare(ruleSet);
    const byObject = new Map<string, Batch>();
    ruleSet.rules.forEach((rule, i) => {
      const storeKey = typeof keys === 'string' ? keys : (keys[i] as string);
      const object = this.objectName(storeKey, ruleSet);
      let batch = byObject.get(object);
      if (batch === undefined) {
        batch = { object, rules: [], call: [], global: false };
        byObject.set(object, batch);
      }
      batch.rules.push(i);
      batch.call.push([prepared.options[i] as ReturnType<typeof ruleOptionsOf>, `${prepared.heads[i]}${storeKey}`]);
      if (rule.scope === 'global') batch.global = true;
    });
    const batches = [...byObject.values()];
    return batches.length === 1 ? batches : batches.sort((a, b) => Number(a.global) - Number(b.global));
  }

  /** A consume, peek or deny of one object: whether its rules admit the call, and their verdicts, checked. */
  private async decide(batch: Batch, op: 'consume' | 'peek' | 'deny', cost: number, now: number, leaseId: string, undo?: string): Promise<[boolean, Verdicts]> {
    const answer = await this.send(batch, op, cost, now, leaseId, undo);
    const verdicts = Array.isArray(answer.verdicts) ? answer.verdicts.map(decodeVerdict) : [];
    if ((answer.admitted !== 0 && answer.admitted !== 1) || verdicts.length !== batch.rules.length || verdicts.some((v) => v === undefined)) {
      throw new FloodgateError(
        ErrorCodes.STORE_REPLY,
        `The Durable Object '${batch.object}' answered ${JSON.stringify(answer).slice(0, 200)}, not a decision.`,
      );
    }
    const decoded = verdicts as Verdicts;
    if (decoded.every((v) => v.allowed) !== (answer.admitted === 1)) {
      throw new FloodgateError(ErrorCodes.STORE_REPLY, `The Durable Object '${batch.object}' answered an admitted flag its verdicts do not bear out.`);
    }
    return [answer.admitted === 1, decoded];
  }

  /**
   * Records (blocks by hand and their reasons), in one object of their own
   * (`<prefix>records`): they are few, and listing them needs them in one place.
   */
  readonly records: StoreRecords = {
    set: async (name, value, ttlMs) => {
      await this.recordCall({ op: 'set', name, value, ttlMs: Math.max(1, Math.ceil(ttlMs)) });
    },
    get: async (names) => {
      if (names.length === 0) return [];
      const { values } = (await this.recordCall({ op: 'get', names })) as { values?: unknown };
      if (!Array.isArray(values) || values.length !== names.length) throw new FloodgateError(ErrorCodes.STORE_REPLY, 'The records object answered no values.');
      return values.map((value) => (typeof value === 'string' ? value : null));
    },
    delete: async (names) => {
      if (names.length > 0) await this.recordCall({ op: 'delete', names });
    },
    list: async (prefix, after, count) => {
      const { records, next } = (await this.recordCall({ op: 'list', prefix, after, count })) as { records?: unknown; next?: unknown };
      if (!Array.isArray(records) || typeof next !== 'string') throw new FloodgateError(ErrorCodes.STORE_REPLY, 'The records object answered no list.');
      return { records: records as [string, string][], next };
    },
  };

  private async recordCall(call: object): Promise<unknown> {
    const stub = this.namespace.get(this.namespace.idFromName(`${this.prefix}records`) as never);
    const response = await stub.fetch('https://floodgate.internal/records', {
      method: 'POST',
      body: JSON.stringify(call),
      headers: { 'content-type': 'application/json' },
    });
    const answer = (await response.json()) as { error?: string };
    if (!response.ok) throw new Error(`The Durable Object of records answered ${response.status}: ${String(answer.error).slice(0, 300)}`);
    return answer;
  }

  /** One call of one object: a POST to its stub. */
  private async send(batch: Batch, op: Operation, cost: number, now: number, lease: string, undo?: string): Promise<Answer> {
    const call: Call = { op, now: this.clientClock ? now : null, cost, lease, rules: batch.call, ...(undo === undefined ? {} : { undo }) };
    const stub = this.namespace.get(this.namespace.idFromName(batch.object) as never);
    const response = await stub.fetch(callUrl(op), { method: 'POST', body: JSON.stringify(call), headers: { 'content-type': 'application/json' } });
    const text = await response.text();
    if (!response.ok) {
      let said = text;
      try {
        said = (JSON.parse(text) as { error?: string }).error ?? text;
      } catch {
        // not JSON: the runtime's own page
      }
      throw new Error(`The Durable Object '${batch.object}' answered ${response.status}: ${said.slice(0, 300)}`);
    }
    try {
      return JSON.parse(text) as Answer;
    } catch {
      throw new FloodgateError(ErrorCodes.STORE_REPLY, `The Durable Object '${batch.object}' answered ${text.slice(0, 200)}, not JSON.`);
    }
  }

  /**
   * Every rule's decision from the objects' verdicts, as MemoryStore reports
   * them: a recorded call reports the state after it; a peek, a denied call,
   * and the rules of a call denied by another object report the state now.
   */
  private decisions(ruleSet: RuleSet, batches: Batch[], replies: Verdicts[], how: 'admitted' | 'unchanged' | 'peek'): RuleDecision[] {
    const decisions = new Array<RuleDecision>(ruleSet.rules.length);
    const op = how === 'admitted' ? 'consume' : how === 'peek' ? 'peek' : 'deny';
    batches.forEach((batch, b) => {
      const rules = batch.rules.map((i) => ruleSet.rules[i] as CompiledRule);
      const verdicts = (replies[b] as Verdicts).map((v) => ({ ...v, ttlMs: 0 }));
      decisionsOf({ op, rules }, { admitted: how === 'admitted', verdicts }).forEach((decision, at) => {
        decisions[batch.rules[at] as number] = decision;
      });
    });
    return decisions;
  }
}
