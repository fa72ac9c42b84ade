/*
 * The in-process stores compared in memory.ts, each reduced to the one call an
 * application makes per request, called directly (no middleware around it).
 * Limits are far above what a benchmark sends: every call is admitted, so every
 * contender does the same work, a counted and admitted request.
 */
import { createLimiter, type Limiter } from '@floodgate/core';
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
  /** A variant of another row (plans, scopes): timed, but its heap is not measured. */
  variant?: boolean;
}

export type MemoryContenderId =
  | 'clock'
  | 'map'
  | 'express-rate-limit'
  | 'rate-limiter-flexible'
  | 'floodgate-fixed-window'
  | 'floodgate-gcra'
  | 'floodgate-fixed-window-events'
  | 'floodgate-fixed-window-plans'
  | 'floodgate-3-scopes'
  | 'floodgate-3-stacked';

export const memoryContenders: readonly ContenderInfo[] = [
  { id: 'clock', label: 'awaited Date.now(), no store (what reading the clock costs)', floodgate: false, stateless: true },
  { id: 'map', label: 'awaited Map fixed window (baseline)', floodgate: false },
  { id: 'express-rate-limit', label: 'express-rate-limit MemoryStore', floodgate: false },
  { id: 'rate-limiter-flexible', label: 'rate-limiter-flexible RateLimiterMemory', floodgate: false },
  { id: 'floodgate-fixed-window', label: 'Floodgate MemoryStore, fixed-window', floodgate: true },
  { id: 'floodgate-gcra', label: 'Floodgate MemoryStore, gcra', floodgate: true },
  { id: 'floodgate-fixed-window-events', label: "Floodgate MemoryStore, fixed-window, with 'allowed' and 'limited' listeners", floodgate: true },
  {
    id: 'floodgate-fixed-window-plans',
    label: 'Floodgate MemoryStore, fixed-window, one of 3 plans per call (`consume(key, { rules })`)',
    floodgate: true,
    variant: true,
  },
  { id: 'floodgate-3-scopes', label: 'Floodgate MemoryStore, 3 scopes in one call (global + per-IP + per-user)', floodgate: true, variant: true },
  { id: 'floodgate-3-stacked', label: 'Floodgate MemoryStore, 3 stacked limiters (global, per-IP, per-user), awaited in turn', floodgate: true, variant: true },
];

/**
 * Plans a call picks from (issue 15): three constant rule sets of one rule
 * under one name, so a client that changes plan keeps its count. Limits out of
 * reach, as everywhere here.
 */
export const PLANS = [1, 2, 3].map((tier) => Object.freeze([{ name: 'plan', algorithm: 'fixed-window', limit: tier * LIMIT, windowMs: WINDOW_MS }] as const));

/** The 3-scope rule set of issue 14: everyone, per client IP, per user, checked in one call. */
export const SCOPED_RULES = [
  { name: 'all', scope: 'global', algorithm: 'fixed-window', limit: LIMIT, windowMs: WINDOW_MS },
  { name: 'per-ip', scope: 'ip', algorithm: 'fixed-window', limit: LIMIT, windowMs: WINDOW_MS },
  { name: 'per-user', scope: 'user', algorithm: 'fixed-window', limit: LIMIT, windowMs: WINDOW_MS },
] as const;

/**
 * The user of a client's call in the scope rows: a fixed string per client
 * key, made once (so that no row pays for building it per call).
 */
const users = new Map<string, string>();
export function userOf(key: string): string {
  let user = users.get(key);
  if (user === undefined) {
    user = `user-${users.size}`;
    users.set(key, user);
  }
  return user;
}

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
    case 'floodgate-fixed-window-plans': {
      // One of 3 constant plans per call, in turn, each passed as the same options object every time.
      const limiter = createLimiter({ algorithm: 'fixed-window', limit: LIMIT, windowMs: WINDOW_MS });
      const options = PLANS.map((rules) => ({ rules }));
      let plan = 0;
      return {
        call: (key) => {
          plan = plan === 2 ? 0 : plan + 1;
          return limiter.consume(key, options[plan]);
        },
        admits: (decision) => (decision as { allowed: boolean }).allowed,
      };
    }
    case 'floodgate-3-scopes': {
      const limiter = createLimiter({ rules: SCOPED_RULES });
      return { call: (key) => limiter.consume({ ip: key, user: userOf(key) }), admits: (decision) => (decision as { allowed: boolean }).allowed };
    }
    case 'floodgate-3-stacked': {
      // What one writes without scopes: a limiter per scope, each called in turn (and each consuming, even when a later one denies).
      const [all, perIp, perUser] = SCOPED_RULES.map(({ scope: _scope, ...rule }) => createLimiter(rule));
      return {
        call: async (key) => {
          const first = await (all as Limiter).consume('all');
          if (!first.allowed) return first;
          const second = await (perIp as Limiter).consume(key);
          if (!second.allowed) return second;
          return (perUser as Limiter).consume(userOf(key));
        },
        admits: (decision) => (decision as { allowed: boolean }).allowed,
      };
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
