import { parseArgs } from 'node:util';
import type { Keys } from '@floodgate/core';
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
  | { name: 'rules get' }
  | { name: 'rules apply'; file: string; dryRun: boolean };

export interface Invocation {
  options: GlobalOptions;
  command: Command;
}

export const DEFAULTS = { redisUrl: 'redis://127.0.0.1:6379', prefix: 'fg:', storePrefix: '', rules: 'fg:rules', timeout: '5s' } as const;

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
  rule: { type: 'string' },
  scope: { type: 'string', multiple: true },
  count: { type: 'string' },
  cursor: { type: 'string' },
  'dry-run': { type: 'boolean' },
} as const;

/** Which command takes which of its own flags, and its positional arguments. */
const COMMANDS: Record<string, { flags: readonly (keyof typeof COMMAND_FLAGS)[]; args: string }> = {
  inspect: { flags: ['scope'], args: '<key>' },
  reset: { flags: ['scope'], args: '<key>' },
  block: { flags: ['for', 'reason', 'rule', 'scope'], args: '<key>' },
  unblock: { flags: ['rule', 'scope'], args: '<key>' },
  blocked: { flags: ['count', 'cursor'], args: '' },
  'rules get': { flags: [], args: '' },
  'rules apply': { flags: ['dry-run'], args: '<file>' },
};

/** Reads the command line (`argv` without node and the script) and the environment into what to do. */
export function parseInvocation(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): Invocation {
  let parsed: ReturnType<typeof parseArgs<{ args: string[]; options: typeof GLOBAL_FLAGS & typeof COMMAND_FLAGS; allowPositionals: true; strict: true }>>;
  try {
    parsed = parseArgs({ args: [...argv], options: { ...GLOBAL_FLAGS, ...COMMAND_FLAGS }, allowPositionals: true, strict: true });
  } catch (error) {
    // node's own messages name the flag ("Unknown option '--fro'"); they end in advice for scripts run with node, which does not apply here.
    const message = error instanceof Error ? error.message.replace(/\. To specify a positional argument.*$/s, '') : String(error);
    throw usage(`${message}. See floodgate --help.`);
  }
  const { values, positionals } = parsed;
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
  const name = first === 'rules' ? `rules ${rest.shift() ?? ''}` : first;
  const spec = COMMANDS[name];
  if (spec === undefined) {
    throw usage(
      first === 'rules'
        ? `'rules' takes 'get' or 'apply <file>', got '${name.slice(6)}'.`
        : `unknown command '${first}'; the commands are inspect, reset, block, unblock, blocked, rules get and rules apply.`,
    );
  }
  for (const flag of Object.keys(COMMAND_FLAGS) as (keyof typeof COMMAND_FLAGS)[]) {
    if (values[flag] !== undefined && !spec.flags.includes(flag)) throw usage(`${name} takes no --${flag}.`);
  }
  const wanted = spec.args === '' ? 0 : 1;
  if (rest.length > wanted)
    throw usage(`${name} takes ${wanted === 0 ? 'no argument' : `one argument, ${spec.args}`}; got ${rest.map((a) => `'${a}'`).join(' ')}.`);

  const keys = (): Keys => keysOf(rest[0], values.scope ?? [], name);
  switch (name) {
    case 'inspect':
    case 'reset':
      return { options, command: { name, keys: keys() } };
    case 'block': {
      if (values.for === undefined) throw usage('block needs --for <duration>, e.g. --for 15m.');
      const command: Command = { name, keys: keys(), ms: parseDuration(values.for) };
      if (values.reason !== undefined) command.reason = values.reason;
      if (values.rule !== undefined) command.rule = values.rule;
      return { options, command };
    }
    case 'unblock': {
      const command: Command = { name, keys: keys() };
      if (values.rule !== undefined) command.rule = values.rule;
      return { options, command };
    }
    case 'blocked': {
      const command: Command = { name };
      if (values.count !== undefined) {
        if (!/^\d+$/.test(values.count)) throw usage(`--count takes a whole number of keys, got '${values.count}'.`);
        command.count = Number(values.count);
      }
      if (values.cursor !== undefined) command.cursor = values.cursor;
      return { options, command };
    }
    case 'rules get':
      return { options, command: { name } };
    default: {
      const file = rest[0];
      if (file === undefined) throw usage('rules apply takes the rules file: floodgate rules apply rules.yaml.');
      return { options, command: { name: 'rules apply', file, dryRun: values['dry-run'] ?? false } };
    }
  }
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
