/*
 * Where a GraphQL operation's client address and headers are: in the context
 * the server builds. GraphQL Yoga puts the fetch Request there
 * (`context.request`, which carries no address) and, on Node's http server
 * (or Express, Fastify), the Node request as `context.req`; the graphql-ws
 * recipe passes the upgrade request as `req` too. Apollo Server's context is
 * yours: return `{ req }` from its context function.
 */
import { ErrorCodes, FloodgateError, type KeyBy } from '@floodgate/core';
import { createKeyBy, type RequestReader } from '@floodgate/core/adapter';
import type { DocumentNode, GraphQLSchema } from 'graphql';

/** GraphQL's operation types. */
export type OperationType = 'query' | 'mutation' | 'subscription';

/**
 * What the callbacks (`key`, `cost`, `skip`) receive about an operation: the server's context,
 * the operation's name and type, the parsed document, the variables as the client sent them,
 * and the schema it runs against.
 */
export interface OperationArgs<TContext = unknown> {
  readonly context: TContext;
  /** The operation's name (`query Feed { ... }`: `'Feed'`), undefined for an anonymous one. */
  readonly operationName: string | undefined;
  readonly operationType: OperationType;
  readonly document: DocumentNode;
  readonly variables: Readonly<Record<string, unknown>>;
  readonly schema: GraphQLSchema;
}

/** The arguments the key extractors take: one operation (or one field of it, for the directive). */
export type GraphQLArgs = [operation: OperationArgs];

/** The Node request of a context: Node's IncomingMessage, Express's or Fastify's request. */
interface NodeRequest {
  readonly ip?: unknown;
  readonly socket?: { readonly remoteAddress?: unknown };
  readonly headers?: unknown;
}

function contextField(operation: OperationArgs, name: 'req' | 'request'): object | undefined {
  const context = operation.context as Record<string, unknown> | null | undefined;
  const value = typeof context === 'object' && context !== null ? context[name] : undefined;
  return typeof value === 'object' && value !== null ? value : undefined;
}

/** Node's socket address; a fetch Request has none. */
function socketIp(operation: OperationArgs): string | undefined {
  const address = (contextField(operation, 'req') as NodeRequest | undefined)?.socket?.remoteAddress;
  return typeof address === 'string' ? address : undefined;
}

/** Express's and Fastify's `req.ip` (it follows their trust-proxy setting), else the socket address. */
function clientIp(operation: OperationArgs): string | undefined {
  const ip = (contextField(operation, 'req') as NodeRequest | undefined)?.ip;
  return typeof ip === 'string' && ip !== '' ? ip : socketIp(operation);
}

/** A header of the fetch Request (Yoga), else of the Node request. */
function header(name: string, operation: OperationArgs): string | readonly string[] | undefined {
  for (const holder of [contextField(operation, 'request'), contextField(operation, 'req')]) {
    const headers = (holder as { headers?: unknown } | undefined)?.headers;
    if (typeof headers !== 'object' || headers === null) continue;
    if (typeof (headers as { get?: unknown }).get === 'function') return (headers as { get(name: string): string | null }).get(name) ?? undefined;
    const value = (headers as Record<string, unknown>)[name];
    return typeof value === 'string' || Array.isArray(value) ? (value as string | string[]) : undefined;
  }
  return undefined;
}

const reader: RequestReader<GraphQLArgs> = { clientIp, socketIp, header };

/**
 * Key extractors for GraphQL operations. They read the server's context: `keyBy.ip()` is the
 * address of `context.req` (Yoga and Apollo on Node's http, Express, Fastify: Express's and
 * Fastify's `req.ip` follows their trust-proxy setting), `keyBy.forwardedFor({ hops })`,
 * `keyBy.header(name)` and the platform presets read the request's headers.
 *
 * @example
 * ```ts
 * const plugin = useRateLimit({ limit: 100, windowMs: 60_000, key: keyBy.forwardedFor({ hops: 1 }) });
 * ```
 */
export const keyBy: KeyBy<GraphQLArgs> = createKeyBy(reader);

const byAddress = keyBy.ip();

/**
 * The key when none is given: the client address of `context.req`. Whether a context carries
 * one is known only when an operation comes (a fetch Request has no socket: Yoga on Bun, Deno,
 * Workers; an Apollo context function that does not return `req`), so it is said then.
 */
export function defaultKey(operation: OperationArgs): string | Promise<string> {
  if (clientIp(operation) === undefined) {
    const request = contextField(operation, 'req') ?? contextField(operation, 'request');
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `@floodgate/graphql has no key option, and ${request === undefined ? 'the context has no request' : 'the context has no Node request (context.req) to read a client address from (a fetch Request carries none)'}. Pass key: ({ context }) => context.user.id (or an object of keys by scope), a keyBy preset that reads headers (keyBy.forwardedFor({ hops: 1 }), keyBy.cloudflare()), or put the Node request in the context as req.`,
    );
  }
  return byAddress(operation);
}
