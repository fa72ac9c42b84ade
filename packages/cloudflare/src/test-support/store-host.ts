/*
 * A Worker that serves a DurableObjectStore over HTTP, for the store
 * conformance suite of @floodgate/core, which runs in Node: each Store method
 * is a POST to /store (see remoteStore in @floodgate/test-support), run here
 * by a DurableObjectStore on the real namespace binding, against real
 * FloodgateDurableObjects with their transactional storage.
 */
import type { RuleSet } from '@floodgate/core/store';
import { type DurableObjectNamespaceLike, DurableObjectStore, type DurableObjectStoreOptions } from '../store.js';

export { FloodgateDurableObject } from '../object.js';

/** Infinity does not survive JSON: it travels as this string (no rule name or key can hold a NUL). */
const INFINITY = '\u0000Infinity';
const encode = (value: unknown) => JSON.stringify(value, (_key, v: unknown) => (v === Number.POSITIVE_INFINITY ? INFINITY : v));
const decode = (text: string) => JSON.parse(text, (_key, v: unknown) => (v === INFINITY ? Number.POSITIVE_INFINITY : v));

interface StoreCall {
  options: Omit<DurableObjectStoreOptions, 'namespace'>;
  method: 'consume' | 'peek' | 'refund' | 'release' | 'reset' | 'block' | 'unblock';
  keys: string | string[];
  ruleSet: { prefix: string; rules: RuleSet['rules'] };
  cost: number;
  now: number;
  leaseId?: string;
}

const stores = new Map<string, DurableObjectStore>();
/** One RuleSet per limiter's rules, as a limiter keeps one until its rules change (stores cache by its identity). */
const ruleSets = new Map<string, RuleSet>();

export default {
  async fetch(request: Request, env: { FLOODGATE: DurableObjectNamespaceLike }): Promise<Response> {
    if (new URL(request.url).pathname !== '/store') return new Response('not found', { status: 404 });
    try {
      const call = decode(await request.text()) as StoreCall;
      const storeId = JSON.stringify(call.options);
      let store = stores.get(storeId);
      if (store === undefined) {
        store = new DurableObjectStore({ namespace: env.FLOODGATE, ...call.options });
        stores.set(storeId, store);
      }
      const ruleSetId = JSON.stringify(call.ruleSet);
      let ruleSet = ruleSets.get(ruleSetId);
      if (ruleSet === undefined) {
        if (ruleSets.size > 10_000) ruleSets.clear();
        ruleSet = { ...call.ruleSet, now: () => Date.now() };
        ruleSets.set(ruleSetId, ruleSet);
      }
      const { keys, cost, now, leaseId } = call;
      let result: unknown;
      if (call.method === 'consume') result = await store.consume(keys, ruleSet, cost, now, leaseId);
      else if (call.method === 'peek') result = await store.peek(keys, ruleSet, now);
      else if (call.method === 'refund') result = await store.refund(keys, ruleSet, cost, now);
      else if (call.method === 'release') result = await store.release(keys, ruleSet, leaseId ?? '', now);
      else if (call.method === 'block') result = await store.block(keys, ruleSet, cost, now);
      else if (call.method === 'unblock') result = await store.unblock(keys, ruleSet, now);
      else result = await store.reset(keys, ruleSet);
      return new Response(encode({ result: result ?? null }), { headers: { 'content-type': 'application/json' } });
    } catch (error) {
      const { message, code } = error as { message?: string; code?: string };
      return new Response(encode({ error: { message: message ?? String(error), code } }), { status: 500 });
    }
  },
};
