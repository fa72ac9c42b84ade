/*
 * What the guard limits in each kind of Nest context, and where its client is.
 * 'http': the platform's request. 'ws': a gateway's client, a Socket.IO socket
 * (its handshake: address and headers) or a `ws` WebSocket of
 * @nestjs/platform-ws (the upgrade request, which Nest hands only to
 * handleConnection(client, request): stored there as `client.request`).
 * 'graphql': the request in the GraphQL context: Express's or Fastify's request
 * for operations over HTTP (`ctx.req`); for subscriptions over graphql-ws, the
 * upgrade request (`extra.request` of graphql-ws's context, which Nest's Apollo
 * driver puts in `ctx.req` when your context function returns no `req`).
 *
 * @nestjs/graphql and @nestjs/websockets are optional peers: loaded the first
 * time a context of their kind comes, never for an HTTP-only app.
 */
import { type Decision, ErrorCodes, FloodgateError } from '@floodgate/core';
import type { ExecutionContext } from '@nestjs/common';

/**
 * The request as Nest hands it to guards: Express's `Request` or Fastify's
 * `FastifyRequest`, whichever platform the app runs on; Floodgate puts its
 * decision on `request.rateLimit`. In a gateway, the client's handshake (or
 * stored upgrade) request; in a resolver, the request in the GraphQL context
 * (a graphql-ws subscription's: the upgrade request). See `callOf()`.
 */
// biome-ignore lint/suspicious/noExplicitAny: the request is the platform's own object; callbacks read what they need from it.
export type NestRequest = Record<string, any> & {
  headers: Record<string, string | string[] | undefined>;
  ip?: string;
  rateLimit?: Decision;
};

/** The kinds of Nest context the guard limits; others (microservices' 'rpc') pass untouched. */
export type CallType = 'http' | 'ws' | 'graphql';

/** What the guard found about one call (a route, a gateway message, a resolver): see `callOf()`. */
export interface NestCall {
  readonly type: CallType;
  /**
   * The HTTP request of the call: the platform's request ('http'); the handshake request of a
   * Socket.IO socket, or the upgrade request stored as `client.request` ('ws'); the request that
   * carried the operation, or the upgrade request of a graphql-ws subscription ('graphql').
   * Undefined when the context holds none.
   */
  readonly request: NestRequest | undefined;
  /** The client address of a gateway's or resolver's call, as keyBy.ip() reads it ('http': the request's `ip`). */
  readonly address: string | undefined;
  /** A gateway's client: the Socket.IO socket or the `ws` WebSocket ('ws'). */
  // biome-ignore lint/suspicious/noExplicitAny: the gateway's client is the platform's own object.
  readonly client?: any;
  /** The message's pattern, the event name ('ws'). */
  readonly event?: string;
  /** The GraphQL context, as your context function (or Nest's default) made it ('graphql'). */
  // biome-ignore lint/suspicious/noExplicitAny: the app's own context.
  readonly graphqlContext?: Record<string, any>;
  /** The operation type ('graphql'). */
  readonly operation?: 'query' | 'mutation' | 'subscription';
  /** What a graphql-ws client sent as `connectionParams` (subscriptions and operations over graphql-ws). */
  readonly connectionParams?: Readonly<Record<string, unknown>>;
  /** The response that takes the rate-limit headers: HTTP routes, and GraphQL operations over HTTP; never a subscription's or a gateway's. */
  readonly response?: unknown;
}

/** The calls being decided, by the ExecutionContext the guard hands the flows (and so the key functions). */
const calls = new WeakMap<object, NestCall>();

/**
 * What the guard found about the call of this ExecutionContext: its kind, its HTTP request,
 * client address, gateway client, GraphQL context and connectionParams. For key functions
 * (`key: (request, context) => ...`) that need more than the request; undefined outside a
 * decision of the guard.
 *
 * @example
 * ```ts
 * @RateLimit({ limit: 10, key: (_req, context) => String(callOf(context)?.connectionParams?.apiKey ?? 'anonymous') })
 * ```
 */
export function callOf(context: ExecutionContext): NestCall | undefined {
  return calls.get(context);
}

export function remember(context: ExecutionContext, call: NestCall): void {
  calls.set(context, call);
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null;

/** Node's IncomingMessage, Express's or Fastify's request: something with headers. */
const isRequest = (value: unknown): value is NestRequest =>
  isObject(value) && isObject(value.headers) && typeof (value.headers as { get?: unknown }).get !== 'function';

/** graphql-ws's context of a connection: `{ connectionParams, extra: { socket, request }, acknowledged, ... }`. */
const isGraphqlWsContext = (value: unknown): value is { extra: Record<string, unknown>; connectionParams?: Record<string, unknown> } =>
  isObject(value) && isObject(value.extra) && 'acknowledged' in value;

const text = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);

// biome-ignore lint/suspicious/noExplicitAny: a module loaded at run time.
type Loaded = Record<string, any>;

/** Loads an optional peer once; a missing one is an ERR_FG_OPTION naming what to install. */
function optionalPeer(name: string, why: string): () => Promise<Loaded> {
  let loading: Promise<Loaded> | undefined;
  return () => {
    loading ??= import(name).catch((error: unknown) => {
      loading = undefined;
      throw new FloodgateError(ErrorCodes.OPTION, `@floodgate/nestjs ${why}, and cannot load ${name}: install it (npm install ${name}).`, { cause: error });
    });
    return loading;
  };
}

export const loadGraphql = optionalPeer('@nestjs/graphql', "limits GraphQL resolvers through @nestjs/graphql's GqlExecutionContext");
export const loadGraphqlJs = optionalPeer('graphql', 'answers denials in GraphQL resolvers with a GraphQLError');
export const loadWebsockets = optionalPeer('@nestjs/websockets', "answers denials in gateways with @nestjs/websockets' WsException");

function httpCall(context: ExecutionContext): NestCall {
  const http = context.switchToHttp();
  const request = http.getRequest<NestRequest>();
  return { type: 'http', request, address: text(request.ip), response: http.getResponse() };
}

function wsCall(context: ExecutionContext): NestCall {
  const ws = context.switchToWs();
  // biome-ignore lint/suspicious/noExplicitAny: the gateway's client.
  const client: any = ws.getClient();
  // Nest 10.0 has no getPattern(); later versions do.
  const event = typeof (ws as { getPattern?: unknown }).getPattern === 'function' ? text(ws.getPattern()) : undefined;
  if (isObject(client?.handshake)) {
    // Socket.IO: the handshake's TCP peer (no header changes it) and its headers.
    const { handshake } = client;
    const request = isRequest(client.request) ? client.request : { headers: isObject(handshake.headers) ? handshake.headers : {} };
    return { type: 'ws', request: request as NestRequest, address: text(handshake.address), client, event };
  }
  // A `ws` WebSocket has no request of its own: the one stored at handleConnection(client, request), if any.
  const request = isRequest(client?.request) ? client.request : undefined;
  return { type: 'ws', request, address: text(request?.socket?.remoteAddress), client, event };
}

async function graphqlCall(context: ExecutionContext): Promise<NestCall> {
  const { GqlExecutionContext } = await loadGraphql();
  const gql = GqlExecutionContext.create(context);
  const graphqlContext: unknown = gql.getContext();
  const info: unknown = gql.getInfo();
  const ctx = isObject(graphqlContext) ? graphqlContext : {};
  const operation = isObject(info) && isObject(info.operation) ? (info.operation.operation as NestCall['operation']) : undefined;
  // graphql-ws's context, as Nest's Apollo driver wraps it ({ req: <it> }), or spread into yours.
  const overWs = [ctx.req, ctx].find(isGraphqlWsContext);
  const request = [ctx.req, overWs?.extra.request, isObject(ctx.extra) ? ctx.extra.request : undefined].find(isRequest);
  const params = ctx.connectionParams ?? overWs?.connectionParams;
  const address = text(request?.ip) ?? text(request?.socket?.remoteAddress);
  const call: { -readonly [K in keyof NestCall]: NestCall[K] } = { type: 'graphql', request, address, graphqlContext: ctx, operation };
  if (isObject(params)) call.connectionParams = params;
  // Headers only on an HTTP response still open: never a subscription's, nor an operation's over a WebSocket.
  if (operation !== 'subscription' && overWs === undefined && !isObject(ctx.extra)) {
    const response = ctx.res ?? request?.res;
    if (isObject(response) && response.headersSent !== true && (response.raw as { headersSent?: boolean } | undefined)?.headersSent !== true)
      call.response = response;
  }
  return call;
}

/** The call of a context the guard limits; undefined for the others. */
export function resolveCall(context: ExecutionContext): NestCall | Promise<NestCall> | undefined {
  const type = context.getType<string>();
  if (type === 'http') return httpCall(context);
  if (type === 'ws') return wsCall(context);
  if (type === 'graphql') return graphqlCall(context);
  return undefined;
}

/**
 * Why a gateway's or resolver's call has no client address, and what to do: thrown by
 * keyBy.ip() (the default key) instead of a plain "no address".
 */
export function missingAddress(call: NestCall): FloodgateError {
  const why =
    call.type === 'ws'
      ? 'this WebSocket client has no request to read an address from. With @nestjs/platform-ws, Nest hands the upgrade request only to handleConnection(client, request): store it there as client.request = request'
      : call.request === undefined
        ? 'the GraphQL context holds no request. Keep the req that Nest puts in the context (your context function: return { req } over HTTP, and { req: extra.request } or nothing of req for graphql-ws)'
        : 'the request in the GraphQL context has no socket address';
  return new FloodgateError(ErrorCodes.KEY, `keyBy.ip() found no client address: ${why}; or pass a key option (keyBy.user(), keyBy.header(name), a function).`);
}
