/*
 * One test app for every runtime: @floodgate/hono on a Hono app, and @floodgate/fetch
 * around a plain fetch handler, both on the memory store. Each runtime's entry file
 * (bun.ts, deno.ts, worker.ts) says how it finds the client address and serves it.
 * Only Web-standard APIs here: this file is type-checked without Node's types.
 */
import { type FetchRateLimitOptions, getRateLimit, withRateLimit } from '@floodgate/fetch';
import { type RateLimitVariables, rateLimit } from '@floodgate/hono';
import { Hono } from 'hono';
import type { GetConnInfo } from 'hono/conninfo';

/** The limiter's clock stands still, so the headers are exact however slow the machine: reset at 00:01:00, 45 s away. */
const now = () => Date.UTC(2026, 0, 1, 0, 0, 15);
const perMinute = { algorithm: 'fixed-window', limit: 3, windowMs: 60_000, now } as const;

/** A body that says 'tick' every 50 ms until it is cancelled (`?endless=1`), or 'a', 'b' and ends. */
function ticking(endless: boolean): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  let sent = 0;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (sent > 0) await new Promise((resolve) => setTimeout(resolve, 50));
      if (!endless && sent === 2) return controller.close();
      controller.enqueue(encoder.encode(endless ? 'tick\n' : sent === 0 ? 'a' : 'b'));
      sent++;
    },
  });
}

export function createApp(runtime: string, getConnInfo: GetConnInfo, clientKey: Pick<FetchRateLimitOptions, 'key' | 'clientIp'>) {
  const app = new Hono<{ Variables: RateLimitVariables }>();
  app.get('/hono', rateLimit({ ...perMinute, getConnInfo }), (c) => c.json({ runtime, remaining: c.get('rateLimit').remaining }));

  const fetchRoute = withRateLimit((request: Request, ..._runtimeArgs: unknown[]) => Response.json({ runtime, remaining: getRateLimit(request)?.remaining }), {
    ...perMinute,
    ...clientKey,
  });
  // One request in flight, its lease held until its streamed body ends or is cancelled.
  const streamRoute = withRateLimit((request: Request, ..._runtimeArgs: unknown[]) => new Response(ticking(new URL(request.url).searchParams.has('endless'))), {
    algorithm: 'concurrency',
    limit: 1,
    windowMs: 60_000,
    key: () => 'stream',
  });

  // With a declared `request`: Deno.serve hands no Request to a handler of length 0.
  return (request: Request, ...rest: unknown[]): Response | Promise<Response> => {
    const path = new URL(request.url).pathname;
    if (path === '/fetch') return fetchRoute(request, ...rest);
    if (path === '/stream') return streamRoute(request, ...rest);
    return app.fetch(request, ...(rest as [unknown?, never?]));
  };
}

/** Where the Floodgate packages are loaded from (Bun, Deno): the test checks that they are the built files. */
export const resolved = (resolve: (name: string) => string) => JSON.stringify(['@floodgate/core', '@floodgate/hono', '@floodgate/fetch'].map(resolve));
