/*
 * A stand-in for Upstash's hosted service: an HTTP server on loopback that
 * speaks the documented Upstash REST protocol and runs each command on a
 * real redis-server. Tests then drive the real @upstash/redis client against
 * a real Redis; only the hosted service is replaced.
 *
 * The protocol, as the client uses it:
 *   POST /            body ["EVALSHA", sha, 1, key, ...]       -> { result } | 400 { error }
 *   POST /pipeline    body [[cmd, ...args], ...]                -> [{ result } | { error }, ...]
 *   POST /multi-exec  body [[cmd, ...args], ...] in MULTI/EXEC  -> [{ result } | { error }, ...]
 *   GET|POST /cmd/arg/arg (the command in the path; a POST body is its last argument)
 * every request with `Authorization: Bearer <token>` (else 401). With the
 * header `Upstash-Encoding: base64` (the client's default) every string in a
 * result is base64 (the bytes Redis returned), numbers stay numbers, nil is null.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';

/** One HTTP request the bridge served. */
export interface BridgeRequest {
  /** `/`, `/pipeline`, `/multi-exec` or the path of a command in the path. */
  path: string;
  /** The commands it carried, names upper-cased, arguments as sent. */
  commands: string[][];
}

export interface RestBridge {
  /** The REST URL: what `new Redis({ url })` takes (UPSTASH_REDIS_REST_URL). */
  readonly url: string;
  /** The token the bridge requires (UPSTASH_REDIS_REST_TOKEN). */
  readonly token: string;
  /** Requests served since the bridge started or `requests.length = 0`. */
  readonly requests: BridgeRequest[];
  /** Command names answered `ERR unknown command` without reaching Redis, as a server without them answers (e.g. FCALL). */
  readonly unsupported: Set<string>;
  /** While set, requests are read and then left unanswered until `hold` is cleared (a service that does not answer). */
  hold: boolean;
  /** The Redis the bridge sends commands to. */
  readonly redis: Redis;
  close(): Promise<void>;
}

type Encoded = string | number | null | Encoded[];

/** A reply as Upstash sends it: strings as base64 of Redis's bytes when asked, else as text. */
function encode(reply: unknown, base64: boolean): Encoded {
  if (reply === null || reply === undefined) return null;
  if (Buffer.isBuffer(reply)) return base64 ? reply.toString('base64') : reply.toString('utf8');
  if (typeof reply === 'number') return reply;
  if (typeof reply === 'bigint') return Number(reply);
  if (Array.isArray(reply)) return reply.map((item) => encode(item, base64));
  if (typeof reply === 'string') return base64 ? Buffer.from(reply).toString('base64') : reply;
  return String(reply);
}

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/** A command as JSON gave it: every argument as Redis takes it (numbers and booleans as text). */
function commandOf(value: unknown): string[] {
  if (!Array.isArray(value) || value.length === 0) throw new Error('ERR a command is a non-empty JSON array');
  return value.map((arg) => (typeof arg === 'string' ? arg : JSON.stringify(arg)));
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      body += chunk;
    });
    req.on('end', () => resolve(body));
    req.on('error', reject);
  });
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/**
 * Starts a REST bridge to the redis-server on `redisPort`, on a free loopback port.
 *
 * @example
 * ```ts
 * const bridge = await startRestBridge({ redisPort: server.port });
 * const redis = new Redis({ url: bridge.url, token: bridge.token }); // @upstash/redis
 * ```
 */
export async function startRestBridge(options: { redisPort: number; token?: string }): Promise<RestBridge> {
  const token = options.token ?? 'floodgate-test-token';
  const redis = new Redis({ port: options.redisPort, host: '127.0.0.1' });
  const requests: BridgeRequest[] = [];
  const unsupported = new Set<string>();
  let held: (() => void)[] = [];
  let holding = false;

  const run = async (command: string[]): Promise<{ result: Encoded } | { error: string }> => {
    const [name = '', ...args] = command;
    if (unsupported.has(name.toUpperCase())) return { error: `ERR unknown command '${name}', with args beginning with: ` };
    try {
      return { result: await redis.callBuffer(name, ...args) } as { result: Encoded };
    } catch (error) {
      return { error: messageOf(error) };
    }
  };

  const serve = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://bridge');
    const text = await readBody(req);
    if (holding) await new Promise<void>((resolve) => held.push(resolve));
    if (req.headers.authorization !== `Bearer ${token}`) return send(res, 401, { error: 'Unauthorized' });
    const base64 = String(req.headers['upstash-encoding'] ?? '').toLowerCase() === 'base64';
    const encoded = (reply: { result: Encoded } | { error: string }) => ('error' in reply ? reply : { result: encode(reply.result, base64) });
    const path = url.pathname.replace(/\/+$/, '') || '/';
    try {
      if (path === '/pipeline' || path === '/multi-exec') {
        const body: unknown = JSON.parse(text);
        if (!Array.isArray(body)) return send(res, 400, { error: 'ERR the body must be a JSON array of commands' });
        const commands = body.map(commandOf);
        requests.push({ path, commands: commands.map(([name = '', ...args]) => [name.toUpperCase(), ...args]) });
        if (path === '/pipeline') return send(res, 200, (await Promise.all(commands.map(run))).map(encoded));
        // One MULTI ... EXEC, written to the connection in one go: nothing of another request comes between.
        const results = await redis.multi(commands.map(([name = '', ...args]) => ['callBuffer', name, ...args] as [string, ...string[]])).exec();
        return send(
          res,
          200,
          (results ?? []).map(([error, reply]) => (error ? { error: messageOf(error) } : { result: encode(reply, base64) })),
        );
      }
      const command =
        path === '/'
          ? commandOf(JSON.parse(text))
          : [...path.slice(1).split('/').map(decodeURIComponent), ...(req.method === 'POST' && text !== '' ? [text] : [])];
      requests.push({ path, commands: [[(command[0] ?? '').toUpperCase(), ...command.slice(1)]] });
      const reply = await run(command);
      return send(res, 'error' in reply ? 400 : 200, encoded(reply));
    } catch (error) {
      return send(res, 400, { error: messageOf(error) });
    }
  };

  const server: Server = createServer((req, res) => {
    serve(req, res).catch((error: unknown) => send(res, 500, { error: messageOf(error) }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    token,
    requests,
    unsupported,
    redis,
    get hold() {
      return holding;
    },
    set hold(value: boolean) {
      holding = value;
      if (!value) {
        for (const release of held) release();
        held = [];
      }
    },
    async close() {
      holding = false;
      for (const release of held) release();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      redis.disconnect();
    },
  };
}

/**
 * A REST bridge for the test file that calls this, to the Redis that
 * `redisPort()` names once it runs (e.g. `useRedisServer()`'s): started
 * before its tests, closed after them.
 */
export function useRestBridge(redisPort: () => number): RestBridge {
  let bridge: RestBridge | undefined;
  beforeAll(async () => {
    bridge = await startRestBridge({ redisPort: redisPort() });
  });
  afterAll(async () => {
    await bridge?.close();
  });
  const current = (): RestBridge => {
    if (bridge === undefined) throw new Error('useRestBridge(): the bridge starts in beforeAll');
    return bridge;
  };
  return {
    get url() {
      return current().url;
    },
    get token() {
      return current().token;
    },
    get requests() {
      return current().requests;
    },
    get unsupported() {
      return current().unsupported;
    },
    get redis() {
      return current().redis;
    },
    get hold() {
      return current().hold;
    },
    set hold(value: boolean) {
      current().hold = value;
    },
    close: () => current().close(),
  };
}
