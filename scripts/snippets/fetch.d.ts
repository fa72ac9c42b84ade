// What the fragments of packages/fetch/README.md use without declaring it: the
// globals of Bun, Deno and Cloudflare Workers. Their type packages (bun-types,
// `deno types`, @cloudflare/workers-types) each declare the Web globals again and
// cannot compile next to Node's, so these are the parts the README uses, in the
// shape of the real declarations (bun-types 1.4, Deno 2.9, workers-types 5),
// against which the README's snippets were checked.
declare global {
  namespace Bun {
    interface SocketAddress {
      address: string;
      port: number;
      family: 'IPv4' | 'IPv6';
    }
    /** Generic without a default, as in bun-types: `Bun.Server<undefined>` when the server has no WebSockets. */
    interface Server<WebSocketData> {
      requestIP(request: Request): SocketAddress | null;
      upgrade(request: Request, options?: { data?: WebSocketData }): boolean;
    }
    function serve<WebSocketData = undefined>(options: {
      port?: number;
      fetch(request: Request, server: Server<WebSocketData>): Response | Promise<Response>;
    }): Server<WebSocketData>;
  }

  namespace Deno {
    interface NetAddr {
      transport: 'tcp' | 'udp';
      hostname: string;
      port: number;
    }
    interface UnixAddr {
      transport: 'unix' | 'unixpacket';
      path: string;
    }
    type Addr = NetAddr | UnixAddr;
    interface ServeHandlerInfo<A extends Addr = Addr> {
      remoteAddr: A;
      completed: Promise<void>;
    }
    function serve(handler: (request: Request, info: ServeHandlerInfo<NetAddr>) => Response | Promise<Response>): unknown;
  }

  /** The Worker's bindings, which `wrangler types` declares from wrangler.toml: none here. */
  interface Env {}
  interface ExecutionContext {
    waitUntil(promise: Promise<unknown>): void;
    passThroughOnException(): void;
  }
}

export {};
