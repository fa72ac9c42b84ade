/*
 * @floodgate/cloudflare's DurableObjectStore as a store for tests that run
 * in Node (the store contract of @floodgate/core/testing): the store runs
 * inside workerd, in a Worker with a real Durable Object namespace
 * (packages/cloudflare/src/test-support/store-host.ts), and each Store method
 * called here is one POST to that Worker on loopback. What is tested is the
 * store and its objects as they run on Workers; only the limiter is in Node.
 *
 * The Worker is bundled from the workspace by path, not imported: a
 * dependency on @floodgate/cloudflare would make a cycle (it depends on
 * @floodgate/core, whose tests use this package).
 */
import { fileURLToPath } from 'node:url';
import { useWorkerd, type Workerd } from './workerd.js';

/** A decision of one rule, as stores answer it (RuleDecision in @floodgate/core). */
export interface RuleDecisionLike {
  name: string;
  scope: string;
  allowed: boolean;
  limit: number;
  remaining: number;
  resetMs: number;
  retryAfterMs: number;
  delayMs: number;
  blocked?: { blockMs: number; leftMs: number; strike: number; started: boolean };
}

/** What a limiter hands a store about its rules (RuleSet in @floodgate/core). */
export interface RuleSetLike {
  readonly prefix: string;
  readonly rules: readonly object[];
}

/** A Store (of @floodgate/core) whose every call runs in another process. */
export interface RemoteStore {
  consume(keys: string | readonly string[], ruleSet: RuleSetLike, cost: number, now: number, leaseId?: string): Promise<RuleDecisionLike[]>;
  peek(keys: string | readonly string[], ruleSet: RuleSetLike, now: number): Promise<RuleDecisionLike[]>;
  refund(keys: string | readonly string[], ruleSet: RuleSetLike, cost: number, now: number): Promise<void>;
  release(keys: string | readonly string[], ruleSet: RuleSetLike, leaseId: string, now: number): Promise<void>;
  reset(keys: string | readonly string[], ruleSet: RuleSetLike): Promise<void>;
  block(keys: string | readonly string[], ruleSet: RuleSetLike, ms: number, now: number): Promise<void>;
  unblock(keys: string | readonly string[], ruleSet: RuleSetLike, now: number): Promise<void>;
}

/** Options of DurableObjectStore, but its namespace (the Worker's own binding). */
export interface DurableObjectStoreOptionsLike {
  shards?: number;
  prefix?: string;
  clock?: 'server' | 'client';
}

const INFINITY = '\u0000Infinity';
const encode = (value: unknown) => JSON.stringify(value, (_key, v: unknown) => (v === Number.POSITIVE_INFINITY ? INFINITY : v));
const decode = (text: string) => JSON.parse(text, (_key, v: unknown) => (v === INFINITY ? Number.POSITIVE_INFINITY : v));

/** A store whose calls go to the store host at `url`, made with `options`. */
export function remoteStore(url: () => string, options: DurableObjectStoreOptionsLike = {}): RemoteStore {
  const call = async (method: string, keys: string | readonly string[], ruleSet: RuleSetLike, cost = 1, now = 0, leaseId?: string) => {
    const body = encode({ options, method, keys, ruleSet: { prefix: ruleSet.prefix, rules: ruleSet.rules }, cost, now, leaseId });
    const response = await fetch(`${url()}/store`, { method: 'POST', body });
    const answer = decode(await response.text()) as { result?: unknown; error?: { message: string; code?: string } };
    if (answer.error !== undefined) throw Object.assign(new Error(answer.error.message), { code: answer.error.code });
    return answer.result;
  };
  return {
    consume: async (keys, ruleSet, cost, now, leaseId) => (await call('consume', keys, ruleSet, cost, now, leaseId)) as RuleDecisionLike[],
    peek: async (keys, ruleSet, now) => (await call('peek', keys, ruleSet, 1, now)) as RuleDecisionLike[],
    refund: async (keys, ruleSet, cost, now) => {
      await call('refund', keys, ruleSet, cost, now);
    },
    release: async (keys, ruleSet, leaseId, now) => {
      await call('release', keys, ruleSet, 1, now, leaseId);
    },
    reset: async (keys, ruleSet) => {
      await call('reset', keys, ruleSet);
    },
    block: async (keys, ruleSet, ms, now) => {
      await call('block', keys, ruleSet, ms, now);
    },
    unblock: async (keys, ruleSet, now) => {
      await call('unblock', keys, ruleSet, 1, now);
    },
  };
}

const storeHost = fileURLToPath(new URL('../../cloudflare/src/test-support/store-host.ts', import.meta.url));

/**
 * A workerd serving DurableObjectStores for the test file that calls this
 * (Durable Objects kept in memory), and a way to make stores that call it.
 *
 * @example
 * ```ts
 * const durableObjects = useDurableObjectStores();
 * it('...', async () => { const store = durableObjects.store({ clock: 'client' }); ... });
 * ```
 */
export function useDurableObjectStores(): { readonly worker: Workerd; store(options?: DurableObjectStoreOptionsLike): RemoteStore } {
  const worker = useWorkerd({ entry: storeHost, durableObjects: { FLOODGATE: 'FloodgateDurableObject' } });
  return { worker, store: (options) => remoteStore(() => worker.url, options) };
}
