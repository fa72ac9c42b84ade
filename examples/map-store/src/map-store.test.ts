import { createLimiter } from '@floodgate/core';
import { storeContract } from '@floodgate/core/testing';
import { expect, it } from 'vitest';
import { MapStore } from './map-store.js';

// The whole conformance suite of Floodgate's stores, on this one.
storeContract('MapStore', () => new MapStore({ clock: 'client' }));

it('forgets what has ended: the Map does not grow without bound', async () => {
  const store = new MapStore({ sweepIntervalMs: 20 });
  const limiter = createLimiter({ algorithm: 'fixed-window', limit: 5, windowMs: 50, store });
  await Promise.all(Array.from({ length: 500 }, (_, i) => limiter.consume(`key${i}`)));
  expect(store.size).toBe(500);
  await new Promise((resolve) => setTimeout(resolve, 200));
  expect(store.size).toBe(0);
  await limiter.close();
  await store.close();
});
