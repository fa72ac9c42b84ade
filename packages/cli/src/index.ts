/**
 * @packageDocumentation
 * `floodgate`, the command line that operates a Floodgate limiter's state in
 * Redis by hand: inspect, reset, block and unblock a key, list the blocked
 * keys, show the keys denied most, read and publish the rules of a RedisRuleSource, set, read, list and
 * delete the overrides of a key's rules, serve the dashboard. The bin calls
 * {@link run}; it is exported for scripts that would rather call it in
 * process.
 */
import { ErrorCodes } from '@floodgate/core';
import { type Command, parseInvocation } from './args.js';
import {
  block,
  blocked,
  inspect,
  overridesDelete,
  overridesGet,
  overridesList,
  overridesSet,
  type Result,
  reset,
  rulesApply,
  rulesGet,
  top,
  unblock,
} from './commands.js';
import { serveDashboard } from './dashboard.js';
import { CliError, type ExitCode, ExitCodes, toCliError } from './errors.js';
import { HELP } from './help.js';
import { json } from './output.js';
import { deadline } from './redis.js';
import { Session } from './session.js';

export { parseDuration } from './duration.js';
export { CliErrorCodes, type ExitCode, ExitCodes } from './errors.js';

/** Where {@link run} writes: the process's streams by default. */
export interface RunIo {
  stdout?: (text: string) => void;
  stderr?: (text: string) => void;
  /** The environment (FLOODGATE_REDIS_URL, FLOODGATE_DASHBOARD_TOKEN). @defaultValue process.env */
  env?: Readonly<Record<string, string | undefined>>;
  /** Stops `dashboard`, as SIGINT and SIGTERM do (it serves until then; the other commands end by themselves). */
  signal?: AbortSignal;
}

/**
 * Runs one command line (the arguments after `floodgate`) and resolves with its exit code:
 * 0 done, 1 Redis failed, 2 bad usage or input, 3 not found. What it prints goes to
 * `io.stdout` (the result: a table, or one JSON document with `--json`) and `io.stderr`
 * (an error: one line ending in its `[ERR_FG_*]` code). It never throws.
 *
 * @example
 * ```ts
 * const code = await run(['block', '203.0.113.9', '--for', '15m', '--reason', 'credential stuffing']);
 * ```
 */
export async function run(argv: readonly string[], io: RunIo = {}): Promise<ExitCode> {
  const stdout = io.stdout ?? ((text: string) => process.stdout.write(text));
  const stderr = io.stderr ?? ((text: string) => process.stderr.write(text));
  let session: Session | undefined;
  try {
    const { options, command } = parseInvocation(argv, io.env ?? process.env);
    if (command.name === 'help') {
      stdout(HELP);
      return ExitCodes.OK;
    }
    if (command.name === 'dashboard') {
      session = new Session(options, { reconnect: true });
      await serveDashboard(session, command, { stdout, stderr, signal: io.signal });
      return ExitCodes.OK;
    }
    session = new Session(options);
    // Each step waits at most timeoutMs (connecting, each command); the whole command, a few steps, is bounded too.
    const limit = options.timeoutMs * 4;
    const result = await deadline(
      dispatch(session, command),
      limit,
      () => new CliError(ErrorCodes.STORE_TIMEOUT, `Redis did not finish the command within ${limit} ms (4 times --timeout)`, ExitCodes.STORE),
    );
    stdout(`${options.json ? json(result.json) : result.text}\n`);
    return ExitCodes.OK;
  } catch (error) {
    const failure: CliError = toCliError(error);
    stderr(`floodgate: ${failure.message}\n`);
    return failure.exitCode;
  } finally {
    await session?.close();
  }
}

function dispatch(session: Session, command: Exclude<Command, { name: 'help' | 'dashboard' }>): Promise<Result> {
  switch (command.name) {
    case 'inspect':
      return inspect(session, command);
    case 'reset':
      return reset(session, command);
    case 'block':
      return block(session, command);
    case 'unblock':
      return unblock(session, command);
    case 'blocked':
      return blocked(session, command);
    case 'top':
      return top(session, command);
    case 'rules get':
      return rulesGet(session, command);
    case 'rules apply':
      return rulesApply(session, command);
    case 'overrides set':
      return overridesSet(session, command);
    case 'overrides get':
      return overridesGet(session, command);
    case 'overrides list':
      return overridesList(session, command);
    case 'overrides delete':
      return overridesDelete(session, command);
  }
}
