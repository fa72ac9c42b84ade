import { type Keys, type Limiter, RedisRuleSource, type RuleOptions } from '@floodgate/core';
import type { Command } from './args.js';
import { formatDuration } from './duration.js';
import { CliError, CliErrorCodes, ExitCodes } from './errors.js';
import { isoDate, table } from './output.js';
import { readRulesFile, redisKeyOf, rulesLocation } from './rules.js';
import { failIfUnmeasured, type Session } from './session.js';

/** What a command prints: `json` with --json, `text` otherwise. */
export interface Result {
  json: unknown;
  text: string;
}

type Run<C extends Command['name']> = (session: Session, command: Extract<Command, { name: C }>) => Promise<Result>;

const keyText = (keys: Keys): string =>
  typeof keys === 'string'
    ? keys
    : Object.entries(keys)
        .map(([scope, key]) => `${scope}=${key}`)
        .join(' ');

/**
 * `inspect <key>`: every rule's state for the key, as a peek sees it (nothing is consumed), under
 * the overrides in force for its keys, as the application's limiter applies them.
 */
export const inspect: Run<'inspect'> = async (session, { keys }) => {
  const { limiter, rules } = await session.limiter({ overrides: true });
  // The limiter began loading the overrides when it was made; peek() applies those it holds.
  await limiter.overrides.refresh();
  const [decision, inForce] = await Promise.all([limiter.peek(keys), overridesInForce(limiter, keys)]);
  failIfUnmeasured(decision);
  const now = limiter.now();
  const entries = decision.rules.map((r, i) => {
    const held = r.scope === 'global' ? undefined : inForce.get(scopeKeyOf(keys, r.scope) ?? '');
    const change = held?.rules.find((c) => c.name === r.name);
    const override =
      held === undefined || change === undefined
        ? null
        : { key: held.key, change: withoutName(change), untilMs: held.untilMs ?? null, until: held.untilMs === undefined ? null : isoDate(held.untilMs) };
    const blocked =
      r.blocked === undefined
        ? null
        : {
            manual: r.blocked.manual === true,
            untilMs: r.blocked.untilMs ?? now + r.blocked.leftMs,
            until: isoDate(r.blocked.untilMs ?? now + r.blocked.leftMs),
            leftMs: r.blocked.leftMs,
            strike: r.blocked.strike,
            ...(r.blocked.reason === undefined ? {} : { reason: r.blocked.reason }),
          };
    return {
      name: r.name,
      scope: r.scope,
      algorithm: rules[i]?.algorithm ?? 'sliding-window',
      allowed: r.allowed,
      limit: r.limit,
      remaining: r.remaining,
      resetMs: r.resetMs,
      retryAfterMs: r.retryAfterMs,
      blocked,
      override,
    };
  });
  const overridden = entries.some((e) => e.override !== null);
  const verdict = decision.allowed ? 'a call would be allowed' : `a call would be denied for ${formatDuration(decision.retryAfterMs)}`;
  const text = [
    `${keyText(keys)}: ${verdict} (binding rule: ${decision.rule})`,
    '',
    table(
      ['RULE', 'SCOPE', 'ALGORITHM', 'LIMIT', 'REMAINING', 'FULL IN', 'BLOCKED', ...(overridden ? ['OVERRIDE'] : [])],
      entries.map((e) => [
        e.name,
        e.scope,
        e.algorithm,
        String(e.limit),
        String(e.remaining),
        formatDuration(e.resetMs),
        e.blocked === null
          ? '-'
          : `${e.blocked.manual ? 'by hand' : `by the rule (strike ${e.blocked.strike})`} until ${e.blocked.until} (${formatDuration(e.blocked.leftMs)} left)${
              e.blocked.reason === undefined ? '' : `: ${e.blocked.reason}`
            }`,
        ...(!overridden
          ? []
          : e.override === null
            ? ['-']
            : [`${e.override.key}: ${changeText(e.override.change)}${untilText(e.override.untilMs ?? undefined, now)}`]),
      ]),
    ),
  ].join('\n');
  return { json: { key: keys, allowed: decision.allowed, rule: decision.rule, retryAfterMs: decision.retryAfterMs, rules: entries }, text };
};

/** `reset <key>`: forgets the key in every rule (counts and blocks). */
export const reset: Run<'reset'> = async (session, { keys }) => {
  const { limiter } = await session.limiter();
  await limiter.reset(keys);
  const names = limiter.rules.map((r) => r.name);
  return { json: { key: keys, reset: true, rules: names }, text: `reset ${keyText(keys)} under ${names.join(', ')}` };
};

/** `block <key> --for 15m [--reason ...] [--rule ...]`: a block by hand, on every instance sharing the store. */
export const block: Run<'block'> = async (session, { keys, ms, reason, rule }) => {
  const { limiter } = await session.limiter();
  const options: { rule?: string; reason?: string } = {};
  if (rule !== undefined) options.rule = rule;
  if (reason !== undefined) options.reason = reason;
  const now = limiter.now();
  await limiter.block(keys, ms, options);
  const rules = rule !== undefined ? [rule] : limiter.rules.filter((r) => r.algorithm !== 'concurrency' && r.scope !== 'global').map((r) => r.name);
  const untilMs = now + ms;
  return {
    json: { key: keys, blocked: true, rules, ms, untilMs, until: isoDate(untilMs), ...(reason === undefined ? {} : { reason }) },
    text: `blocked ${keyText(keys)} for ${formatDuration(ms)}, until ${isoDate(untilMs)}, under ${rules.join(', ')}${reason === undefined ? '' : `: ${reason}`}`,
  };
};

/** `unblock <key> [--rule ...]`: lifts its blocks, by hand or a rule's; counts stay. */
export const unblock: Run<'unblock'> = async (session, { keys, rule }) => {
  const { limiter } = await session.limiter();
  await limiter.unblock(keys, rule === undefined ? {} : { rule });
  return {
    json: { key: keys, unblocked: true, ...(rule === undefined ? {} : { rule }) },
    text: `unblocked ${keyText(keys)}${rule === undefined ? '' : ` under ${rule}`}`,
  };
};

/** `blocked [--count n] [--cursor c]`: the keys blocked now, a page at a time. */
export const blocked: Run<'blocked'> = async (session, { count, cursor }) => {
  const { limiter } = await session.limiter();
  const options: { count?: number; cursor?: string } = {};
  if (count !== undefined) options.count = count;
  if (cursor !== undefined) options.cursor = cursor;
  const page = await limiter.blocked(options);
  const now = limiter.now();
  const items = page.items.map((item) => ({ ...item, until: isoDate(item.untilMs), leftMs: Math.max(0, item.untilMs - now) }));
  const lines =
    items.length === 0
      ? ['no key is blocked']
      : [
          table(
            ['KEY', 'SCOPE', 'RULE', 'UNTIL', 'LEFT', 'BY', 'REASON'],
            items.map((i) => [i.key, i.scope, i.rule, i.until, formatDuration(i.leftMs), i.manual ? 'hand' : 'rule', i.reason ?? '']),
          ),
        ];
  if (page.cursor !== '') lines.push('', `more: floodgate blocked --cursor '${page.cursor.replaceAll("'", "'\\''")}'`);
  return { json: { items, cursor: page.cursor }, text: lines.join('\n') };
};

/**
 * `top [--n 10] [--period 1m]`: the keys denied most over the period under way and the one before,
 * on every process whose limiter has analytics on (same Redis, prefix and period), `limiter.top()`.
 */
export const top: Run<'top'> = async (session, { n, periodMs }) => {
  const limiter = await session.topLimiter(periodMs);
  const { items, sinceMs } = await limiter.top(n === undefined ? {} : { n });
  const since = isoDate(sinceMs);
  const text =
    items.length === 0
      ? `no key was denied since ${since} (periods of ${formatDuration(periodMs)}; only limiters with analytics on count)`
      : [
          table(
            ['KEY', 'SCOPE', 'DENIED', '±ERROR'],
            items.map((i) => [i.key, i.scope, String(i.denied), String(i.error)]),
          ),
          '',
          `since ${since} (the period of ${formatDuration(periodMs)} under way and the one before)`,
        ].join('\n');
  return { json: { items, sinceMs, since }, text };
};

const rulesTable = (rules: readonly RuleOptions[]): string =>
  table(
    ['NAME', 'SCOPE', 'ALGORITHM', 'LIMIT', 'WINDOW', 'OPTIONS'],
    rules.map((r) => {
      const extra = (['burst', 'segments', 'mode', 'blockMs', 'maxBlockMs'] as const).filter((k) => r[k] !== undefined).map((k) => `${k}=${String(r[k])}`);
      return [r.name ?? 'default', r.scope ?? 'key', r.algorithm ?? 'sliding-window', String(r.limit), formatDuration(r.windowMs), extra.join(' ')];
    }),
  );

/** `rules get`: the rules --rules names (a RedisRuleSource's key, or a file), validated. */
export const rulesGet: Run<'rules get'> = async (session) => {
  const rules = await session.rules();
  const location = rulesLocation(session.options.rules);
  const from = location.kind === 'file' ? { file: location.path } : { key: location.key };
  return { json: { ...from, rules }, text: `${location.kind === 'file' ? location.path : `Redis key ${location.key}`}:\n\n${rulesTable(rules)}` };
};

/**
 * `rules apply <file>`: validates the file's rules, then publishes them through RedisRuleSource
 * (stored in its key, announced on `<key>:changed`): every attached limiter switches within ms.
 * Rules that fail validation are refused before anything reaches Redis.
 */
export const rulesApply: Run<'rules apply'> = async (session, { file, dryRun }) => {
  const key = redisKeyOf(rulesLocation(session.options.rules), 'rules apply');
  const rules = readRulesFile(file);
  const channel = `${key}:changed`;
  if (dryRun) {
    return {
      json: { file, key, rules, published: false },
      text: `${file}: ${rules.length} valid rule${rules.length === 1 ? '' : 's'} (dry run: nothing published)\n\n${rulesTable(rules)}`,
    };
  }
  const source = new RedisRuleSource({ client: await session.redis(), key, pollMs: 0 });
  try {
    await source.publish(rules);
  } finally {
    source.close();
  }
  return {
    json: { file, key, channel, rules, published: true },
    text: `published ${rules.length} rule${rules.length === 1 ? '' : 's'} from ${file} to ${key} (announced on ${channel})\n\n${rulesTable(rules)}`,
  };
};

/** The key of a scope among a call's keys, as the limiter picks it. */
function scopeKeyOf(keys: Keys, scope: string): string | undefined {
  if (typeof keys === 'string') return scope === 'key' ? keys : undefined;
  return keys[scope];
}

/**
 * The override in force for each key of the call, as the limiter picks it: the key's own, else
 * the one of the longest prefix it starts with (`tenant:acme:*`, down to `*`). Read from the
 * store, one key or prefix each (all at once): as many reads as the key is long, whatever the
 * number of overrides.
 */
async function overridesInForce(limiter: Limiter, keys: Keys): Promise<Map<string, Limiter.Override>> {
  const found = new Map<string, Limiter.Override>();
  const scopeKeys = new Set<string>();
  for (const rule of limiter.rules) {
    const key = rule.scope === 'global' ? undefined : scopeKeyOf(keys, rule.scope);
    if (key !== undefined && key !== '') scopeKeys.add(key);
  }
  await Promise.all(
    [...scopeKeys].map(async (key) => {
      // Longest first: the key itself (unless it ends in '*', which only a prefix's record does), then its prefixes.
      const candidates = [...(key.endsWith('*') ? [] : [key]), ...Array.from({ length: key.length + 1 }, (_, i) => `${key.slice(0, key.length - i)}*`)];
      const held = await Promise.all(candidates.map((candidate) => limiter.overrides.get(candidate)));
      const first = held.find((override) => override !== undefined);
      if (first !== undefined) found.set(key, first);
    }),
  );
  return found;
}

const withoutName = ({ name: _, ...change }: Limiter.RuleOverride): Omit<Limiter.RuleOverride, 'name'> => change;

/** What an override changes of a rule: `limit=5000 window=1m`. */
function changeText(change: Omit<Limiter.RuleOverride, 'name'>): string {
  return Object.entries(change)
    .map(([field, value]) => (field === 'windowMs' && typeof value === 'number' ? `window=${formatDuration(value)}` : `${field}=${String(value)}`))
    .join(' ');
}

/** `, until <date> (<left> left)`, or nothing for an override that stays until deleted. */
const untilText = (untilMs: number | undefined, now: number): string =>
  untilMs === undefined ? '' : `, until ${isoDate(untilMs)} (${formatDuration(untilMs - now)} left)`;

/** An override as the commands print it in JSON: its end as a date too (null: until deleted). */
function overrideJson(override: Limiter.Override, now: number) {
  const untilMs = override.untilMs ?? null;
  return {
    key: override.key,
    rules: override.rules,
    untilMs,
    until: untilMs === null ? null : isoDate(untilMs),
    leftMs: untilMs === null ? null : Math.max(0, untilMs - now),
  };
}

/** `per-user limit=5000; per-day limit=100000`. */
const rulesText = (override: Limiter.Override): string => override.rules.map((r) => `${r.name} ${changeText(withoutName(r))}`).join('; ');

/**
 * `overrides set <key> --rule <name> --limit <n> [--window d] [--burst n] [--ttl d]`: the key's
 * override (or a prefix's, ending in '*'), replacing the one it had, for every limiter on the
 * store with overrides on (at their next load). Refused by core's checks (a rule the limiter does
 * not have, a limit that is no positive integer, ...) before anything is written.
 */
export const overridesSet: Run<'overrides set'> = async (session, { key, rules, ttlMs }) => {
  const { limiter } = await session.limiter({ overrides: true });
  const before = await limiter.overrides.get(key);
  await limiter.overrides.set(key, rules, ttlMs === undefined ? undefined : { ttlMs });
  const now = limiter.now();
  const after = (await limiter.overrides.get(key)) ?? { key, rules, ...(ttlMs === undefined ? {} : { untilMs: now + ttlMs }) };
  const lines = [`set the override of ${key}: ${rulesText(after)}${after.untilMs === undefined ? ', until deleted' : untilText(after.untilMs, now)}`];
  if (before !== undefined) lines.push(`(it replaces ${rulesText(before)}${untilText(before.untilMs, now)})`);
  return { json: { ...overrideJson(after, now), set: true, replaced: before === undefined ? null : overrideJson(before, now) }, text: lines.join('\n') };
};

/** `overrides get <key>`: the key's own override (or a prefix's), as the store holds it; none is exit 3. */
export const overridesGet: Run<'overrides get'> = async (session, { key }) => {
  const { limiter } = await session.limiter({ overrides: true });
  const override = await limiter.overrides.get(key);
  if (override === undefined) {
    throw new CliError(
      CliErrorCodes.NOT_FOUND,
      `no override is set for '${key}' (its own; 'floodgate inspect ${key}' shows one a prefix gives it).`,
      ExitCodes.NOT_FOUND,
    );
  }
  const now = limiter.now();
  const text = [
    `${key}: ${override.untilMs === undefined ? 'until deleted' : untilText(override.untilMs, now).slice(2)}`,
    '',
    table(
      ['RULE', 'CHANGES'],
      override.rules.map((r) => [r.name ?? '', changeText(withoutName(r))]),
    ),
  ].join('\n');
  return { json: overrideJson(override, now), text };
};

/** `overrides list [--count n] [--cursor c]`: the overrides in force, in key order, a page at a time. */
export const overridesList: Run<'overrides list'> = async (session, { count, cursor }) => {
  const { limiter } = await session.limiter({ overrides: true });
  const options: { count?: number; cursor?: string } = {};
  if (count !== undefined) options.count = count;
  if (cursor !== undefined) options.cursor = cursor;
  const page = await limiter.overrides.list(options);
  const now = limiter.now();
  const items = page.items.map((item) => overrideJson(item, now));
  const lines =
    items.length === 0
      ? ['no override is set']
      : [
          table(
            ['KEY', 'RULES', 'UNTIL', 'LEFT'],
            page.items.map((o, i) => [
              o.key,
              rulesText(o),
              items[i]?.until ?? '-',
              items[i]?.leftMs == null ? 'until deleted' : formatDuration(items[i]?.leftMs ?? 0),
            ]),
          ),
        ];
  if (page.cursor !== '') lines.push('', `more: floodgate overrides list --cursor '${page.cursor.replaceAll("'", "'\\''")}'`);
  return { json: { items, cursor: page.cursor }, text: lines.join('\n') };
};

/** `overrides delete <key>`: the key's override (or a prefix's) is gone, for every limiter at its next load. */
export const overridesDelete: Run<'overrides delete'> = async (session, { key }) => {
  const { limiter } = await session.limiter({ overrides: true });
  const before = await limiter.overrides.get(key);
  await limiter.overrides.delete(key);
  const now = limiter.now();
  return {
    json: { key, deleted: true, was: before === undefined ? null : overrideJson(before, now) },
    text: before === undefined ? `${key} had no override in force (nothing to delete)` : `deleted the override of ${key} (${rulesText(before)})`,
  };
};
