/*
 * Limits on the events of a socket: one gate per listed event, one for the
 * events not listed (if any), checked by a socket.use() middleware that
 * rateLimit() installs on every socket it admits.
 */
import { ErrorCodes, FloodgateError, type Limiter, type LimiterOptions } from '@floodgate/core';
import type { Socket } from 'socket.io';
import { denialOf, failureOf } from './denial.js';
import { createGate, decide, type Gate, type KeyOption, within } from './gate.js';
import type { SocketArgs } from './keys.js';

/**
 * The limit of one event: rule options (`limit`, `windowMs`, `algorithm`, `blockMs`, ... or `rules`),
 * or `limiter` to share one. Store, timeout, onStoreError, clock and deny cache are the connection
 * limit's unless given here; each event counts under a prefix of its own (`fg:event:<name>:`).
 */
export interface EventLimit extends LimiterOptions {
  /** A limiter to use instead of one made of these options. */
  limiter?: Limiter;
  /** The key this event is limited under. @defaultValue the `key` of rateLimit() */
  key?: KeyOption;
  /** Units the event takes: a positive integer, or `(socket, event, args) => number` (args without the ack). @defaultValue 1 */
  cost?: EventCost;
}

/** Units an event takes: a positive integer, or a function of the socket, the event's name and its arguments (without the ack). */
// biome-ignore lint/suspicious/noExplicitAny: as SocketArgs
export type EventCost = number | ((socket: Socket, event: string, args: readonly any[]) => number | Promise<number>);

/** Disconnect a socket once its events were denied `breaches` times within `windowMs`. */
export interface DisconnectAfter {
  /** Denials within `windowMs` that end the connection (the last one is still answered). */
  breaches: number;
  windowMs: number;
}

/** The options of `rateLimit()` about events. */
export interface EventsOptions {
  /** Limits by event name; `false` leaves an event unlimited (also by `otherEvents`). */
  events?: Readonly<Record<string, EventLimit | false>>;
  /** The limit of every event not in `events`, all counted together. Without it, those events are not limited. */
  otherEvents?: EventLimit;
  /** The event a socket gets for a denied event that asked for no acknowledgement. @defaultValue 'rate_limited' */
  deniedEvent?: string;
  /** Disconnect a socket after this many denied events within a period. @defaultValue never */
  disconnectAfter?: DisconnectAfter;
}

/** What the events part of rateLimit() needs from the rest of its options. */
interface Inherited {
  key: KeyOption | undefined;
  /** The limiter options every limit shares (store, timeoutMs, onStoreError, now, localDenyCache). */
  shared: Readonly<Record<string, unknown>>;
  prefix: unknown;
  now: () => number;
  skip: ((...args: SocketArgs) => boolean | Promise<boolean>) | undefined;
}

type Packet = unknown[];
type Guard = (packet: Packet, next: (err?: Error) => void) => void;

const RESERVED = new Set(['connect', 'connect_error', 'disconnect', 'disconnecting', 'newListener', 'removeListener']);
const MAX_PREFIX_LENGTH = 64;

/**
 * A prefix of its own for an event's limiter, so that it never shares counters with the connection
 * limit or another event: `fg:event:chat:`, `fg:events:` for otherEvents. The name is URI-encoded
 * (no `{` or `}` can reach a Redis hash tag); one too long is cut and told apart by a hash.
 */
function eventPrefix(base: unknown, event: string | undefined): unknown {
  if (base !== undefined && typeof base !== 'string') return base; // createLimiter says what is wrong with it
  const prefix = `${base ?? 'fg:'}${event === undefined ? 'events:' : `event:${encodeURIComponent(event)}:`}`;
  if (prefix.length <= MAX_PREFIX_LENGTH) return prefix;
  let hash = 0x811c9dc5; // FNV-1a: enough to tell the events of one app apart
  for (let i = 0; i < prefix.length; i++) hash = Math.imul(hash ^ prefix.charCodeAt(i), 0x01000193);
  const tag = `~${(hash >>> 0).toString(16).padStart(8, '0')}:`;
  return prefix.slice(0, MAX_PREFIX_LENGTH - tag.length) + tag;
}

function gateOf(entry: unknown, prefix: unknown, inherited: Inherited): Gate {
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
    throw new FloodgateError(ErrorCodes.OPTION, 'an event limit is rule options like { limit: 5, windowMs: 1_000 }, or false for no limit.');
  }
  const { limiter, key, ...own } = entry as EventLimit;
  // Store, timeout, onStoreError, clock and deny cache are the connection limit's, unless the event has a limiter of its own.
  const options = limiter === undefined ? { ...inherited.shared, prefix, ...own } : { limiter, ...own };
  return createGate({ ...options, key: key ?? inherited.key, skip: inherited.skip });
}

function checkOptions(options: EventsOptions): { deniedEvent: string; disconnectAfter: DisconnectAfter | undefined } {
  const { events, deniedEvent = 'rate_limited', disconnectAfter } = options;
  if (events !== undefined && (typeof events !== 'object' || events === null || Array.isArray(events))) {
    throw new FloodgateError(ErrorCodes.OPTION, 'events must be an object of limits by event name, like { chat: { limit: 5, windowMs: 1_000 } }.');
  }
  if (typeof deniedEvent !== 'string' || deniedEvent === '' || RESERVED.has(deniedEvent)) {
    throw new FloodgateError(ErrorCodes.OPTION, `deniedEvent must be an event name Socket.IO lets a server emit (not ${[...RESERVED].join(', ')}).`);
  }
  if (disconnectAfter !== undefined) {
    const { breaches, windowMs } = (typeof disconnectAfter === 'object' && disconnectAfter !== null ? disconnectAfter : {}) as Partial<DisconnectAfter>;
    if (!Number.isSafeInteger(breaches) || (breaches as number) < 1 || !Number.isSafeInteger(windowMs) || (windowMs as number) < 1) {
      throw new FloodgateError(ErrorCodes.OPTION, 'disconnectAfter must be { breaches, windowMs }, two positive integers: { breaches: 10, windowMs: 60_000 }.');
    }
  }
  return { deniedEvent, disconnectAfter };
}

/** Builds the limits of `options.events` and `options.otherEvents`, and the socket middleware that applies them. */
export function eventsGuard(
  options: EventsOptions,
  inherited: Inherited,
): { guard: ((socket: Socket) => Guard) | undefined; limiters: Record<string, Limiter>; otherEvents: Limiter | undefined } {
  const { deniedEvent, disconnectAfter } = checkOptions(options);
  const listed = new Map<string, Gate | false>();
  const limiters: Record<string, Limiter> = {};
  for (const [name, entry] of Object.entries(options.events ?? {})) {
    if (entry === false) listed.set(name, false);
    else {
      const gate = within(`events.${name}`, () => gateOf(entry, eventPrefix(inherited.prefix, name), inherited));
      listed.set(name, gate);
      limiters[name] = gate.limiter;
    }
  }
  const other =
    options.otherEvents === undefined
      ? undefined
      : within('otherEvents', () => gateOf(options.otherEvents, eventPrefix(inherited.prefix, undefined), inherited));
  if (Object.keys(limiters).length === 0 && other === undefined) return { guard: undefined, limiters, otherEvents: undefined };
  const { now } = inherited;

  const guard = (socket: Socket): Guard => {
    let breaches: number[] = []; // when this socket's events were denied, within disconnectAfter.windowMs
    const breached = (limit: DisconnectAfter): boolean => {
      const at = now();
      breaches = breaches.filter((then) => then > at - limit.windowMs);
      breaches.push(at);
      return breaches.length >= limit.breaches;
    };
    return function floodgateEvents(packet, next) {
      const raw = packet[0];
      // Socket.IO's parser lets numbers through as event names; they reach listeners as strings.
      const event = typeof raw === 'string' ? raw : typeof raw === 'number' ? String(raw) : '';
      const gate = listed.has(event) ? listed.get(event) : other;
      if (gate === undefined || gate === false) return next();
      const last = packet.length - 1;
      const ack = last >= 1 && typeof packet[last] === 'function' ? (packet[last] as (...args: unknown[]) => void) : undefined;
      const args = packet.slice(1, ack === undefined ? packet.length : last);
      decide(gate, [socket, event, args]).then(
        (verdict) => {
          if (verdict.kind === 'skip') return next();
          const { decision } = verdict;
          if (verdict.kind === 'pass') {
            if (decision.leaseId !== undefined) {
              // A concurrency rule: the event is in flight until its handler acknowledges it (or, without an ack, once dispatched).
              const release = () => void gate.settle(verdict);
              if (ack === undefined) setImmediate(release);
              else
                packet[last] = (...replies: unknown[]) => {
                  release();
                  ack(...replies);
                };
            }
            return next();
          }
          const error = denialOf(decision, event);
          if (ack !== undefined) ack({ error });
          else socket.emit(deniedEvent, { error });
          if (disconnectAfter !== undefined && error.code === 'RATE_LIMITED' && breached(disconnectAfter)) socket.disconnect(true);
        },
        (error: unknown) => {
          // A bad key or cost: the event is not delivered, its sender is told, and the server goes on.
          if (ack !== undefined) ack({ error: failureOf(error) });
          // Socket.IO hands a middleware's error to the socket's 'error' listeners (and drops it when there are none).
          next(error instanceof Error ? error : new Error(String(error)));
        },
      );
    };
  };
  return { guard, limiters, otherEvents: other?.limiter };
}
