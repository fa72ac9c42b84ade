import { once } from 'node:events';
import { createServer, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Running } from './adapter-contract.js';

/** Serves a Node request listener (an Express app, Koa's app.callback(), Hono's getRequestListener) on a free loopback port. */
export async function serveHttp(listener: RequestListener): Promise<Running> {
  const server = createServer(listener);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
