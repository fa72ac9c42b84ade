import { ErrorCodes } from '@floodgate/core';
import { Redis } from 'ioredis';
import { redact } from './args.js';
import { CliError, ExitCodes } from './errors.js';

/**
 * A connection to Redis that never waits longer than `timeoutMs`: to connect (a refused port fails
 * at once, a server that accepts but never answers fails at the deadline), and for each command
 * (ioredis's commandTimeout). No offline queue and no reconnection: a command on a lost connection
 * fails at once instead of waiting for a server that may not come back. With `reconnect` (a
 * process that serves, the dashboard), a connection made once is made again after it is lost,
 * every 100 ms to 2 s; its commands still fail at once meanwhile.
 */
export async function connectRedis(url: string, timeoutMs: number, options: { reconnect?: boolean } = {}): Promise<Redis> {
  let connected = false;
  const redis = new Redis(url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    retryStrategy: (times: number) => (connected && options.reconnect === true ? Math.min(times * 100, 2_000) : null),
    // How long disconnect() waits for a server that does not close its end (a frozen one) before it destroys the socket.
    disconnectTimeout: 200,
  });
  let last: Error | undefined;
  // ioredis prints unhandled 'error' events; the failure is reported once, below or by the command.
  redis.on('error', (error: Error) => {
    last = error;
  });
  try {
    await deadline(redis.connect(), timeoutMs, () => new Error(`no answer within ${timeoutMs} ms`));
    connected = true;
    return redis;
  } catch (error) {
    // A connection that failed has ended already ('end'); disconnecting it again would wait for a close that has come.
    if (redis.status !== 'end') redis.disconnect();
    const why = (last ?? (error instanceof Error ? error : new Error(String(error)))).message;
    const timedOut = /no answer within|timed? ?out/i.test(why);
    throw new CliError(
      timedOut ? ErrorCodes.STORE_TIMEOUT : ErrorCodes.STORE_UNAVAILABLE,
      `cannot connect to Redis at ${redact(url)}: ${why}. Is it running? Set --redis or FLOODGATE_REDIS_URL.`,
      ExitCodes.STORE,
      { cause: error },
    );
  }
}

/** `promise`, or the error `late()` makes once `ms` have passed. */
export function deadline<T>(promise: Promise<T>, ms: number, late: () => Error): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(late()), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
