/*
 * A gate: one limiter, and how a connection or an event is keyed and costed
 * under it. The handshake and each event limit are one gate each.
 */
import { createLimiter, type Decision, ErrorCodes, FloodgateError, isFloodgateError, type Keys, type Limiter, type LimiterOptions } from '@floodgate/core';
import { isUnmeasured } from '@floodgate/core/adapter';
import type { SocketArgs } from './keys.js';

/** A function of the socket (and, for an event, its name and arguments). */
export type PerSocket<T> = (...args: SocketArgs) => T | Promise<T>;

/**
 * The key(s) a connection or an event is limited under: a function (scope `key`; it may also
 * return an object of keys by scope), or one key function per scope the rules use:
 * `{ ip: keyBy.ip(), user: (socket) => socket.data.userId }`.
 */
export type KeyOption = PerSocket<Keys> | Readonly<Record<string, PerSocket<string>>>;

/** Units a call takes: a positive integer, or a function of the socket (and event) that returns one. */
export type CostOption = number | PerSocket<number>;

export interface Gate {
  readonly limiter: Limiter;
  keysOf(args: SocketArgs): Promise<Keys>;
  costOf(args: SocketArgs): Promise<number>;
}

/** The limiter options every limit of one `rateLimit()` shares: where and how state is kept. */
export const SHARED_OPTIONS = ['store', 'timeoutMs', 'onStoreError', 'now', 'localDenyCache'] as const;

/** A FloodgateError's message without the ` [ERR_FG_...]` its constructor appends (it appends it again). */
const bare = (error: FloodgateError): string => error.message.replace(/ \[ERR_FG_[A-Z_]+\]$/, '');

/** Runs construction steps for a part of the options, naming the part in what they throw. */
export function within<T>(where: string, build: () => T): T {
  try {
    return build();
  } catch (error) {
    if (isFloodgateError(error)) throw new FloodgateError(error.code, `${where}: ${bare(error)}`, { cause: error });
    throw error;
  }
}

/** A user callback: what it throws becomes a FloodgateError of `code` that keeps it as `cause`. */
async function guarded<T>(fn: PerSocket<T>, args: SocketArgs, code: 'ERR_FG_KEY' | 'ERR_FG_COST', what: string): Promise<T> {
  try {
    return await fn(...args);
  } catch (error) {
    if (isFloodgateError(error)) throw error;
    const reason = error instanceof Error ? error.message : typeof error;
    throw new FloodgateError(code, `The ${what} function threw: ${reason}`, { cause: error });
  }
}

function checkCost(cost: unknown): number {
  if (typeof cost === 'number' && Number.isSafeInteger(cost) && cost >= 1) return cost;
  const shown = typeof cost === 'number' || typeof cost === 'string' ? JSON.stringify(cost) : typeof cost;
  throw new FloodgateError(ErrorCodes.COST, `cost must be a positive integer, got ${shown}.`);
}

/** Key and cost options checked once, at construction. */
export function createGate(limiter: Limiter, key: KeyOption, cost: CostOption | undefined): Gate {
  let keysOf: Gate['keysOf'];
  if (typeof key === 'function') {
    keysOf = (args) => guarded(key, args, ErrorCodes.KEY, 'key');
  } else {
    const scopes = typeof key === 'object' && key !== null && !Array.isArray(key) ? Object.entries(key) : [];
    if (scopes.length === 0 || scopes.some(([, fn]) => typeof fn !== 'function')) {
      throw new FloodgateError(
        ErrorCodes.OPTION,
        'key must be a function of the socket, or an object of key functions by scope like { ip: keyBy.ip(), user: (socket) => socket.data.userId }.',
      );
    }
    keysOf = async (args) => {
      const keys: Record<string, string> = {};
      for (const [scope, fn] of scopes) keys[scope] = await guarded(fn, args, ErrorCodes.KEY, `key.${scope}`);
      return keys;
    };
  }
  let costOf: Gate['costOf'];
  if (typeof cost === 'function') costOf = async (args) => checkCost(await guarded(cost, args, ErrorCodes.COST, 'cost'));
  else {
    const units = cost === undefined ? 1 : checkCost(cost);
    costOf = () => Promise.resolve(units);
  }
  return { limiter, keysOf, costOf };
}

/** The limiter of a limit: the one given, or one made of its options (refused together). */
export function limiterOf(given: Limiter | undefined, options: Readonly<Record<string, unknown>>): Limiter {
  if (given === undefined) return createLimiter(options as LimiterOptions); // createLimiter checks every option
  const also = Object.keys(options).filter((name) => !(SHARED_OPTIONS as readonly string[]).includes(name));
  if (also.length > 0) {
    throw new FloodgateError(ErrorCodes.OPTION, `got both 'limiter' and ${also.map((n) => `'${n}'`).join(', ')}; set those on the shared limiter instead.`);
  }
  if (typeof given !== 'object' || given === null || typeof given.consume !== 'function') {
    throw new FloodgateError(ErrorCodes.OPTION, 'limiter must be a limiter from createLimiter().');
  }
  return given;
}

/** What a gate decided about a call, with the keys it was decided under (to release a lease). */
export interface Decided {
  readonly decision: Decision;
  readonly keys: Keys;
}

/** Key, cost, consume: the decision on one call; rejects with a FloodgateError for a bad key or cost. */
export async function decide(gate: Gate, args: SocketArgs): Promise<Decided> {
  const keys = await gate.keysOf(args);
  const cost = await gate.costOf(args);
  return { decision: await gate.limiter.consume(keys, cost === 1 ? undefined : { cost }), keys };
}

/** Whether onStoreError 'allow' or 'deny' made this decision, rather than a rule (or an insurance limiter): it carries no numbers. */
export const unmeasured = (decision: Decision): boolean => decision.storeError !== undefined && isUnmeasured(decision);
