import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ErrorCodes, RedisRuleSource, type RedisRuleSourceOptions } from '@floodgate/core';
import { type DashboardAuth, type DashboardHandler, dashboard } from '@floodgate/dashboard';
import type { Redis } from 'ioredis';
import type { Command } from './args.js';
import { CliError, CliErrorCodes, ExitCodes } from './errors.js';
import { deadline } from './redis.js';
import { rulesLocation } from './rules.js';
import type { Session } from './session.js';

/** How often the dashboard's limiter loads the overrides again: as often as the applications' default. */
const OVERRIDES_REFRESH_MS = 5_000;

export interface ServeIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /** Stops the server, as SIGINT and SIGTERM do. */
  signal?: AbortSignal | undefined;
}

/**
 * `dashboard`: serves @floodgate/dashboard on node:http for the limiter the other commands build
 * (--rules, --prefix, --store-prefix), with the overrides and the applications' analytics, and the
 * rules editor publishing through the RedisRuleSource of --rules when it names a Redis key. Prints
 * `listening on http://HOST:PORT/`, then serves until SIGINT, SIGTERM or `io.signal`, and closes
 * the server (the caller closes the session: the limiter and Redis).
 */
export async function serveDashboard(session: Session, command: Extract<Command, { name: 'dashboard' }>, io: ServeIo): Promise<void> {
  let source: RedisRuleSource | undefined;
  let handler: DashboardHandler | undefined;
  let server: Server | undefined;
  try {
    const limit = session.options.timeoutMs * 4;
    const prepared = deadline(
      (async () => {
        const { limiter } = await session.dashboardLimiter(OVERRIDES_REFRESH_MS, command.periodMs);
        const location = rulesLocation(session.options.rules);
        if (location.kind === 'redis') {
          source = new RedisRuleSource({
            client: ruleSourceClient(await session.redis()),
            key: location.key,
            onError: (error) => io.stderr(`floodgate: ${error.message}\n`),
          });
          await source.attach(limiter);
        }
        return limiter;
      })(),
      limit,
      () => new CliError(ErrorCodes.STORE_TIMEOUT, `Redis did not finish loading the limiter within ${limit} ms (4 times --timeout)`, ExitCodes.STORE),
    );
    const limiter = await prepared;
    handler = dashboard({
      limiter,
      auth: command.token === undefined ? false : tokenAuth(command.token),
      ...(source === undefined ? {} : { ruleSource: source }),
    });
    server = createServer(handler);
    const port = await listen(server, command.port, command.host);
    server.on('error', (error) => io.stderr(`floodgate: the dashboard's server failed: ${error.message}\n`));
    io.stdout(`listening on http://${command.host.includes(':') && !command.host.startsWith('[') ? `[${command.host}]` : command.host}:${port}/\n`);
    await stopped(io.signal);
  } finally {
    handler?.close();
    source?.close();
    if (server?.listening === true) {
      const closing = new Promise<void>((resolve) => server?.close(() => resolve()));
      // Keep-alive connections of a browser would hold close() open.
      server.closeAllConnections();
      await closing;
    }
  }
}

/** Resolves at SIGINT or SIGTERM (or `signal`'s abort), the process's handlers removed again. */
function stopped(signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      signal?.removeEventListener('abort', stop);
      resolve();
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    if (signal?.aborted === true) return stop();
    signal?.addEventListener('abort', stop, { once: true });
  });
}

/** Listens on host:port and resolves with the port (the one the system gave for 0); a failure is ERR_FG_LISTEN, exit 2. */
function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const failed = (error: NodeJS.ErrnoException) => {
      const why = error.code === 'EADDRINUSE' ? 'the port is in use' : error.code === 'EADDRNOTAVAIL' ? 'no such address on this machine' : error.message;
      reject(
        new CliError(CliErrorCodes.LISTEN, `cannot listen on ${host}:${port}: ${why}. Choose another --port or --host.`, ExitCodes.USAGE, { cause: error }),
      );
    };
    server.once('error', failed);
    server.listen(port, host.replace(/^\[(.*)\]$/, '$1'), () => {
      server.off('error', failed);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/**
 * The connection RedisRuleSource uses: the session's for reading and publishing, and for its
 * subscription a connection of its own that connects at once and waits for Redis (the session's
 * connects lazily and keeps no offline queue, so SUBSCRIBE on a copy of it would fail).
 */
function ruleSourceClient(redis: Redis): RedisRuleSourceOptions['client'] {
  return {
    get: (key) => redis.get(key),
    set: (key, value) => redis.set(key, value),
    publish: (channel, message) => redis.publish(channel, message),
    duplicate: () => {
      const subscriber = redis.duplicate({ lazyConnect: false, enableOfflineQueue: true });
      // Failures show in the commands; a lost subscription is made again on reconnection.
      subscriber.on('error', () => {});
      return subscriber;
    },
  };
}

const digest = (text: string): Buffer => createHash('sha256').update(text).digest();

/**
 * Lets in a request that carries the token: `Authorization: Bearer <token>`, or Basic credentials
 * whose password is the token (any user name; what a browser asks for), compared in constant time.
 */
export function tokenAuth(token: string): DashboardAuth {
  const expected = digest(token);
  return (req: IncomingMessage, res: ServerResponse) => {
    const given = presentedToken(req.headers.authorization);
    if (given !== undefined && timingSafeEqual(digest(given), expected)) return true;
    res.setHeader('www-authenticate', ['Bearer realm="floodgate"', 'Basic realm="floodgate", charset="UTF-8"']);
    return false;
  };
}

function presentedToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const [, scheme = '', value = ''] = /^(\S+)\s+(.*)$/s.exec(header.trim()) ?? [];
  if (/^bearer$/i.test(scheme)) return value;
  if (/^basic$/i.test(scheme)) {
    const decoded = Buffer.from(value, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    return colon < 0 ? undefined : decoded.slice(colon + 1);
  }
  return undefined;
}
