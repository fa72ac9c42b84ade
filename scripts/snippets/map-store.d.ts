// What the fragments of docs/writing-a-store.md use without declaring it (they compile in examples/map-store).
import type { KeyValueStore } from '@floodgate/core/store';

declare global {
  /** The store the guide's reader writes: a KeyValueStore over their backend. */
  class MyStore extends KeyValueStore {
    constructor(options?: { clock?: 'server' | 'client' });
  }
}
