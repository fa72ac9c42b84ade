/*
 * Rate-limit headers on the HTTP response of a tRPC request. One response may
 * answer several calls (httpBatchLink), each decided by its procedure's
 * limiters: every limiter writes the headers of every decision of the
 * response so far, as core's stacked limiters do, so the response shows the
 * most restrictive (a denial with the longest wait, else the fewest
 * remaining), whichever call decided last.
 */
import type { Decision, Keys, Limiter } from '@floodgate/core';
import { type PolicyReport, rateLimitHeaders } from '@floodgate/core/adapter';

/** Where the response's headers can still be set, if the context exposes them. */
interface ResponseHeaders {
  /** The object that is one per response: reports are kept under it. */
  readonly response: object;
  set(name: string, value: string): void;
  remove(name: string): void;
}

/**
 * The fetch adapter's `resHeaders` (a Headers), or a Node `res` (ServerResponse,
 * Express's Response) whose headers are not sent yet. A WebSocket connection's
 * `res` is a socket: no headers.
 */
export function responseHeadersOf(ctx: unknown): ResponseHeaders | undefined {
  if (typeof ctx !== 'object' || ctx === null) return undefined;
  const { resHeaders, res } = ctx as { resHeaders?: unknown; res?: unknown };
  if (typeof resHeaders === 'object' && resHeaders !== null) {
    const headers = resHeaders as { set?: unknown; delete?: unknown };
    if (typeof headers.set === 'function' && typeof headers.delete === 'function') {
      const fetchHeaders = resHeaders as Headers;
      return { response: fetchHeaders, set: (name, value) => fetchHeaders.set(name, value), remove: (name) => fetchHeaders.delete(name) };
    }
  }
  if (typeof res === 'object' && res !== null) {
    const node = res as { setHeader?: unknown; removeHeader?: unknown; headersSent?: unknown };
    if (typeof node.setHeader === 'function' && typeof node.removeHeader === 'function' && node.headersSent !== true) {
      const nodeRes = res as { setHeader(name: string, value: string): void; removeHeader(name: string): void; readonly headersSent: boolean };
      return {
        response: nodeRes,
        // A streamed response (httpBatchStreamLink) may have started since: its headers are gone.
        set: (name, value) => nodeRes.headersSent || nodeRes.setHeader(name, value),
        remove: (name) => nodeRes.headersSent || nodeRes.removeHeader(name),
      };
    }
  }
  return undefined;
}

/** One limiter's decision on one key set in a response. */
interface Entry {
  readonly limiter: Limiter;
  /** The key set, and whether the store decided. */
  readonly keys: string;
  readonly report: PolicyReport;
}

interface Written {
  readonly entries: Entry[];
  names: readonly string[];
}

const responses = new WeakMap<object, Written>();

/** One string per key set, whatever the order of its scopes. */
const keysId = (keys: Keys): string =>
  typeof keys === 'string' ? keys : JSON.stringify(Object.entries(keys).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));

/** Whether `a` is more restrictive than `b`, as core picks a binding rule: a denial with the longer wait, else fewer remaining. */
const tighter = (a: Decision, b: Decision): boolean => (a.allowed ? b.allowed && a.remaining < b.remaining : b.allowed || a.retryAfterMs > b.retryAfterMs);

/**
 * Adds a decision to the response's and sets its headers from all of them. Calls of a batch
 * decided by the same limiter on the same keys are one report (the tighter decision): the
 * state of one quota after the batch, not one policy per call. A decision made without the
 * store (onStoreError) has no numbers and is kept apart.
 */
export function report(target: ResponseHeaders, limiter: Limiter, keys: Keys, decided: PolicyReport): void {
  let written = responses.get(target.response);
  if (written === undefined) {
    written = { entries: [], names: [] };
    responses.set(target.response, written);
  }
  const id = `${decided.decision.storeError === undefined ? 'measured' : 'failed'}:${keysId(keys)}`;
  const same = written.entries.findIndex((e) => e.limiter === limiter && e.keys === id);
  const kept = written.entries[same];
  const added: Entry = { limiter, keys: id, report: decided };
  if (kept === undefined) written.entries.push(added);
  else if (tighter(decided.decision, kept.report.decision)) written.entries[same] = added;
  const reports = written.entries.map((e) => e.report);
  // Retry-After goes on a response that carries a denial: a batch may mix denials and answers (HTTP 207).
  const denied = reports.some((r) => !r.decision.allowed && r.shadow !== true);
  // Each report carries its limiter's mode: the fields of every mode asked for, each from every report.
  const headers = rateLimitHeaders(reports, false, denied ? 429 : undefined);
  const names = headers.map(([name]) => name.toLowerCase());
  for (const name of written.names) if (!names.includes(name)) target.remove(name);
  for (const [name, value] of headers) target.set(name, value);
  written.names = names;
}
