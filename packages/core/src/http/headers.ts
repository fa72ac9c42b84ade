/*
 * Rate-limit headers: small pure functions from what the limiters decided
 * about one request to the headers of its response.
 *
 * One response may carry the reports of several limiters (a site-wide one and
 * a route one), each with several rules. The modes with one set of numbers
 * (legacy, draft-6, draft-7) show the most restrictive report, chosen as a
 * limiter chooses its binding rule: the denying one with the largest
 * retryAfterMs, else the one with the fewest remaining (the first on ties).
 * The modes with lists (draft-8, draft-10) show one policy per limiter
 * (draft-8: its binding rule) or every rule of every limiter (draft-10).
 *
 * Stacked limiters may use different modes, and each sets its headers on the
 * one response, a later one overwriting a field of the same name. So every
 * limiter writes every field that any limiter of the request asks for, each
 * from all the reports: nothing is left over from an earlier limiter's view
 * of the request alone, and the output is the same whichever limiter writes
 * last.
 */

import { ALGORITHMS } from '../algorithms/registry.js';
import type { Decision } from '../decision.js';
import { type Keys, storeKeys } from '../keys.js';
import type { CompiledRule } from '../rules.js';
import type { RuleDecision } from '../stores/types.js';

/**
 * Which rate-limit headers to send:
 * - `'legacy'`: `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (Unix epoch seconds, as GitHub);
 * - `'draft-6'`: `RateLimit-Policy: 100;w=60`, `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (seconds);
 * - `'draft-7'`: `RateLimit-Policy: 100;w=60` and `RateLimit: limit=100, remaining=99, reset=50`;
 * - `'draft-8'`: `RateLimit-Policy: "<rule>";q=100;w=60` and `RateLimit: "<rule>";r=99;t=50` for each limiter's binding rule;
 * - `'draft-10'` (September 2025): every rule of every limiter, with `t` = seconds until more quota,
 *   `pk` (a hash of the key) and `qu` (quota unit);
 * - `'both'` (legacy + draft-8), or `false` for none.
 *
 * `Retry-After` goes on every denial that can pass later, whatever the mode.
 */
export type HeadersMode = 'legacy' | 'draft-6' | 'draft-7' | 'draft-8' | 'draft-10' | 'both' | false;

export const headersModes: readonly HeadersMode[] = ['legacy', 'draft-6', 'draft-7', 'draft-8', 'draft-10', 'both', false];

/** A header name and value, ready for the framework to set. */
export type Header = readonly [name: string, value: string];

/** What one limiter decided about a request, with what the headers need to describe it. */
export interface PolicyReport {
  /** The limiter's decision for this request. */
  readonly decision: Decision;
  /** The rules the call was decided under: `limiter.rulesFor(callRules)` (per-call rules may differ from `limiter.rules`). */
  readonly rules: readonly CompiledRule[];
  /** `limiter.now()` when the call was decided: `X-RateLimit-Reset` is this plus `resetMs`. */
  readonly decidedAt: number;
  /** draft-10's `pk` per scope: `await partitionKeys(rules, keys)`. Without it, no `pk` is sent. */
  readonly partitionKeys?: Readonly<Record<string, string>>;
  /**
   * Names this limiter's policies when another limiter of the same response
   * already uses one of its rule names: `<label>:<rule>`. Without it, the
   * limiter's position in the response (1 = the first to decide): `2:<rule>`.
   */
  readonly label?: string;
  /**
   * draft-10's `qu` for the limiter's rate rules, when `cost` counts something
   * other than requests. Concurrency rules always say `"concurrent-requests"`.
   * @defaultValue 'requests' (the draft's default: no `qu` is sent)
   */
  readonly quotaUnit?: 'requests' | 'content-bytes';
  /** A limiter in shadow mode: its numbers are shown, but its denials deny nothing, so they set no Retry-After. */
  readonly shadow?: boolean;
  /**
   * The limiter's `headers` option: the fields it asks the response to carry.
   * The fields of every report's mode are sent, each built from every report
   * (see `rateLimitHeaders`). Without it, only the mode `rateLimitHeaders` is given.
   */
  readonly headers?: HeadersMode;
}

/** Structured-field integers have at most 15 digits (RFC 9651, Section 3.3.1). */
const MAX_SF_INTEGER = 999_999_999_999_999;

/** A count or a number of seconds as a header prints it: a whole number >= 0 of at most 15 digits, never NaN or Infinity. */
function integer(value: number): string {
  if (Number.isNaN(value) || value <= 0) return '0';
  return String(Math.min(Math.ceil(value), MAX_SF_INTEGER));
}

/** ms as whole seconds, rounded up (a client that waits this long is never early). */
const seconds = (ms: number): string => integer(ms / 1000);

/** Seconds to wait, as Retry-After wants them: whole, rounded up, at least 1. */
export function retryAfterSeconds(retryAfterMs: number): number {
  return Math.max(1, Math.ceil(retryAfterMs / 1000));
}

/**
 * A structured-field String (RFC 9651, Section 3.3.3): printable ASCII, with
 * `"` and `\` escaped. Anything else (a label in another script) becomes `?`.
 */
export function sfString(text: string): string {
  return `"${text.replace(/[^\x20-\x7e]/g, '?').replace(/["\\]/g, '\\$&')}"`;
}

/**
 * The report whose numbers the single-policy modes show, chosen as a limiter
 * chooses its binding rule: the denying report with the largest retryAfterMs,
 * else the one with the fewest remaining units (the first on ties). Reports
 * whose store failed carry no numbers and are never chosen.
 */
export function bindingReport(reports: readonly PolicyReport[]): PolicyReport | undefined {
  let binding: PolicyReport | undefined;
  for (const report of reports) {
    const d = report.decision;
    if (d.storeError !== undefined) continue;
    if (binding === undefined) {
      binding = report;
      continue;
    }
    const b = binding.decision;
    if (d.allowed ? b.allowed && d.remaining < b.remaining : b.allowed || d.retryAfterMs > b.retryAfterMs) binding = report;
  }
  return binding;
}

/**
 * The policy name of every rule of every report, `names[report][rule]` in the
 * order of `report.rules`: the rule's name, unless an earlier report of the
 * response already took it; then `<label>:<rule>`, or `<position>:<rule>` for
 * a report without a label. Rule names hold no `:`, so the qualified names
 * cannot meet an unqualified one. The same names head the draft-8/draft-10
 * fields and the `violated-policies` of a problem+json denial.
 */
export function policyNames(reports: readonly PolicyReport[]): string[][] {
  const taken = new Set<string>();
  return reports.map((report, position) => {
    const own = report.rules.map((rule) => printable(rule.name));
    const names = own.map((name) => {
      let unique = taken.has(name) ? `${printable(report.label ?? String(position + 1))}:${name}` : name;
      for (let n = 2; taken.has(unique); n++) unique = `${unique.replace(/#\d+$/, '')}#${n}`;
      return unique;
    });
    for (const name of names) taken.add(name);
    return names;
  });
}

/** The name as it will be printed: uniqueness is checked on what the client reads. */
const printable = (name: string): string => name.replace(/[^\x20-\x7e]/g, '?');

/** `w`: the window in whole seconds, at least 1 (draft-10: "non-negative, non-zero"). */
const windowSeconds = (rule: CompiledRule): string => seconds(rule.windowMs);

/**
 * draft-10's `t`: ms until the rule has more units than `remaining` says, or
 * undefined when it is at full capacity (no more will come: `t` is left out,
 * as in the draft's example `"default";r=999;pk=...`).
 *
 * - A denied call: its retryAfterMs (when finite), so that `t` never names a
 *   time later than `Retry-After` (draft-10, Section 6).
 * - fixed-window: the end of the window (its resetMs): exact.
 * - token-bucket, leaky-bucket, gcra: when the next unit has drained: exact
 *   up to 1 ms, rounded later. The meter is full in resetMs, and each unit
 *   below full takes windowMs / limit of that.
 * - sliding-window, sliding-log, concurrency: units come back as single calls
 *   leave the window (or leases end), which the decision does not tell; the
 *   time until full capacity is an upper bound, so a client that waits for it
 *   is never early.
 */
export function moreQuotaMs(decision: RuleDecision, rule: CompiledRule | undefined): number | undefined {
  if (!decision.allowed && Number.isFinite(decision.retryAfterMs)) return decision.retryAfterMs;
  if (!(decision.resetMs > 0)) return undefined;
  const nextUnitMs = rule === undefined ? undefined : ALGORITHMS[rule.algorithm].nextUnitMs;
  return nextUnitMs === undefined ? decision.resetMs : nextUnitMs(rule as CompiledRule, decision.remaining, decision.resetMs);
}

/** `X-RateLimit-Limit`, `-Remaining` and `-Reset` (Unix epoch seconds: `decidedAt + resetMs`, rounded up), as GitHub sends them. */
export function legacyHeaders(decision: Decision, decidedAt: number): Header[] {
  return [
    ['X-RateLimit-Limit', integer(decision.limit)],
    ['X-RateLimit-Remaining', integer(decision.remaining)],
    ['X-RateLimit-Reset', integer((decidedAt + decision.resetMs) / 1000)],
  ];
}

/**
 * draft-6/draft-7's reset and draft-8's `t`: seconds until the quota resets;
 * on a denial, the time Retry-After names (draft-6 Section 4, draft-7
 * Section 4, draft-8 Section 5: "SHOULD reference the same point in time").
 */
const resetSeconds = (decision: Decision): string =>
  seconds(!decision.allowed && Number.isFinite(decision.retryAfterMs) ? decision.retryAfterMs : decision.resetMs);

/** draft-6/draft-7's `RateLimit-Policy: <limit>;w=<window s>`, when the binding rule is known. */
function numericPolicy(report: PolicyReport): Header[] {
  const rule = report.rules.find((r) => r.name === report.decision.rule);
  return rule === undefined ? [] : [['RateLimit-Policy', `${integer(report.decision.limit)};w=${windowSeconds(rule)}`]];
}

/**
 * draft-6 (Section 3), beside its `RateLimit-Policy: 100;w=60`: `RateLimit-Limit`,
 * `RateLimit-Remaining`, `RateLimit-Reset`, as express-rate-limit sends them.
 */
const draft6Counts = (d: Decision): Header[] => [
  ['RateLimit-Limit', integer(d.limit)],
  ['RateLimit-Remaining', integer(d.remaining)],
  ['RateLimit-Reset', resetSeconds(d)],
];

/** draft-7 (Section 3), beside its `RateLimit-Policy: 100;w=60`: `RateLimit: limit=100, remaining=99, reset=50`, as express-rate-limit sends it. */
const draft7Limit = (d: Decision): Header => ['RateLimit', `limit=${integer(d.limit)}, remaining=${integer(d.remaining)}, reset=${resetSeconds(d)}`];

/**
 * draft-8: each report's binding rule; `t` = seconds until it is back to full
 * capacity (draft-8, Section 4.1.2), and on a denial the wait Retry-After names.
 */
export function draft8Headers(reports: readonly PolicyReport[], names: readonly (readonly string[])[]): Header[] {
  const policies: string[] = [];
  const limits: string[] = [];
  reports.forEach((report, i) => {
    const d = report.decision;
    if (d.storeError !== undefined) return;
    const at = report.rules.findIndex((r) => r.name === d.rule);
    const rule = report.rules[at];
    const name = sfString(names[i]?.[at] ?? d.rule);
    policies.push(`${name};q=${integer(d.limit)}${rule === undefined ? '' : `;w=${windowSeconds(rule)}`}`);
    limits.push(`${name};r=${integer(d.remaining)};t=${resetSeconds(d)}`);
  });
  return policies.length === 0
    ? []
    : [
        ['RateLimit-Policy', policies.join(', ')],
        ['RateLimit', limits.join(', ')],
      ];
}

/** draft-10: every rule of every report (draft-10, Sections 3 and 4). */
export function draft10Headers(reports: readonly PolicyReport[], names: readonly (readonly string[])[]): Header[] {
  const policies: string[] = [];
  const limits: string[] = [];
  reports.forEach((report, i) => {
    if (report.decision.storeError !== undefined) return;
    report.rules.forEach((rule, j) => {
      const d = report.decision.rules.find((r) => r.name === rule.name);
      if (d === undefined) return;
      const name = sfString(names[i]?.[j] ?? rule.name);
      const key = report.partitionKeys?.[rule.scope];
      const pk = key === undefined ? '' : `;pk=:${key}:`;
      const concurrent = ALGORITHMS[rule.algorithm].unit === 'concurrent-requests';
      const unit = concurrent ? 'concurrent-requests' : report.quotaUnit === 'content-bytes' ? 'content-bytes' : undefined;
      // A concurrency rule's windowMs is how long a lease lives, not a window of its quota: no `w`.
      policies.push(
        `${name};q=${integer(rule.limit)}${unit === undefined ? '' : `;qu=${sfString(unit)}`}${concurrent ? '' : `;w=${windowSeconds(rule)}`}${pk}`,
      );
      const t = moreQuotaMs(d, rule);
      limits.push(`${name};r=${integer(d.remaining)}${t === undefined ? '' : `;t=${seconds(t)}`}${pk}`);
    });
  });
  return policies.length === 0
    ? []
    : [
        ['RateLimit-Policy', policies.join(', ')],
        ['RateLimit', limits.join(', ')],
      ];
}

/**
 * `Retry-After` for a response with `status` (the limiter answers it; undefined
 * when the request goes on): the longest wait of the reports that deny, as
 * whole seconds >= 1. None when one of them can never pass (its cost exceeds
 * a capacity), or when nothing denies. A store that failed closed decides
 * 1000 ms: `Retry-After: 1`.
 */
function retryAfter(reports: readonly PolicyReport[], status: number | undefined): Header[] {
  if (status === undefined) return [];
  let longest = -1;
  for (const { decision, shadow } of reports) {
    if (decision.allowed || shadow) continue;
    if (!Number.isFinite(decision.retryAfterMs)) return [];
    longest = Math.max(longest, decision.retryAfterMs);
  }
  return longest < 0 ? [] : [['Retry-After', String(retryAfterSeconds(longest))]];
}

/**
 * The fields a response carries: those of every mode that `mode` and the
 * limiters of the request (`report.headers`) ask for. Two fields have a
 * syntax per draft: RateLimit-Policy (draft-6 to draft-10) and RateLimit
 * (draft-7 to draft-10). Of the modes that write one, the last limiter's
 * chooses: the innermost, the one closest to the route.
 */
interface Fields {
  /** `X-RateLimit-Limit`, `-Remaining`, `-Reset` (legacy, both). */
  legacy: boolean;
  /** draft-6's `RateLimit-Limit`, `-Remaining`, `-Reset`. */
  counts: boolean;
  /** `RateLimit-Policy`: one policy (draft-6, draft-7) or a list (draft-8, draft-10). */
  policy: 'draft-6' | 'draft-7' | 'draft-8' | 'draft-10' | undefined;
  /** `RateLimit`: a dictionary (draft-7) or a list (draft-8, draft-10). */
  limit: 'draft-7' | 'draft-8' | 'draft-10' | undefined;
}

/** Adds the fields `mode` asks for; a later mode's syntax replaces an earlier one's. */
function ask(fields: Fields, mode: HeadersMode | undefined): void {
  if (mode === 'legacy' || mode === 'both') fields.legacy = true;
  if (mode === 'draft-6') {
    fields.counts = true;
    fields.policy = 'draft-6';
  } else if (mode === 'draft-7' || mode === 'draft-8' || mode === 'draft-10' || mode === 'both') {
    fields.policy = fields.limit = mode === 'both' ? 'draft-8' : mode;
  }
}

/** The fields of `mode` (the caller's), then of each report's mode in the order the limiters decided. */
function fieldsOf(reports: readonly PolicyReport[], mode: HeadersMode): Fields {
  const fields: Fields = { legacy: false, counts: false, policy: undefined, limit: undefined };
  ask(fields, mode);
  for (const report of reports) ask(fields, report.headers);
  return fields;
}

/**
 * Every rate-limit header of a response, from the reports of the limiters
 * that decided the request, in the order they decided (outermost first).
 * `status` is the status the limiter answers with (429/503), or undefined
 * when the request goes on to the app. Reports whose store failed
 * (`decision.storeError`) add no numbers, only their Retry-After.
 *
 * Stacked limiters of different modes: the fields of every report's mode
 * (`report.headers`) and of `mode`, each from every report, as if every
 * limiter had the mode that asks for it: the one-set fields show the binding
 * report, the lists list each limiter. Every limiter of a request thus writes
 * the same headers, and a later one overwrites every field an earlier one
 * wrote; where two modes write a field of one name in different syntaxes
 * (RateLimit-Policy, RateLimit), the last limiter's mode chooses the syntax.
 *
 * @example
 * ```ts
 * const decidedAt = limiter.now();
 * const decision = await limiter.consume('1.2.3.4');
 * rateLimitHeaders([{ decision, rules: limiter.rules, decidedAt }], 'draft-8', decision.allowed ? undefined : 429);
 * // [['RateLimit-Policy', '"default";q=100;w=60'], ['RateLimit', '"default";r=99;t=60']]
 * ```
 */
export function rateLimitHeaders(reports: readonly PolicyReport[], mode: HeadersMode, status: number | undefined): (readonly [name: string, value: string])[];
/**
 * @deprecated The one-limiter form the request flow used before stacked
 * limiters: same as `rateLimitHeaders([{ decision, rules, decidedAt: nowMs }], mode, status)`.
 */
export function rateLimitHeaders(
  decision: Decision,
  mode: HeadersMode,
  rules: readonly CompiledRule[],
  nowMs: number,
  status: number | undefined,
): (readonly [name: string, value: string])[];
export function rateLimitHeaders(
  first: readonly PolicyReport[] | Decision,
  mode: HeadersMode,
  rulesOrStatus: readonly CompiledRule[] | number | undefined,
  nowMs?: number,
  lastStatus?: number,
): Header[] {
  if (!Array.isArray(first)) {
    const report: PolicyReport = { decision: first as Decision, rules: rulesOrStatus as readonly CompiledRule[], decidedAt: nowMs as number };
    return rateLimitHeaders([report], mode, lastStatus);
  }
  const reports = first as readonly PolicyReport[];
  const status = rulesOrStatus as number | undefined;
  const headers: Header[] = [];
  const { legacy, counts, policy, limit } = fieldsOf(reports, mode);
  const onePolicy = policy === 'draft-6' || policy === 'draft-7';
  const binding = legacy || counts || onePolicy ? bindingReport(reports) : undefined;
  if (binding !== undefined) {
    const d = binding.decision;
    if (legacy) headers.push(...legacyHeaders(d, binding.decidedAt));
    if (onePolicy) headers.push(...numericPolicy(binding));
    if (counts) headers.push(...draft6Counts(d));
    if (limit === 'draft-7') headers.push(draft7Limit(d));
  }
  // A list RateLimit-Policy (draft-8, draft-10) comes with a RateLimit of the same draft.
  const [listPolicy, listLimit] =
    limit === 'draft-8' ? draft8Headers(reports, policyNames(reports)) : limit === 'draft-10' ? draft10Headers(reports, policyNames(reports)) : [];
  if (listPolicy !== undefined && !onePolicy) headers.push(listPolicy);
  if (listLimit !== undefined) headers.push(listLimit);
  headers.push(...retryAfter(reports, status));
  return headers;
}

/**
 * draft-10's partition keys of a call, by scope: the first 12 bytes of the
 * SHA-256 of the key as the store keeps it (the key for scope `key`,
 * `%<scope>:<key>` for other scopes; `{`, `}` and `%` percent-encoded; a key
 * over 256 bytes is first replaced by `%sha256=<hex>`), in base64: 16
 * characters that tell a client which of its keys a quota belongs to, never
 * the key itself. Global rules have no partition, and no `pk`. Asynchronous
 * because Web Crypto is (the same SHA-256 that hashes long keys, in every runtime).
 *
 * @example
 * ```ts
 * const rules = limiter.rules;
 * const report = { decision, rules, decidedAt, partitionKeys: await partitionKeys(rules, 'user:42') };
 * ```
 */
export async function partitionKeys(rules: readonly CompiledRule[], keys: Keys): Promise<Readonly<Record<string, string>>> {
  const scopes = [...new Set(rules.map((rule) => rule.scope))].filter((scope) => scope !== 'global');
  const hashes = await Promise.all(scopes.map(async (scope) => partitionKey((await storeKeys({ scopes: [scope], ruleScopes: [0] }, keys)) as string)));
  const byScope: Record<string, string> = {};
  scopes.forEach((scope, i) => {
    byScope[scope] = hashes[i] as string;
  });
  return byScope;
}

/**
 * Partition keys computed lately, by store key. Web Crypto costs some 25 µs a
 * call, and a client sends many requests under one key. Bounded: emptied when
 * full (a Map's first entry is slow to find after many deletions, so no LRU).
 */
const recentPartitionKeys = new Map<string, string>();
const PARTITION_KEY_CACHE_SIZE = 10_000;

async function partitionKey(storeKey: string): Promise<string> {
  const known = recentPartitionKeys.get(storeKey);
  if (known !== undefined) return known;
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(storeKey)));
  const key = btoa(String.fromCharCode(...digest.subarray(0, 12)));
  if (recentPartitionKeys.size >= PARTITION_KEY_CACHE_SIZE) recentPartitionKeys.clear();
  recentPartitionKeys.set(storeKey, key);
  return key;
}
