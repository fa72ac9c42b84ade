/*
 * The in-process stores compared in memory.ts, each reduced to the one call an
 * application makes per request, called directly (no middleware around it).
 * Limits are far above what a benchmark sends: every call is admitted, so every
 * contender does the same work, a counted and admitted request.
 */
import { createLimiter } from '@floodgate/core';
import { MemoryStore as ExpressMemoryStore, type Options as ExpressRateLimitOptions } from 'express-rate-limit';
import { RateLimiterMemory } from 'rate-limiter-flexible';

/** Admits everything a benchmark sends. */
export const LIMIT = 1_000_000_000;
/** Long enough that no window ends during a run. */
export const WINDOW_MS = 3_600_000;

/**
 * A contender: `call` is the library's own decision function applied to a
 * key, and `admits` reads its answer. A rejected promise counts as a denial.
 */
export interface Contender<R = unknown> {
  call(key: string): Promise<R>;
  admits(result: R): boolean;
  /** An error the library reported inside its answer instead of throwing it (Floodgate's `decision.storeError`). */
  failure?(result: R): Error | undefined;
}

export interface ContenderInfo {
  id: MemoryContenderId;
  label: string;
  /** Floodgate's own rows (checked against the targets). */
  floodgate: boolean;
  /** Keeps no state per key: no heap reading. */
  stateless?: boolean;
}

export type MemoryContenderId =
  | 'clock'
  | 'map'
  | 'express-rate-limit'
  | 'rate-limiter-flexible'
  | 'floodgate-fixed-window'
  | 'floodgate-gcra'
  | 'floodgate-fixed-window-events';

export const memoryContenders: readonly ContenderInfo[] = [
  { id: 'clock', label: 'awaited Date.now(), no store (what reading the clock costs)', floodgate: false, stateless: true },
  { id: 'map', label: 'awaited Map fixed window (baseline)', floodgate: false },
  { id: 'express-rate-limit', label: 'express-rate-limit MemoryStore', floodgate: false },
  { id: 'rate-limiter-flexible', label: 'rate-limiter-flexible RateLimiterMemory', floodgate: false },
  { id: 'floodgate-fixed-window', label: 'Floodgate MemoryStore, fixed-window', floodgate: true },
  { id: 'floodgate-gcra', label: 'Floodgate MemoryStore, gcra', floodgate: true },
  { id: 'floodgate-fixed-window-events', label: "Floodgate MemoryStore, fixed-window, with 'allowed' and 'limited' listeners", floodgate: true },
];

/** The baseline: the fixed window anyone would write in ten lines, behind an `await` like every store. */
function mapFixedWindow(limit: number, windowMs: number): (key: string) => Promise<boolean> {
  const windows = new Map<string, { count: number; resetAt: number }>();
  return async (key) => {
    const now = Date.now();
    let window = windows.get(key);
    if (window === undefined || window.resetAt <= now) {
      window = { count: 0, resetAt: now + windowMs };
      windows.set(key, window);
    }
    return ++window.count <= limit;
  };
}

/** The floor under every limiter that reads the clock per call and answers a promise: nothing else. */
async function readClock(_key: string): Promise<number> {
  return Date.now();
}

export function createMemoryContender(id: MemoryContenderId): Contender {
  switch (id) {
    case 'clock':
      return { call: readClock, admits: () => true };
    case 'map': {
      const decide = mapFixedWindow(LIMIT, WINDOW_MS);
      return { call: (key) => decide(key), admits: (allowed) => allowed as boolean };
    }
    case 'express-rate-limit': {
      const store = new ExpressMemoryStore();
      store.init({ windowMs: WINDOW_MS } as ExpressRateLimitOptions);
      // express-rate-limit's middleware admits while totalHits <= limit.
      return { call: (key) => store.increment(key), admits: (info) => (info as { totalHits: number }).totalHits <= LIMIT };
    }
    case 'rate-limiter-flexible': {
      const limiter = new RateLimiterMemory({ points: LIMIT, duration: WINDOW_MS / 1000 });
      return { call: (key) => limiter.consume(key), admits: () => true }; // consume() rejects when it denies
    }
    case 'floodgate-fixed-window':
    case 'floodgate-gcra': {
      const limiter = createLimiter({ algorithm: id === 'floodgate-gcra' ? 'gcra' : 'fixed-window', limit: LIMIT, windowMs: WINDOW_MS });
      return { call: (key) => limiter.consume(key), admits: (decision) => (decision as { allowed: boolean }).allowed };
    }
    case 'floodgate-fixed-window-events': {
      // What events cost once someone listens (a metrics exporter does): each call is timed and its event built.
      const limiter = createLimiter({ algorithm: 'fixed-window', limit: LIMIT, windowMs: WINDOW_MS });
      let seen = 0;
      limiter.on('allowed', () => {
        seen++;
      });
      limiter.on('limited', () => {
        seen++;
      });
      return { call: (key) => limiter.consume(key), admits: (decision) => seen > 0 && (decision as { allowed: boolean }).allowed };
    }
  }
}
