import type { IncomingMessage, ServerResponse } from 'node:http';
import { isFloodgateError } from '@floodgate/core';
import { type ApiCall, createApi } from './api.js';
import { type Answer, isLoopback, isSameOrigin, Refusal, readJson, refusalAnswer, send } from './http.js';
import { type DashboardOptions, parseOptions } from './options.js';
import { loadPage } from './page.js';
import { countDecisions } from './rates.js';

export type { DashboardAuth, DashboardOptions } from './options.js';

/** A Node request handler (Express/Connect middleware shape), plus `close()`. */
export interface DashboardHandler {
  (req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void): void;
  /** Stops counting the limiter's decisions (the live panel); the handler still answers. */
  close(): void;
}

/** Express and @fastify/middie strip the mount path from req.url and keep the full one here. */
type MountedRequest = IncomingMessage & { originalUrl?: string };

/**
 * A web page to operate a limiter by hand: who is limited most, who is
 * blocked (block and unblock), overrides, the rules (edited through a
 * `RedisRuleSource`), and decisions per second by rule. One HTML page and a
 * JSON API under the path it is mounted at; every request goes through
 * `auth`, and every change must come from the page's own origin.
 *
 * @example
 * ```ts
 * app.use('/floodgate', dashboard({ limiter, auth: (req) => req.headers.authorization === `Bearer ${process.env.ADMIN_TOKEN}` }));
 * ```
 */
export function dashboard(options: DashboardOptions): DashboardHandler {
  const config = parseOptions(options);
  const rates = countDecisions(config.limiter);
  const api = createApi(config, rates);
  const page = loadPage();

  async function answer(req: MountedRequest, res: ServerResponse, path: string): Promise<Answer & { text?: string }> {
    if (config.auth === undefined) {
      if (!isLoopback(req.socket.remoteAddress))
        throw new Refusal(403, 'dashboard({ auth: false }) answers loopback addresses only: give it an auth function.');
    } else if ((await config.auth(req, res)) !== true) {
      throw new Refusal(401, 'Not allowed: the dashboard auth function refused this request.');
    }
    const method = req.method ?? 'GET';
    const url = new URL(req.url ?? '/', 'http://dashboard');
    if (!path.startsWith('/api/')) {
      if (method !== 'GET' && method !== 'HEAD') throw new Refusal(405, `${method} is not allowed here.`, undefined, { allow: 'GET, HEAD' });
      // The page's links are relative: it must be served from a path that ends in '/'.
      const full = new URL(req.originalUrl ?? req.url ?? '/', 'http://dashboard').pathname;
      if (path === '/' && !full.endsWith('/')) return { status: 308, headers: { location: `${full}/${url.search}` } };
      const file = page(path);
      if (file === undefined) throw new Refusal(404, `Nothing at ${path}.`);
      return file;
    }
    const route = api[path.slice(5)];
    const handle = route?.[method as keyof typeof route];
    if (route === undefined) throw new Refusal(404, `No API call ${path}.`);
    if (handle === undefined) throw new Refusal(405, `${method} is not allowed on ${path}.`, undefined, { allow: Object.keys(route).join(', ') });
    if (method !== 'GET' && !isSameOrigin(req)) {
      throw new Refusal(403, 'Changes must come from the dashboard page itself (Sec-Fetch-Site: same-origin, or an Origin of this host).');
    }
    const call: ApiCall = { query: url.searchParams, body: () => readJson(req, config.maxBodyBytes) };
    return handle(call);
  }

  const handler = function floodgateDashboard(req: MountedRequest, res: ServerResponse, next?: (error?: unknown) => void): void {
    const pathname = (req.url ?? '/').split('?')[0] as string;
    const under = config.basePath === '' || pathname === config.basePath || pathname.startsWith(`${config.basePath}/`);
    if (!under) {
      if (next !== undefined) next();
      else send(res, refusalAnswer(new Refusal(404, `The dashboard is at ${config.basePath}/.`)));
      return;
    }
    const path = pathname.slice(config.basePath.length) || '/';
    answer(req, res, path).then(
      (result) => {
        if (result.text === undefined) return send(res, result);
        res.writeHead(result.status, { 'cache-control': 'no-store', 'x-content-type-options': 'nosniff', ...result.headers });
        res.end(req.method === 'HEAD' ? undefined : result.text);
      },
      (error: unknown) => {
        if (res.headersSent) return res.destroy();
        if (error instanceof Refusal) return send(res, refusalAnswer(error));
        if (isFloodgateError(error)) {
          // What the user sent was refused by core (its own code), or the store failed (503).
          const status = error.code.startsWith('ERR_FG_STORE') ? 503 : 400;
          return send(res, { status, body: { error: { code: error.code, message: error.message } } });
        }
        send(res, { status: 500, body: { error: { message: error instanceof Error ? error.message : String(error) } } });
      },
    );
  } as DashboardHandler;
  handler.close = () => rates.stop();
  return handler;
}
