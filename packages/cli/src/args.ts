import { parseArgs } from 'node:util';
import type { Keys, Limiter } from '@floodgate/core';
import { parseDuration } from './duration.js';
import { usage } from './errors.js';

/** The flags every command takes. */
export interface GlobalOptions {
  /** redis:// or rediss:// URL. */
  redisUrl: string;
  /** The limiter's prefix (createLimiter's `prefix`). */
  prefix: string;
  /** The RedisStore's prefix (RedisStore's `prefix`), before the limiter's. */
  storePrefix: string;
  /** A rules file (.json, .yaml, .yml, or any file that exists), or the Redis key of a RedisRuleSource. */
  rules: string;
  json: boolean;
  /** How long to wait for Redis: to connect, and for each command. */
  timeoutMs: number;
}

export type Command =
  | { name: 'help' }
  | { name: 'inspect'; keys: Keys }
  | { name: 'reset'; keys: Keys }
  | { name: 'block'; keys: Keys; ms: number; reason?: string; rule?: string }
  | { name: 'unblock'; keys: Keys; rule?: string }
  | { name: 'blocked'; count?: number; cursor?: string }
  | { name: 'top'; n?: number; periodMs: number }
  | { name: 'rules get' }
  | { name: 'rules apply'; file: string; dryRun: boolean }
  | { name: 'overrides set'; key: string; rules: Limiter.RuleOverride[]; ttlMs?: number }
  | { name: 'overrides get'; key: string }
  | { name: 'overrides list'; count?: number; cursor?: string }
  | { name: 'overrides delete'; key: string }
  | { name: 'dashboard'; port: number; host: string; token?: string; periodMs: number };

export interface Invocation {
  options: GlobalOptions;
  command: Command;
}

export const DEFAULTS = {
  redisUrl: 'redis://127.0.0.1:6379',
  prefix: 'fg:',
  storePrefix: '',
  rules: 'fg:rules',
  timeout: '5s',
  period: '1m',
  port: 8080,
  host: '127.0.0.1',
} as const;

const GLOBAL_FLAGS = {
  redis: { type: 'string' },
  prefix: { type: 'string' },
  'store-prefix': { type: 'string' },
  rules: { type: 'string' },
  json: { type: 'boolean' },
  timeout: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

const COMMAND_FLAGS = {
  for: { type: 'string' },
  reason: { type: 'string' },
  // Several only for `overrides set`, where each --rule starts the change of one rule.
  rule: { type: 'string', multiple: true },
  limit: { type: 'string', multiple: true },
  window: { type: 'string', multiple: true },
  burst: { type: 'string', multiple: true },
  ttl: { type: 'string' },
  scope: { type: 'string', multiple: true },
  count: { type: 'string' },
  cursor: { type: 'string' },
  'dry-run': { type: 'boolean' },
  n: { type: 'string' },
  period: { type: 'string' },
  port: { type: 'string' },
  host: { type: 'string' },
  token: { type: 'string' },
} as const;

/** Which command takes which of its own flags, and its positional arguments. */
const COMMANDS: Record<string, { flags: readonly (keyof typeof COMMAND_FLAGS)[]; args: string }> = {
  inspect: { flags: ['scope'], args: '<key>' },
  reset: { flags: ['scope'], args: '<key>' },
  block: { flags: ['for', 'reason', 'rule', 'scope'], args: '<key>' },
  unblock: { flags: ['rule', 'scope'], args: '<key>' },
  blocked: { flags: ['count', 'cursor'], args: '' },
  top: { flags: ['n', 'period'], args: '' },
  'rules get': { flags: [], args: '' },
  'rules apply': { flags: ['dry-run'], args: '<file>' },
  'overrides set': { flags: ['rule', 'limit', 'window', 'burst', 'ttl'], args: '<key>' },
  'overrides get': { flags: [], args: '<key>' },
  'overrides list': { flags: ['count', 'cursor'], args: '' },
  'overrides delete': { flags: [], args: '<key>' },
  dashboard: { flags: ['port', 'host', 'token', 'period'], args: '' },
};

/** The commands with a word after them, and what they take. */
const GROUPS: Record<string, string> = { rules: "'get' or 'apply <file>'", overrides: "'set', 'get', 'list' or 'delete'" };

/** Reads the command line (`argv` without node and the script) and the environment into what to do. */
export function parseInvocation(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): Invocation {
  let parsed: ReturnType<
    typeof parseArgs<{ args: string[]; options: typeof GLOBAL_FLAGS & typeof COMMAND_FLAGS; allowPositionals: true; strict: true; tokens: true }>
  >;
  try {
    parsed = parseArgs({ args: [...argv], options: { ...GLOBAL_FLAGS, ...COMMAND_FLAGS }, allowPositionals: true, strict: true, tokens: true });
  } catch (error) {
    // node's own messages name the flag ("Unknown option '--fro'"); they end in advice for scripts run with node, which does not apply here.
    const message = error instanceof Error ? error.message.replace(/\. To specify a positional argument.*$/s, '') : String(error);
    throw usage(`${message}. See floodgate --help.`);
  }
  const { values, positionals, tokens } = parsed;
  const options: GlobalOptions = {
    redisUrl: values.redis ?? env.FLOODGATE_REDIS_URL ?? DEFAULTS.redisUrl,
    prefix: values.prefix ?? DEFAULTS.prefix,
    storePrefix: values['store-prefix'] ?? DEFAULTS.storePrefix,
    rules: values.rules ?? DEFAULTS.rules,
    json: values.json ?? false,
    timeoutMs: parseDuration(values.timeout ?? DEFAULTS.timeout),
  };
  if (options.rules === '') throw usage('--rules must name a rules file or a Redis key, not be empty.');
  checkUrl(options.redisUrl);
  if (values.help === true) return { options, command: { name: 'help' } };

  const [first, ...rest] = positionals;
  if (first === undefined) throw usage('no command given. See floodgate --help.');
  const group = GROUPS[first];
  const name = group === undefined ? first : `${first} ${rest.shift() ?? ''}`;
  const spec = COMMANDS[name];
  if (spec === undefined) {
    throw usage(
      group !== undefined
        ? `'${first}' takes ${group}, got '${name.slice(first.length + 1)}'.`
        : `unknown command '${first}'; the commands are inspect, reset, block, unblock, blocked, top, rules get, rules apply, overrides set, get, list, delete and dashboard.`,
    );
  }
  for (const flag of Object.keys(COMMAND_FLAGS) as (keyof typeof COMMAND_FLAGS)[]) {
    if (values[flag] !== undefined && !spec.flags.includes(flag)) throw usage(`${name} takes no --${flag}.`);
  }
  const wanted = spec.args === '' ? 0 : 1;
  if (rest.length > wanted)
    throw usage(`${name} takes ${wanted === 0 ? 'no argument' : `one argument, ${spec.args}`}; got ${rest.map((a) => `'${a}'`).join(' ')}.`);

  const keys = (): Keys => keysOf(rest[0], values.scope ?? [], name);
  const key = (): string => {
    if (rest[0] === undefined) throw usage(`${name} takes the key: floodgate ${name} <key> (a prefix of keys when it ends in '*').`);
    return rest[0];
  };
  const rule = (): string | undefined => {
    if ((values.rule?.length ?? 0) > 1) throw usage(`${name} takes one --rule.`);
    return values.rule?.[0];
  };
  const page = <C extends { count?: number; cursor?: string }>(command: C): C => {
    if (values.count !== undefined) {
      if (!/^\d+$/.test(values.count)) throw usage(`--count takes a whole number, got '${values.count}'.`);
      command.count = Number(values.count);
    }
    if (values.cursor !== undefined) command.cursor = values.cursor;
    return command;
  };
  switch (name) {
    case 'inspect':
    case 'reset':
      return { options, command: { name, keys: keys() } };
    case 'block': {
      if (values.for === undefined) throw usage('block needs --for <duration>, e.g. --for 15m.');
      const command: Command = { name, keys: keys(), ms: parseDuration(values.for) };
      if (values.reason !== undefined) command.reason = values.reason;
      const one = rule();
      if (one !== undefined) command.rule = one;
      return { options, command };
    }
    case 'unblock': {
      const command: Command = { name, keys: keys() };
      const one = rule();
      if (one !== undefined) command.rule = one;
      return { options, command };
    }
    case 'blocked':
      return { options, command: page<Extract<Command, { name: 'blocked' }>>({ name }) };
    case 'overrides list':
      return { options, command: page<Extract<Command, { name: 'overrides list' }>>({ name }) };
    case 'top': {
      // --n as typed, for core's top() to refuse what is no integer from 1 to 10000 (ERR_FG_OPTION).
      const command: Command = { name, periodMs: parseDuration(values.period ?? DEFAULTS.period) };
      if (values.n !== undefined) command.n = count(values.n);
      return { options, command };
    }
    case 'rules get':
      return { options, command: { name } };
    case 'overrides set': {
      const command: Command = { name, key: key(), rules: ruleChanges(tokens) };
      if (values.ttl !== undefined) command.ttlMs = parseDuration(values.ttl);
      return { options, command };
    }
    case 'overrides get':
    case 'overrides delete':
      return { options, command: { name, key: key() } };
    case 'dashboard':
      if (options.json) throw usage('dashboard takes no --json: it serves a page until stopped.');
      return { options, command: dashboardOf(values, env) };
    default: {
      const file = rest[0];
      if (file === undefined) throw usage('rules apply takes the rules file: floodgate rules apply rules.yaml.');
      return { options, command: { name: 'rules apply', file, dryRun: values['dry-run'] ?? false } };
    }
  }
}

/**
 * `dashboard`'s flags: the address to listen on, and who may use it. A host other than loopback
 * needs a token (--token, or FLOODGATE_DASHBOARD_TOKEN): the dashboard blocks and unblocks keys,
 * changes limits and rules, so it is never served to the network without one.
 */
function dashboardOf(
  values: { port?: string | undefined; host?: string | undefined; token?: string | undefined; period?: string | undefined },
  env: Readonly<Record<string, string | undefined>>,
): Extract<Command, { name: 'dashboard' }> {
  let port: number = DEFAULTS.port;
  if (values.port !== undefined) {
    if (!/^\d{1,5}$/.test(values.port) || Number(values.port) > 65_535)
      throw usage(`--port takes a port from 0 to 65535 (0: any free port), got '${values.port}'.`);
    port = Number(values.port);
  }
  const host = values.host ?? DEFAULTS.host;
  if (host === '') throw usage('--host must name an address to listen on, e.g. 127.0.0.1, not be empty.');
  // An empty variable is no token (as if unset); an empty --token is a mistake.
  const token = values.token ?? (env.FLOODGATE_DASHBOARD_TOKEN === '' ? undefined : env.FLOODGATE_DASHBOARD_TOKEN);
  if (token !== undefined && token.trim() === '') throw usage('--token (or FLOODGATE_DASHBOARD_TOKEN) must not be empty.');
  if (token === undefined && !isLoopbackHost(host)) {
    throw usage(
      `--host ${host} is not a loopback address: the dashboard changes blocks, limits and rules, so it needs --token <token> ` +
        '(or FLOODGATE_DASHBOARD_TOKEN) to be served beyond this machine.',
    );
  }
  const command: Extract<Command, { name: 'dashboard' }> = { name: 'dashboard', port, host, periodMs: parseDuration(values.period ?? DEFAULTS.period) };
  if (token !== undefined) command.token = token;
  return command;
}

/** localhost, 127.0.0.0/8 and ::1: the addresses only this machine reaches. */
export function isLoopbackHost(host: string): boolean {
  const bare = host.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  const v4 = bare.startsWith('::ffff:') ? bare.slice(7) : bare;
  return bare === 'localhost' || bare === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4);
}

type Token = NonNullable<ReturnType<typeof parseArgs>['tokens']>[number];

/** The field of a rule each flag of `overrides set` changes, and its value from the flag's. */
const CHANGES = {
  limit: { field: 'limit', value: (text: string) => count(text) },
  burst: { field: 'burst', value: (text: string) => count(text) },
  window: { field: 'windowMs', value: (text: string) => parseDuration(text) },
} as const;

/**
 * A number as typed; anything else as it is, for core to refuse with its own code and words
 * (`--limit 0`, `--limit ten`: ERR_FG_LIMIT, as the rule's own limit would be).
 */
function count(text: string): number {
  return (/^-?\d+(?:\.\d+)?$/.test(text) ? Number(text) : text) as number;
}

/**
 * The rules `overrides set` changes, in the order of the flags: each `--rule <name>` starts the
 * change of one rule, and the `--limit`, `--window`, `--burst` after it are that rule's. With one
 * `--rule` (or none, for a limiter of one rule) the flags may come in any order.
 */
function ruleChanges(tokens: readonly Token[]): Limiter.RuleOverride[] {
  const leading: Limiter.RuleOverride = {};
  const changes: Limiter.RuleOverride[] = [];
  let current = leading;
  for (const token of tokens) {
    if (token.kind !== 'option' || token.value === undefined) continue;
    if (token.name === 'rule') {
      current = { name: token.value };
      changes.push(current);
      continue;
    }
    const change = CHANGES[token.name as keyof typeof CHANGES];
    if (change === undefined) continue;
    if (current[change.field] !== undefined)
      throw usage(`--${token.name} is given twice${current.name === undefined ? '' : ` for rule '${current.name}'`}; each --rule takes its own, after it.`);
    current[change.field] = change.value(token.value);
  }
  const given = (change: Limiter.RuleOverride) => Object.keys(change).some((field) => field !== 'name');
  if (given(leading)) {
    if (changes.length > 1)
      throw usage('with several --rule, each change goes after the --rule it is for: --rule per-minute --limit 50 --rule per-day --limit 5000.');
    const [only] = changes;
    if (only === undefined) return [leading];
    for (const field of Object.keys(leading) as (keyof Limiter.RuleOverride)[])
      if (only[field] !== undefined) throw usage(`--${field === 'windowMs' ? 'window' : field} is given twice for rule '${only.name}'.`);
    Object.assign(only, leading);
  }
  if (changes.length === 0) throw usage('overrides set needs what to change: --rule <name> and --limit <n>, --window <duration> or --burst <n>.');
  for (const change of changes)
    if (!given(change)) throw usage(`--rule ${change.name} changes nothing: give --limit <n>, --window <duration> or --burst <n> after it.`);
  return changes;
}

/** The key argument, with the keys of other scopes given by `--scope name=value`. */
function keysOf(key: string | undefined, scopes: readonly string[], command: string): Keys {
  if (scopes.length === 0) {
    if (key === undefined) throw usage(`${command} takes the key: floodgate ${command} <key> (or --scope <scope>=<key> for rules of other scopes).`);
    return key;
  }
  const keys: Record<string, string> = {};
  if (key !== undefined) keys.key = key;
  for (const pair of scopes) {
    const at = pair.indexOf('=');
    if (at < 1) throw usage(`--scope takes <scope>=<key>, e.g. --scope ip=203.0.113.9, got '${pair}'.`);
    const scope = pair.slice(0, at);
    if (scope in keys) throw usage(`the key of scope '${scope}' is given twice.`);
    keys[scope] = pair.slice(at + 1);
  }
  return keys;
}

function checkUrl(url: string): void {
  let protocol: string;
  try {
    protocol = new URL(url).protocol;
  } catch {
    throw usage(`--redis (or FLOODGATE_REDIS_URL) must be a URL like redis://127.0.0.1:6379, got '${url}'.`);
  }
  if (protocol !== 'redis:' && protocol !== 'rediss:')
    throw usage(`--redis (or FLOODGATE_REDIS_URL) must be a redis:// or rediss:// URL, got '${redact(url)}'.`);
}

/** The URL without its password, for messages. */
export function redact(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return url;
  }
}
