/*
 * application/problem+json denial bodies (RFC 9457) with the problem types of
 * draft-ietf-httpapi-ratelimit-headers-10, Section 5.
 */
import { type PolicyReport, policyNames, retryAfterSeconds } from './headers.js';

/** The problem types the draft registers (Section 10.2), by the URIs it registers them under. */
export const problemTypes = {
  quotaExceeded: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
  temporaryReducedCapacity: 'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity',
} as const;

/** A problem+json body as Floodgate sends it. */
export interface RateLimitProblem {
  readonly type: (typeof problemTypes)[keyof typeof problemTypes];
  /** The title the draft registers for the type: the same for every occurrence (RFC 9457, Section 3.1.3). */
  readonly title: 'Quota Exceeded' | 'Temporary Reduced Capacity';
  readonly status: number;
  /** What happened to this request and when to retry. */
  readonly detail: string;
  /** quota-exceeded: the policies that denied, named as in the RateLimit headers. */
  readonly 'violated-policies'?: readonly string[];
  /** Extension members the caller added (`ProblemOptions.extensions`). */
  readonly [member: string]: unknown;
}

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/** What the caller adds to a problem: the user's words for this denial. */
export interface ProblemOptions {
  /** Replaces the generated `detail` (an adapter passes a string `message` here). */
  readonly detail?: string;
  /**
   * Extension members (RFC 9457, Section 3.2), e.g. a link to the plans page
   * (an adapter passes an object `message` here). They cannot replace `type`,
   * `title`, `status` or `violated-policies`.
   */
  readonly extensions?: Readonly<Record<string, unknown>>;
}

const reserved: ReadonlySet<string> = new Set(['type', 'title', 'status', 'detail', 'violated-policies']);

/** The caller's extension members, without the ones Floodgate sets. */
const extensions = (options: ProblemOptions): Record<string, unknown> =>
  Object.fromEntries(Object.entries(options.extensions ?? {}).filter(([member]) => !reserved.has(member)));

const inSeconds = (retryAfterMs: number): string => {
  if (!Number.isFinite(retryAfterMs)) return 'This request is larger than the quota allows and cannot succeed as it is.';
  const s = retryAfterSeconds(retryAfterMs);
  return `Retry in ${s} second${s === 1 ? '' : 's'}.`;
};

/**
 * The problem a denial answers with, from the reports of the limiters that
 * decided the request (as for `rateLimitHeaders`) and the status sent.
 *
 * - The store failed and the limiter failed closed (the 503 of
 *   `onStoreError: 'deny'`), or an insurance limiter denied: the service
 *   runs with reduced capacity: `temporary-reduced-capacity`, without
 *   `violated-policies` (no advertised quota was exceeded).
 * - Otherwise a quota was exceeded: `quota-exceeded`, with
 *   `violated-policies` naming every rule that denied, by the names the
 *   draft-8/draft-10 headers give them.
 *
 * `detail` says when to retry, unless the caller gives its own.
 *
 * @example
 * ```ts
 * const problem = rateLimitProblem([{ decision, rules: limiter.rules, decidedAt }], 429);
 * // { type: 'https://iana.org/assignments/http-problem-types#quota-exceeded', title: 'Quota Exceeded',
 * //   status: 429, detail: 'Too many requests. Retry in 3 seconds.', 'violated-policies': ['per-minute'] }
 * const body = JSON.stringify(problem); // sent as application/problem+json
 * ```
 */
export function rateLimitProblem(reports: readonly PolicyReport[], status: number, options: ProblemOptions = {}): RateLimitProblem {
  const names = policyNames(reports);
  const violated: string[] = [];
  let denied = false;
  let measured = false;
  let retryAfterMs = 0;
  reports.forEach((report, i) => {
    const d = report.decision;
    if (d.allowed || report.shadow) return;
    denied = true;
    retryAfterMs = Math.max(retryAfterMs, d.retryAfterMs);
    if (d.storeError !== undefined) return;
    measured = true;
    for (const rule of d.rules) {
      if (rule.allowed) continue;
      const at = report.rules.findIndex((r) => r.name === rule.name);
      violated.push(names[i]?.[at] ?? rule.name);
    }
  });
  if (denied && !measured) {
    return {
      type: problemTypes.temporaryReducedCapacity,
      title: 'Temporary Reduced Capacity',
      status,
      detail: options.detail ?? `The rate limiter cannot count requests right now. ${inSeconds(retryAfterMs || 1000)}`,
      ...extensions(options),
    };
  }
  return {
    type: problemTypes.quotaExceeded,
    title: 'Quota Exceeded',
    status,
    detail: options.detail ?? `Too many requests. ${inSeconds(retryAfterMs)}`,
    ...extensions(options),
    'violated-policies': violated,
  };
}

/** The body and content type of a problem+json denial: `rateLimitProblem` serialized. */
export function problemResponse(
  reports: readonly PolicyReport[],
  status: number,
  options: ProblemOptions = {},
): { body: string; contentType: typeof PROBLEM_CONTENT_TYPE } {
  return { body: JSON.stringify(rateLimitProblem(reports, status, options)), contentType: PROBLEM_CONTENT_TYPE };
}
