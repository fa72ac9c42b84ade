/**
 * @packageDocumentation
 * Floodgate on Cloudflare Workers: `DurableObjectStore`, a limiter store
 * whose state lives in Durable Objects, and `FloodgateDurableObject`, the
 * Durable Object class that backs it. Use it with `@floodgate/fetch` or
 * `@floodgate/hono`, or with `createLimiter` from `@floodgate/core`.
 */
export {
  type DurableObjectStateLike,
  type DurableObjectStorageLike,
  FloodgateDurableObject,
} from './object.js';
export { type DurableObjectNamespaceLike, DurableObjectStore, type DurableObjectStoreOptions, type DurableObjectStubLike } from './store.js';
