// `npm run example map-store`: the store of src/map-store.ts under a limiter with two scopes.
import { createLimiter } from '@floodgate/core';
import { MapStore } from './map-store.js';

const store = new MapStore();
const limiter = createLimiter({
  rules: [
    { name: 'per-user', scope: 'user', algorithm: 'gcra', limit: 3, windowMs: 10_000 },
    { name: 'per-ip', scope: 'ip', algorithm: 'sliding-window', limit: 5, windowMs: 10_000 },
  ],
  store,
});

for (let i = 1; i <= 7; i++) {
  const user = i <= 4 ? 'alice' : 'bob';
  const d = await limiter.consume({ user, ip: '203.0.113.9' });
  console.log(`call ${i} (${user}): ${d.allowed ? 'allowed' : `denied by ${d.rule}, retry in ${d.retryAfterMs} ms`}; remaining ${d.remaining}`);
}
console.log(`the store holds ${store.size} keys`);
await limiter.close();
await store.close();
