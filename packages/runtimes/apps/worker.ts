// Cloudflare Workers (workerd): a module worker, bundled by the test with esbuild.
// Cloudflare's edge sets cf-connecting-ip; the test sends it, as the edge would.
import { keyBy } from '@floodgate/fetch';
import { getConnInfo } from 'hono/cloudflare-workers';
import { createApp } from './app.ts';

const app = createApp('workerd', getConnInfo, { key: keyBy.cloudflare() });

export default {
  fetch: (request: Request, env: unknown, ctx: unknown) => app(request, env, ctx),
};
