import { ErrorCodes, isFloodgateError } from '@floodgate/core';

/** What the process exits with; scripts may rely on these (see the README). */
export const ExitCodes = {
  /** The command did what it was asked. */
  OK: 0,
  /** Redis could not be reached, did not answer in time, or failed the command. */
  STORE: 1,
  /** Bad usage or bad input: an unknown command or flag, a malformed duration, rules that fail validation. */
  USAGE: 2,
  /** What the command was asked to read does not exist (rules in a Redis key where nothing is stored). */
  NOT_FOUND: 3,
} as const;

export type ExitCode = (typeof ExitCodes)[keyof typeof ExitCodes];

/** The CLI's own error codes, beside core's ERR_FG_* codes (rule validation, store failures). */
export const CliErrorCodes = {
  /** An unknown command or flag, a missing or extra argument, a flag's value of the wrong form. */
  USAGE: 'ERR_FG_USAGE',
  /** A duration that is not a whole number of ms, s, m, h or d (`15m`, `1h30m`, `500ms`). */
  DURATION: 'ERR_FG_DURATION',
  /** A rules file that cannot be read. */
  FILE: 'ERR_FG_FILE',
  /** Nothing is stored where the rules were looked for. */
  NOT_FOUND: 'ERR_FG_NOT_FOUND',
  /** The dashboard cannot listen where it was asked to (a port in use, an address this machine lacks). */
  LISTEN: 'ERR_FG_LISTEN',
} as const;

/** An error the CLI reports as one line on stderr, and the exit code it ends with. */
export class CliError extends Error {
  override readonly name = 'CliError';
  readonly code: string;
  readonly exitCode: ExitCode;

  constructor(code: string, message: string, exitCode: ExitCode, options?: { cause?: unknown }) {
    super(`${message} [${code}]`, options);
    this.code = code;
    this.exitCode = exitCode;
  }
}

export const usage = (message: string): CliError => new CliError(CliErrorCodes.USAGE, message, ExitCodes.USAGE);

const STORE_CODES: readonly string[] = [ErrorCodes.STORE_TIMEOUT, ErrorCodes.STORE_UNAVAILABLE, ErrorCodes.STORE_REPLY];

/**
 * Any error, as the CLI reports it: its own errors as they are; a FloodgateError keeps its code
 * (store failures exit 1, every other code is bad input: 2); anything else came from the Redis
 * client (a refused connection, a command timeout, a closed connection): exit 1.
 */
export function toCliError(error: unknown): CliError {
  if (error instanceof CliError) return error;
  if (isFloodgateError(error)) {
    const message = error.message.replace(/ \[ERR_FG_[A-Z_]+\]$/, '');
    return new CliError(error.code, message, STORE_CODES.includes(error.code) ? ExitCodes.STORE : ExitCodes.USAGE, { cause: error });
  }
  const message = error instanceof Error ? error.message : String(error);
  const timedOut = /timed? ?out/i.test(message);
  return new CliError(timedOut ? ErrorCodes.STORE_TIMEOUT : ErrorCodes.STORE_UNAVAILABLE, `Redis failed the command: ${message}`, ExitCodes.STORE, {
    cause: error,
  });
}
