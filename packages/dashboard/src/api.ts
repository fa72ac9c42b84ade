import { ErrorCodes, isFloodgateError, type Keys, type Limiter, type RuleOptions } from '@floodgate/core';
import type { Answer } from './http.js';
import { Refusal } from './http.js';
import { key, onlyFields, optionalString, positiveInteger, queryInteger } from './input.js';
import type { Configuration } from './options.js';
import type { Rates } from './rates.js';

/** One API call: its query, and its body read on demand (POST). */
export interface ApiCall {
  query: URLSearchParams;
  body(): Promise<Record<string, unknown>>;
}

type Method = 'GET' | 'POST' | 'DELETE';
export type Route = (call: ApiCall) => Promise<Answer>;

/** The longest block and override: 100 years, as core allows. */
const MAX_MS = 100 * 365 * 86_400_000;
const done: Answer = { status: 204 };

/** A rule as the page shows it: its options, not the constants compiled from them. */
function ruleView(rule: Limiter['rules'][number]): RuleOptions & { name: string } {
  const { name, scope, algorithm, limit, windowMs, burst, segments, mode, blockMs, maxBlockMs } = rule;
  return {
    name,
    scope,
    algorithm,
    limit,
    windowMs,
    ...(algorithm === 'token-bucket' || algorithm === 'leaky-bucket' || algorithm === 'gcra' ? { burst } : {}),
    ...(algorithm === 'sliding-window' ? { segments } : {}),
    ...(algorithm === 'leaky-bucket' ? { mode } : {}),
    ...(blockMs > 0 ? { blockMs } : {}),
    ...(maxBlockMs > 0 ? { maxBlockMs } : {}),
  };
}

/** The keys of a block: the key alone (scope `key`), or under the scope of the rule it is for (`{ ip: key }`). */
function keysOf(body: Record<string, unknown>): Keys {
  const scope = optionalString(body.scope, 'scope', 32);
  return scope === undefined || scope === 'key' ? key(body.key) : { [scope]: key(body.key) };
}

/** Runs `fn`; a limiter feature that is off (ERR_FG_OPTION from top() or overrides) answers `off` instead. */
async function unlessOff<T>(fn: () => Promise<T>, off: Answer): Promise<T | Answer> {
  try {
    return await fn();
  } catch (error) {
    if (isFloodgateError(error) && error.code === ErrorCodes.OPTION) return off;
    throw error;
  }
}

/** The JSON API, by path under `api/` and method. */
export function createApi(config: Configuration, rates: Rates): Record<string, Partial<Record<Method, Route>>> {
  const { limiter, ruleSource } = config;
  return {
    top: {
      async GET({ query }) {
        const n = queryInteger(query, 'n', 10, 100);
        const top = await unlessOff(() => limiter.top({ n }), { status: 200, body: { analytics: false } });
        return 'status' in top ? top : { status: 200, body: { analytics: true, ...top } };
      },
    },
    blocked: {
      async GET({ query }) {
        const count = queryInteger(query, 'count', 50, 1000);
        const cursor = query.get('cursor') ?? '';
        if (cursor.length > 1024) throw new Refusal(400, 'cursor is at most 1024 characters.', 'ERR_FG_OPTION');
        return { status: 200, body: await limiter.blocked({ cursor, count }) };
      },
    },
    block: {
      async POST(call) {
        const body = await call.body();
        onlyFields(body, ['key', 'scope', 'ms', 'reason', 'rule']);
        const reason = optionalString(body.reason, 'reason', 500);
        const rule = optionalString(body.rule, 'rule', 64);
        await limiter.block(keysOf(body), positiveInteger(body.ms, 'ms', MAX_MS), {
          ...(reason === undefined ? {} : { reason }),
          ...(rule === undefined ? {} : { rule }),
        });
        return done;
      },
    },
    unblock: {
      async POST(call) {
        const body = await call.body();
        onlyFields(body, ['key', 'scope', 'rule']);
        const rule = optionalString(body.rule, 'rule', 64);
        await limiter.unblock(keysOf(body), rule === undefined ? {} : { rule });
        return done;
      },
    },
    overrides: {
      async GET({ query }) {
        const count = queryInteger(query, 'count', 50, 1000);
        const cursor = query.get('cursor') ?? '';
        if (cursor.length > 1024) throw new Refusal(400, 'cursor is at most 1024 characters.', 'ERR_FG_OPTION');
        const page = await unlessOff(() => limiter.overrides.list({ cursor, count }), { status: 200, body: { overrides: false } });
        return 'status' in page ? page : { status: 200, body: { overrides: true, ...page } };
      },
      async POST(call) {
        const body = await call.body();
        onlyFields(body, ['key', 'rules', 'ttlMs']);
        const rules = body.rules;
        if (!Array.isArray(rules) || rules.length === 0 || rules.length > 100) {
          throw new Refusal(400, 'rules must be a list of 1 to 100 changes like { name: "per-user", limit: 5000 }.', 'ERR_FG_RULES');
        }
        const ttlMs = body.ttlMs === undefined || body.ttlMs === null ? undefined : positiveInteger(body.ttlMs, 'ttlMs', MAX_MS);
        await limiter.overrides.set(key(body.key), rules as Limiter.RuleOverride[], ttlMs === undefined ? {} : { ttlMs });
        return done;
      },
      async DELETE({ query }) {
        await limiter.overrides.delete(key(query.get('key') ?? undefined));
        return done;
      },
    },
    rules: {
      async GET() {
        return { status: 200, body: { rules: limiter.rules.map(ruleView), editable: ruleSource !== undefined } };
      },
      async POST(call) {
        if (ruleSource === undefined) {
          throw new Refusal(400, 'The rules cannot be edited here: pass dashboard({ ruleSource }) (a RedisRuleSource) to publish them.', 'ERR_FG_OPTION');
        }
        const body = await call.body();
        onlyFields(body, ['rules']);
        const rules = body.rules;
        if (!Array.isArray(rules) || rules.length === 0 || rules.length > 100) {
          throw new Refusal(400, 'rules must be a list of 1 to 100 rules like { name: "per-minute", limit: 100, windowMs: 60000 }.', 'ERR_FG_RULES');
        }
        await ruleSource.publish(rules as RuleOptions[]); // validated by core before anything is stored
        return done;
      },
    },
    rates: {
      async GET() {
        return { status: 200, body: rates.read() };
      },
    },
  };
}
