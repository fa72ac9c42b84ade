import { type Keys, RedisRuleSource, type RuleOptions } from '@floodgate/core';
import type { Command } from './args.js';
import { formatDuration } from './duration.js';
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

/** `inspect <key>`: every rule's state for the key, as a peek sees it (nothing is consumed). */
export const inspect: Run<'inspect'> = async (session, { keys }) => {
  const { limiter, rules } = await session.limiter();
  const decision = await limiter.peek(keys);
  failIfUnmeasured(decision);
  const now = limiter.now();
  const entries = decision.rules.map((r, i) => {
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
    };
  });
  const verdict = decision.allowed ? 'a call would be allowed' : `a call would be denied for ${formatDuration(decision.retryAfterMs)}`;
  const text = [
    `${keyText(keys)}: ${verdict} (binding rule: ${decision.rule})`,
    '',
    table(
      ['RULE', 'SCOPE', 'ALGORITHM', 'LIMIT', 'REMAINING', 'FULL IN', 'BLOCKED'],
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
