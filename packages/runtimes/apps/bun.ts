// Bun: Bun.serve on a free loopback port. The client address comes from the server.
import { getConnInfo } from 'hono/bun';
import { createApp, resolved } from './app.ts';

interface BunServer {
  readonly url: URL;
  requestIP(request: Request): { address: string } | null;
}
declare const Bun: { serve(options: { hostname: string; port: number; fetch(request: Request, server: BunServer): Response | Promise<Response> }): BunServer };

const app = createApp('bun', getConnInfo, { clientIp: (request: Request, server: BunServer) => server.requestIP(request)?.address });
const server = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: app });
console.log(`listening on ${server.url.origin} ${resolved((name) => import.meta.resolve(name))}`);
