/*
 * Rate-limit headers of an HTTP response that answers GraphQL operations. One
 * response may answer several (a batch), each decided by the limiters of the
 * plugins that saw it: the response shows them together as core's stacked
 * limiters do (the most restrictive for the one-policy fields, each limiter
 * for draft-8 and draft-10). Operations of one batch decided by the same
 * limiter on the same keys are one quota: the tighter decision stands for it.
 */
import type { Decision, Keys, Limiter } from '@floodgate/core';
import { type PolicyReport, rateLimitHeaders } from '@floodgate/core/adapter';

interface Entry {
  readonly limiter: Limiter;
  /** The key set, and whether the store decided. */
  readonly keys: string;
  readonly report: PolicyReport;
}

/** The reports of each response, under the object that is one per response (Yoga's Request, Apollo's request context). */
const responses = new WeakMap<object, Entry[]>();

/** One string per key set, whatever the order of its scopes. */
const keysId = (keys: Keys): string =>
  typeof keys === 'string' ? keys : JSON.stringify(Object.entries(keys).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));

/** Whether `a` is more restrictive than `b`, as core picks a binding rule: a denial with the longer wait, else fewer remaining. */
const tighter = (a: Decision, b: Decision): boolean => (a.allowed ? b.allowed && a.remaining < b.remaining : b.allowed || a.retryAfterMs > b.retryAfterMs);

/** Adds what a limiter decided about an operation to its response's reports. */
export function addReport(response: object, limiter: Limiter, keys: Keys, report: PolicyReport): void {
  let entries = responses.get(response);
  if (entries === undefined) {
    entries = [];
    responses.set(response, entries);
  }
  const id = `${report.decision.storeError === undefined ? 'measured' : 'failed'}:${keysId(keys)}`;
  const same = entries.findIndex((e) => e.limiter === limiter && e.keys === id);
  const kept = entries[same];
  if (kept === undefined) entries.push({ limiter, keys: id, report });
  else if (tighter(report.decision, kept.report.decision)) entries[same] = { limiter, keys: id, report };
}

/**
 * The headers of a response from its reports: none when no limiter reported. `Retry-After`
 * comes with them when one of its operations was denied (not in shadow mode): a whole
 * operation's 429 or 503, or one operation of a batch (which GraphQL answers with 200).
 */
export function headersOf(response: object): (readonly [name: string, value: string])[] {
  const entries = responses.get(response);
  if (entries === undefined) return [];
  const reports = entries.map((e) => e.report);
  const denied = reports.some((r) => !r.decision.allowed && r.shadow !== true);
  return rateLimitHeaders(reports, reports[reports.length - 1]?.headers ?? false, denied ? 429 : undefined);
}
