/*
 * DurableObjectStore against the store contract of @floodgate/core/testing: the store runs inside
 * workerd with real Durable Objects (kept in memory), and each store call of the contract's
 * limiters is one POST to that Worker on loopback (test-support's useDurableObjectStores).
 */
import type { Store } from '@floodgate/core/store';
import { storeContract } from '@floodgate/core/testing';
import { useDurableObjectStores } from '@floodgate/test-support';

const durableObjects = useDurableObjectStores();

// One object per key: the rules of a call under several scopes span several objects (the multi-object path).
storeContract('DurableObjectStore (workerd, an object per key)', () => durableObjects.store({ clock: 'client' }) as unknown as Store, { numRuns: 500 });
// Two shards: most calls in one object (one atomic call), some across both.
storeContract('DurableObjectStore (workerd, 2 shards)', () => durableObjects.store({ clock: 'client', shards: 2 }) as unknown as Store, { numRuns: 500 });
