import type { IncomingMessage, ServerResponse } from 'node:http';
import { ErrorCodes, FloodgateError, type Limiter, type RuleOptions } from '@floodgate/core';

/** Who may use the dashboard: true to let the request in (a session, a token, Basic auth...). */
export type DashboardAuth = (req: IncomingMessage, res: ServerResponse) => boolean | Promise<boolean>;

export interface DashboardOptions {
  /** The limiter to operate. */
  limiter: Limiter;
  /**
   * Who may use it: called on every request, `false` answers 401 (set a
   * `WWW-Authenticate` header on `res` first to have the browser ask for
   * Basic credentials). Required: `auth: false` turns it off, and then only
   * requests from a loopback address (127.0.0.0/8, ::1) are answered (403
   * otherwise).
   */
  auth: DashboardAuth | false;
  /**
   * Where the rules live for every instance (core's `RedisRuleSource`, or
   * anything with its `publish`): with it, the page edits the rules. Without
   * it, rules are shown, not edited.
   */
  ruleSource?: { publish(rules: readonly RuleOptions[] | RuleOptions): Promise<void> };
  /**
   * The path the dashboard is mounted at, for servers that do not strip it
   * from `req.url` (node:http, Fastify's serverFactory, Hono's node-server):
   * `'/floodgate'`. Leave it out under Express's `app.use('/floodgate', ...)`
   * and @fastify/middie, which strip it. @defaultValue ''
   */
  basePath?: string;
  /** The largest JSON body a POST may carry, in bytes. @defaultValue 16_384 */
  maxBodyBytes?: number;
}

/** The options, checked once, with every default filled in. */
export interface Configuration {
  readonly limiter: Limiter;
  /** undefined: auth: false, loopback only. */
  readonly auth: DashboardAuth | undefined;
  readonly ruleSource: DashboardOptions['ruleSource'];
  readonly basePath: string;
  readonly maxBodyBytes: number;
}

const names = ['limiter', 'auth', 'ruleSource', 'basePath', 'maxBodyBytes'];

function fail(message: string): never {
  throw new FloodgateError(ErrorCodes.OPTION, message);
}

/** Turns the user's options into the configuration the handler reads, or throws ERR_FG_* naming the fix. */
export function parseOptions(options: DashboardOptions): Configuration {
  if (typeof options !== 'object' || options === null) fail('dashboard() takes { limiter, auth }.');
  for (const name of Object.keys(options)) {
    if (!names.includes(name)) {
      throw new FloodgateError(ErrorCodes.UNKNOWN_OPTION, `dashboard() has no option '${name}'; it takes ${names.join(', ')}.`);
    }
  }
  const { limiter, auth, ruleSource, basePath = '', maxBodyBytes = 16_384 } = options;
  if (typeof limiter !== 'object' || limiter === null || typeof limiter.block !== 'function' || typeof limiter.on !== 'function') {
    fail('dashboard() needs { limiter }: a limiter from createLimiter().');
  }
  if (auth === undefined) {
    fail(
      'dashboard() needs { auth }: a function (req) => boolean that says who may operate the limiter. ' +
        'To run it without one, on this machine only, pass auth: false (then only loopback addresses are answered).',
    );
  }
  if (auth !== false && typeof auth !== 'function') fail('dashboard() auth must be a function (req, res) => boolean | Promise<boolean>, or false.');
  if (ruleSource !== undefined && (typeof ruleSource !== 'object' || ruleSource === null || typeof ruleSource.publish !== 'function')) {
    fail("dashboard() ruleSource must be core's RedisRuleSource (or have its publish(rules)).");
  }
  if (typeof basePath !== 'string' || (basePath !== '' && (!basePath.startsWith('/') || basePath.endsWith('/')))) {
    fail(`dashboard() basePath must be '' or a path like '/floodgate' (a leading '/', no trailing one), got ${JSON.stringify(basePath)}.`);
  }
  if (!Number.isSafeInteger(maxBodyBytes) || maxBodyBytes < 1024 || maxBodyBytes > 1_048_576) {
    fail(`dashboard() maxBodyBytes must be a whole number of bytes from 1024 to 1048576, got ${String(maxBodyBytes)}.`);
  }
  return { limiter, auth: auth === false ? undefined : auth, ruleSource, basePath, maxBodyBytes };
}
