import type { KeyBy } from '@floodgate/core';
import { type Decision, ErrorCodes, FloodgateError } from '@floodgate/core';
import { createKeyBy, createRateLimitFlow, type RateLimitOptions, type RequestReader } from '@floodgate/core/adapter';

export { createLimiter, type Decision, type Limiter, MemoryStore, type RuleOptions } from '@floodgate/core';
export { FloodgateError };

/** What a fetch handler receives: the Request, then whatever the runtime adds (Next's context, Workers' env and ctx, Bun's server). */
// biome-ignore lint/suspicious/noExplicitAny: the runtime's extra arguments are the user's types, kept as they are.
export type FetchArgs = [request: Request, ...rest: any[]];

/** A custom denial response: the handler's arguments, then the decision. The rate-limit headers are added to what it returns. */
export type FetchDenialHandler<Args extends FetchArgs = FetchArgs> = (...args: [...Args, decision: Decision]) => Response | Promise<Response>;

/** Options of `withRateLimit()` (see `@floodgate/core` RateLimitOptions): callbacks receive the handler's arguments. */
export interface FetchRateLimitOptions<Args extends FetchArgs = FetchArgs> extends Omit<RateLimitOptions<Args, FetchDenialHandler<Args>>, 'settle'> {
  /**
   * The units the request really took, known once its response is over (the tokens a model
   * reports): the handler's arguments, then its Response (undefined when the handler threw). Called
   * once the body has been read to the end, failed or was cancelled. The request is admitted with
   * `cost`, an estimate; then the difference is given back, or taken as far as each rule has it.
   * `undefined` keeps the estimate.
   *
   * @example
   * ```ts
   * withRateLimit(chat, { limit: 10_000, windowMs: 60_000, key: keyBy.header('x-user-id'), cost: 500, settle: (request, response) => Number(response?.headers.get('x-tokens')) });
   * ```
   */
  settle?: (...args: [...Args, response: Response | undefined]) => number | undefined | Promise<number | undefined>;
  /**
   * The client's address, for the default key, `keyBy.ip()`, `keyBy.forwardedFor()`'s fallback and
   * CIDR allow/deny lists: a Request carries no socket. Bun: `(req, server) => server.requestIP(req)?.address`;
   * Deno: `(req, info) => info.remoteAddr.hostname`. Behind a platform, use a `keyBy` preset instead.
   */
  clientIp?: (...args: Args) => string | null | undefined;
}

type ClientIp = (...args: FetchArgs) => string | null | undefined;

/** The clientIp option of the withRateLimit() handling a request, for the key extractors. */
const clientIpOf = new WeakMap<Request, ClientIp>();
const decisions = new WeakMap<Request, Decision>();

const clientAddress = (...args: FetchArgs): string | undefined => clientIpOf.get(args[0])?.(...args) ?? undefined;
function requiredAddress(...args: FetchArgs): string | undefined {
  if (clientIpOf.has(args[0])) return clientAddress(...args);
  throw new FloodgateError(
    ErrorCodes.KEY,
    "No client address: keyBy.ip() needs withRateLimit()'s clientIp option, and so do keyBy.forwardedFor() and keyBy.forwarded() when their header has fewer entries than hops, or no address in that entry.",
  );
}
const reader: RequestReader<FetchArgs> = {
  clientIp: requiredAddress,
  socketIp: requiredAddress,
  header: (name, request) => request.headers.get(name) ?? undefined,
};

/**
 * Key extractors for fetch handlers. A Request carries no socket, so pick the one that matches
 * where the app runs: `cloudflare()` (`cf-connecting-ip`), `vercel()` (`x-vercel-forwarded-for`,
 * else `x-real-ip`), `fly()` (`fly-client-ip`), `cloudfront()` (`cloudfront-viewer-address`),
 * `forwardedFor({ hops })` or `forwarded({ hops })` behind your own proxies, `header(name)` for a
 * user id; `ip()` reads the `clientIp` option. IPv4-mapped IPv6 becomes IPv4, IPv6 is grouped by /56.
 *
 * @example
 * ```ts
 * export default { fetch: withRateLimit(app.fetch, { limit: 100, windowMs: 60_000, key: keyBy.cloudflare() }) };
 * ```
 */
export const keyBy: KeyBy<FetchArgs> = createKeyBy(reader);

/**
 * The decision `withRateLimit()` took for this request, or undefined (skipped, or not rate limited).
 *
 * @example
 * ```ts
 * export const GET = withRateLimit((request) => Response.json({ remaining: getRateLimit(request)?.remaining }), { limit: 10, windowMs: 60_000, key: keyBy.vercel() });
 * ```
 */
export function getRateLimit(request: Request): Decision | undefined {
  return decisions.get(request);
}

/**
 * The response with the rate-limit headers (and `body` instead of its own, when given): set in place,
 * or on a copy that keeps status, statusText and the body stream when its headers are immutable
 * (a fetch() result, Response.redirect()).
 */
function withHeaders(response: Response, headers: readonly (readonly [name: string, value: string])[], body?: ReadableStream): Response {
  if (body === undefined) {
    try {
      for (const [name, value] of headers) response.headers.set(name, value);
      return response;
    } catch {}
  }
  const copy = new Response(body ?? response.body, { status: response.status, statusText: response.statusText, headers: new Headers(response.headers) });
  for (const [name, value] of headers) copy.headers.set(name, value);
  return copy;
}

/**
 * The body, calling `end` when it has been read to the end, failed, or was cancelled: the end of a
 * streamed response's work. Once: a stream pulls nothing after it closed or failed, and cancels neither.
 */
function watch(body: ReadableStream<Uint8Array>, end: (failed: boolean) => void): ReadableStream<Uint8Array> {
  const source = body.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const chunk = await source.read();
        if (chunk.done) {
          controller.close();
          end(false);
        } else controller.enqueue(chunk.value);
      } catch (error) {
        controller.error(error);
        end(true);
      }
    },
    cancel(reason) {
      end(false);
      return source.cancel(reason);
    },
  });
}

/**
 * Rate limits a Web-standard fetch handler (Next.js route handlers and middleware, Bun.serve,
 * Deno.serve, Cloudflare Workers). Returns a handler with the same arguments; the decision is
 * `getRateLimit(request)`. Errors (a bad key, a failing handler) are thrown to the runtime.
 *
 * @example
 * ```ts
 * import { keyBy, withRateLimit } from '@floodgate/fetch';
 *
 * export default {
 *   fetch: withRateLimit((request: Request) => new Response('hello'), { limit: 100, windowMs: 60_000, key: keyBy.cloudflare() }),
 * };
 * ```
 */
export function withRateLimit<Args extends FetchArgs>(
  handler: (...args: Args) => Response | Promise<Response>,
  options: FetchRateLimitOptions<Args>,
): (...args: Args) => Promise<Response> {
  const clientIp = (options as { clientIp?: unknown } | undefined)?.clientIp;
  // settle gets the Response after the handler's arguments: flow.settle passes it on.
  const flow = createRateLimitFlow<Args, FetchDenialHandler<Args>>(options as RateLimitOptions<Args, FetchDenialHandler<Args>>, {
    name: '@floodgate/fetch',
    defaultKey() {
      if (clientIp !== undefined) return keyBy.ip();
      throw new FloodgateError(
        ErrorCodes.OPTION,
        "@floodgate/fetch's withRateLimit() needs a way to tell clients apart, since a Request carries no client address: pass key: keyBy.cloudflare() (Cloudflare), keyBy.vercel() (Vercel), keyBy.fly() (Fly.io), keyBy.forwardedFor({ hops }) (your own proxies) or keyBy.header('x-user-id'); or clientIp: (request, ...rest) => address (Bun: (req, server) => server.requestIP(req)?.address; Deno: (req, info) => info.remoteAddr.hostname).",
      );
    },
    expose: (decision, ...[request]) => void decisions.set(request, decision),
    clientIp: clientAddress,
    header: reader.header,
    extraKeys: ['clientIp'],
  });
  if (clientIp !== undefined && typeof clientIp !== 'function') {
    throw new FloodgateError(ErrorCodes.OPTION, 'clientIp must be a function of the request that returns its client address.');
  }
  if (clientIp === undefined && (Array.isArray(options.allowList) || Array.isArray(options.denyList))) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      'allowList and denyList of addresses need clientIp: (request, ...rest) => the client address; or give them as functions of the request.',
    );
  }
  if (typeof handler !== 'function') throw new FloodgateError(ErrorCodes.OPTION, 'withRateLimit(handler, options) takes the fetch handler to limit first.');

  // Declared with a `request` parameter: Deno.serve calls a handler of length 0 without a Request.
  return async function rateLimited(request: Args[0], ...rest: unknown[]): Promise<Response> {
    const args = [request, ...rest] as Args;
    if (clientIp !== undefined) clientIpOf.set(request, clientIp as ClientIp);
    const outcome = await flow.run(args);
    if (outcome.kind === 'skip') return handler(...args);
    if (outcome.kind === 'deny') {
      if (outcome.custom && flow.handler !== undefined) return withHeaders(await flow.handler(...args, outcome.decision), outcome.headers);
      return new Response(outcome.body, { status: outcome.status, headers: [['content-type', outcome.contentType], ...outcome.headers] as [string, string][] });
    }
    // Headers as they stand once the handler returns: a withRateLimit() inside this one has added its policies.
    if (!flow.mustSettle(outcome)) return withHeaders(await handler(...args), flow.headersOf(outcome));
    // The runtime hides the connection: the work is over when the handler is done and its body is read or cancelled.
    let response: Response;
    try {
      response = await handler(...args);
    } catch (error) {
      flow.settle(outcome, undefined, undefined);
      throw error;
    }
    const status = response.status;
    const settle = (failed: boolean) => flow.settle(outcome, failed ? undefined : status, response);
    if (response.body !== null) return withHeaders(response, flow.headersOf(outcome), watch(response.body, settle));
    settle(false);
    return withHeaders(response, flow.headersOf(outcome));
  };
}
