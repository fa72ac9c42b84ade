import type { Decision } from '../decision.js';
import type { CompiledRule } from '../rules.js';

/**
 * Which rate-limit headers to send:
 * - `'legacy'`: `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (Unix epoch seconds, as GitHub);
 * - `'draft-8'`: IETF `RateLimit-Policy` and `RateLimit` (draft-ietf-httpapi-ratelimit-headers-08);
 * - `'both'`, or `false` for none. `Retry-After` goes on every denial that can pass later, whatever the mode.
 */
export type HeadersMode = 'legacy' | 'draft-8' | 'both' | false;

export const headersModes: readonly HeadersMode[] = ['legacy', 'draft-8', 'both', false];

/** A header name and value, ready for the framework to set. */
export type Header = readonly [name: string, value: string];

/** Seconds to wait, as Retry-After wants them: whole, rounded up, at least 1. */
export function retryAfterSeconds(retryAfterMs: number): number {
  return Math.max(1, Math.ceil(retryAfterMs / 1000));
}

export function legacyHeaders(decision: Decision, nowMs: number): Header[] {
  return [
    ['X-RateLimit-Limit', String(decision.limit)],
    ['X-RateLimit-Remaining', String(decision.remaining)],
    ['X-RateLimit-Reset', String(Math.ceil((nowMs + decision.resetMs) / 1000))],
  ];
}

export function draft8Headers(decision: Decision, rule: CompiledRule | undefined): Header[] {
  const windowSeconds = Math.ceil((rule?.windowMs ?? 0) / 1000);
  return [
    ['RateLimit-Policy', `"${decision.rule}";q=${decision.limit};w=${windowSeconds}`],
    ['RateLimit', `"${decision.rule}";r=${decision.remaining};t=${Math.ceil(decision.resetMs / 1000)}`],
  ];
}

/**
 * Every header a response to `decision` carries. `status` is the status the
 * limiter answers with (429/503), or undefined when the request goes on to
 * the app. When the store failed (`decision.storeError`), the numbers are
 * unknown and only Retry-After is sent. No Retry-After when the call can
 * never pass (its cost exceeds a capacity).
 */
export function rateLimitHeaders(decision: Decision, mode: HeadersMode, rules: readonly CompiledRule[], nowMs: number, status: number | undefined): Header[] {
  const headers: Header[] = [];
  if (decision.storeError === undefined && mode !== false) {
    if (mode === 'legacy' || mode === 'both') headers.push(...legacyHeaders(decision, nowMs));
    if (mode === 'draft-8' || mode === 'both') {
      headers.push(
        ...draft8Headers(
          decision,
          rules.find((rule) => rule.name === decision.rule),
        ),
      );
    }
  }
  // When the limiter failed closed (onStoreError 'deny'), its decision says 1000 ms: Retry-After: 1.
  if (status !== undefined && Number.isFinite(decision.retryAfterMs)) headers.push(['Retry-After', String(retryAfterSeconds(decision.retryAfterMs))]);
  return headers;
}
