import type { Decision } from './decision.js';
import { ErrorCodes, FloodgateError } from './errors.js';

/**
 * A call that was not admitted: `limiter.wrap()` and `@rateLimited` reject
 * with it when the limiter denies (`ERR_FG_RATE_LIMITED`), and
 * `limiter.wait()` when admission cannot come within `maxWaitMs`
 * (`ERR_FG_WAIT_TIMEOUT`). `decision` is the denial (its `rule` and `rules`
 * say which rule, and under which scope); `retryAfterMs` is when to try
 * again (Infinity: the cost can never fit). `status` is 429.
 *
 * @example
 * ```ts
 * try {
 *   await sendSms(phone, text); // sendSms = limiter.wrap(send, { key: (phone) => phone })
 * } catch (error) {
 *   if (error instanceof RateLimitedError) console.log(`try again in ${error.retryAfterMs} ms (${error.decision.rule})`);
 *   else throw error;
 * }
 * ```
 */
export class RateLimitedError extends FloodgateError {
  override readonly name: string = 'RateLimitedError';
  declare readonly code: typeof ErrorCodes.RATE_LIMITED | typeof ErrorCodes.WAIT_TIMEOUT;
  /** The decision that denied the call (for a wait: the denial that showed it cannot come in time). */
  readonly decision: Decision;
  /** ms until the call may be admitted (Infinity: never, its cost exceeds what a rule can hold). */
  readonly retryAfterMs: number;

  constructor(
    decision: Decision,
    options: { code?: typeof ErrorCodes.RATE_LIMITED | typeof ErrorCodes.WAIT_TIMEOUT; message?: string; retryAfterMs?: number } = {},
  ) {
    super(options.code ?? ErrorCodes.RATE_LIMITED, options.message ?? deniedBecause(decision), { status: 429, cause: decision.storeError });
    this.decision = decision;
    this.retryAfterMs = options.retryAfterMs ?? decision.retryAfterMs;
  }
}

/** "rule 'per-user' (scope 'user')": the binding rule of a decision, with its scope unless it is the default one. */
export function ruleOf(decision: Decision): string {
  const scope = decision.rules.find((rule) => rule.name === decision.rule)?.scope;
  return `rule '${decision.rule}'${scope === undefined || scope === 'key' ? '' : ` (scope '${scope}')`}`;
}

/** Why a decision denied its call, and when to retry. */
function deniedBecause(decision: Decision): string {
  if (decision.storeError !== undefined) {
    return `Rate limited: the store failed (${decision.storeError.message}) and onStoreError denied the call; retry in ${decision.retryAfterMs} ms.`;
  }
  if (decision.retryAfterMs === Number.POSITIVE_INFINITY) {
    return `Rate limited by ${ruleOf(decision)}: the cost of this call exceeds what the rule can ever admit at once (limit ${decision.limit}); lower the cost, or raise the rule's limit or burst.`;
  }
  return `Rate limited by ${ruleOf(decision)}: retry in ${decision.retryAfterMs} ms.`;
}
