// Deno: Deno.serve on a free loopback port. The client address comes from the handler's info.
import { getConnInfo } from 'hono/deno';
import { createApp, resolved } from './app.ts';

interface ServeInfo {
  remoteAddr: { hostname: string };
}
declare const Deno: {
  serve(
    options: { hostname: string; port: number; onListen(address: { hostname: string; port: number }): void },
    handler: (request: Request, info: ServeInfo) => Response | Promise<Response>,
  ): unknown;
};

const app = createApp('deno', getConnInfo, { clientIp: (_request: Request, info: ServeInfo) => info.remoteAddr.hostname });
Deno.serve(
  {
    hostname: '127.0.0.1',
    port: 0,
    onListen: ({ hostname, port }) => console.log(`listening on http://${hostname}:${port} ${resolved((name) => import.meta.resolve(name))}`),
  },
  app,
);
