import { existsSync, readFileSync, statSync } from 'node:fs';
import { createLimiter, ErrorCodes, FloodgateError, type RuleOptions } from '@floodgate/core';
import type { Redis } from 'ioredis';
import { parse as parseYaml } from 'yaml';
import { CliError, CliErrorCodes, ExitCodes, usage } from './errors.js';

/** Where `--rules` points: a file, or the Redis key a RedisRuleSource keeps its rules under. */
export type RulesLocation = { kind: 'file'; path: string } | { kind: 'redis'; key: string };

/** A file when the value ends in .json, .yaml or .yml, or names a file that exists; a Redis key otherwise. */
export function rulesLocation(value: string): RulesLocation {
  if (/\.(json|ya?ml)$/i.test(value) || (existsSync(value) && statSync(value).isFile())) return { kind: 'file', path: value };
  return { kind: 'redis', key: value };
}

/**
 * The rules of a file: a list of rules, one rule, or `{ rules: [...] }`, in JSON or YAML (by the
 * extension; YAML for a file without one, which reads JSON too), validated as the limiter does.
 */
export function readRulesFile(path: string): RuleOptions[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const why = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (error as Error).message;
    throw new CliError(CliErrorCodes.FILE, `cannot read the rules file '${path}': ${why}.`, ExitCodes.USAGE, { cause: error });
  }
  let value: unknown;
  try {
    value = /\.json$/i.test(path) ? JSON.parse(text) : parseYaml(text);
  } catch (error) {
    throw new CliError(
      ErrorCodes.RULES,
      `the rules file '${path}' is not valid ${/\.json$/i.test(path) ? 'JSON' : 'YAML'}: ${(error as Error).message}`,
      ExitCodes.USAGE,
      {
        cause: error,
      },
    );
  }
  return checkRules(value, `the rules file '${path}'`);
}

/** The rules stored in a RedisRuleSource's key; nothing stored there is exit 3. */
export async function readStoredRules(redis: Redis, key: string): Promise<RuleOptions[]> {
  const stored = await redis.get(key);
  if (stored === null) {
    throw new CliError(
      CliErrorCodes.NOT_FOUND,
      `no rules are stored in the Redis key '${key}'. Name the key your RedisRuleSource uses with --rules, or a rules file.`,
      ExitCodes.NOT_FOUND,
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(stored);
  } catch (error) {
    throw new CliError(ErrorCodes.RULES, `the Redis key '${key}' holds no JSON: ${stored.slice(0, 60)}`, ExitCodes.USAGE, { cause: error });
  }
  return checkRules(value, `the Redis key '${key}'`);
}

/**
 * The rules as a list, validated by core (createLimiter's own checks, which RedisRuleSource's
 * publish() also makes): a FloodgateError with the code of what is wrong (ERR_FG_LIMIT, ...).
 */
export function checkRules(value: unknown, where: string): RuleOptions[] {
  const list: unknown =
    typeof value === 'object' && value !== null && !Array.isArray(value) && 'rules' in value && Object.keys(value).length === 1
      ? (value as { rules: unknown }).rules
      : value;
  const rules = Array.isArray(list) ? list : [list];
  if (rules.some((rule) => typeof rule !== 'object' || rule === null || Array.isArray(rule))) {
    throw new CliError(
      ErrorCodes.RULES,
      `${where} must hold a list of rules (objects like { name, limit, windowMs }), one rule, or { rules: [...] }.`,
      ExitCodes.USAGE,
    );
  }
  try {
    void createLimiter({ rules: rules as RuleOptions[] }).close();
  } catch (error) {
    if (error instanceof FloodgateError)
      throw new FloodgateError(error.code, `${where}: ${error.message.replace(/ \[ERR_FG_[A-Z_]+\]$/, '')}`, { cause: error });
    throw error;
  }
  return rules as RuleOptions[];
}

/** The rules file a command that writes to Redis cannot take. */
export function redisKeyOf(location: RulesLocation, command: string): string {
  if (location.kind === 'redis') return location.key;
  throw usage(`${command} works on the rules of a RedisRuleSource: --rules must name its Redis key (e.g. --rules fg:rules), not the file '${location.path}'.`);
}
