/*
 * The boundary burst: a rule of 100 per second, and a client that arrives
 * 50 ms before a window edge with its full allowance and calls as fast as it
 * is let through until 50 ms after the edge. How many calls pass in those
 * 100 ms? A fixed window lets 2 × limit through; the other algorithms
 * should not. Memory store, injected clock, so the answer is exact.
 */
import { createLimiter } from '@floodgate/core';
import { type RateAlgorithm, rateAlgorithms } from './redis-contenders.js';

export interface BoundaryRow {
  algorithm: RateAlgorithm;
  beforeEdge: number;
  afterEdge: number;
  total: number;
}

export interface BoundaryResults {
  rows: BoundaryRow[];
  limit: number;
  windowMs: number;
  spanMs: number;
}

const LIMIT = 100;
const WINDOW_MS = 1_000;
const SPAN_MS = 100;
/** A window edge of every algorithm aligned to the epoch (fixed and sliding windows). */
const EDGE = 1_700_000_000_000;

export async function benchBoundary(): Promise<BoundaryResults> {
  const rows: BoundaryRow[] = [];
  for (const algorithm of rateAlgorithms) {
    let now = EDGE - SPAN_MS / 2;
    const limiter = createLimiter({ algorithm, limit: LIMIT, windowMs: WINDOW_MS, now: () => now });
    const row: BoundaryRow = { algorithm, beforeEdge: 0, afterEdge: 0, total: 0 };
    for (; now < EDGE + SPAN_MS / 2; now++) {
      // Within each ms, call until refused (bounded, in case a rule admitted without end).
      for (let call = 0; call < 10 * LIMIT; call++) {
        const decision = await limiter.consume('attacker');
        if (!decision.allowed) break;
        if (now < EDGE) row.beforeEdge++;
        else row.afterEdge++;
      }
    }
    row.total = row.beforeEdge + row.afterEdge;
    rows.push(row);
  }
  return { rows, limit: LIMIT, windowMs: WINDOW_MS, spanMs: SPAN_MS };
}
