// A Worker whose limit holds across every isolate and location: the count of each client
// lives in a Durable Object (one per client address), decided there one call at a time.
import { type DurableObjectNamespaceLike, DurableObjectStore } from '@floodgate/cloudflare';
import { keyBy, withRateLimit } from '@floodgate/fetch';

// The Durable Object class the store calls: exported by the Worker, bound in wrangler.jsonc.
export { FloodgateDurableObject } from '@floodgate/cloudflare';

interface Env {
  FLOODGATE: DurableObjectNamespaceLike;
}

const hello = () => Response.json({ hello: 'from the edge' });

// Built on the first request (the binding comes with `env`), then kept for the isolate's life.
let limitedHello: ((request: Request) => Promise<Response>) | undefined;

export default {
  fetch(request: Request, env: Env): Promise<Response> | Response {
    limitedHello ??= withRateLimit(hello, {
      algorithm: 'token-bucket',
      limit: 5, // 5 at once, then one every 12 s
      windowMs: 60_000,
      key: keyBy.cloudflare(), // cf-connecting-ip, set by Cloudflare's edge
      store: new DurableObjectStore({ namespace: env.FLOODGATE }),
    });
    const { pathname } = new URL(request.url);
    if (pathname === '/api/hello') return limitedHello(request);
    return new Response('Try /api/hello\n', { status: 404 });
  },
};
