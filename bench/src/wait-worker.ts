/*
 * Issue 15: does `limiter.wait()` cost CPU while calls wait? In a process of
 * its own (started by memory.ts): the process's CPU time (process.cpuUsage,
 * every thread) over `waitMs` idle, then over `waitMs` with `waiters` calls
 * waiting on one key whose window ends long after. Waiters of one key share
 * one timer (no polling), so the two should not differ.
 */
import { createLimiter } from '@floodgate/core';
import { reply, workerInput } from './child.js';

export interface WaitTask {
  waiters: number;
  waitMs: number;
}

export interface WaitResult {
  waiters: number;
  waitMs: number;
  /** CPU ms the process used over waitMs with nothing to do. */
  idleCpuMs: number;
  /** CPU ms it used over waitMs while the waiters waited. */
  waitingCpuMs: number;
  /** Waiters admitted during the measurement (should be 0: the window ends later). */
  admittedEarly: number;
}

const cpuMs = (): number => {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** CPU ms over `ms` of waiting on timers. */
async function cpuOver(ms: number): Promise<number> {
  const before = cpuMs();
  await sleep(ms);
  return cpuMs() - before;
}

const { waiters, waitMs } = workerInput<WaitTask>();
const limiter = createLimiter({ algorithm: 'fixed-window', limit: 1, windowMs: 3_600_000 });
await limiter.consume('203.0.113.9'); // the key's one call this hour: every waiter waits
await sleep(100); // start-up settles
const idleCpuMs = await cpuOver(waitMs);

const abort = new AbortController();
let admittedEarly = 0;
const waiting = Array.from({ length: waiters }, () =>
  limiter.wait('203.0.113.9', { signal: abort.signal }).then(
    () => {
      admittedEarly++;
    },
    () => {},
  ),
);
await sleep(100); // every waiter has asked once and is in line
const waitingCpuMs = await cpuOver(waitMs);
abort.abort();
await Promise.all(waiting);
await limiter.close();
await reply({ waiters, waitMs, idleCpuMs, waitingCpuMs, admittedEarly } satisfies WaitResult);
process.exit(0);
