/*
 * Real servers for the tests: GraphQL Yoga 5 on Node's http server (an
 * ephemeral port) with graphql-ws on the same port, as Yoga's docs set them
 * up, and the client side (fetch, the graphql-ws client over `ws`).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ExecutionArgs, GraphQLError, GraphQLSchema } from 'graphql';
import { type Client, createClient } from 'graphql-ws';
import { useServer } from 'graphql-ws/use/ws';
import { createSchema, createYoga, type Plugin, type YogaServerOptions } from 'graphql-yoga';
import { afterEach } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { type RateLimitDirective, rateLimitDirective } from './directive.js';

/** The schema of the tests, with @rateLimit on a few fields (`directiveTypeDefs` defines the directive). */
export const typeDefs = /* GraphQL */ `
  type Query {
    hello: String
    cheap: Int
    expensive: Int @rateLimit(limit: 2, windowMs: 60000, algorithm: "fixed-window")
    users(first: Int, limit: Int): [User!]!
    node: Node
    quota: Int
    wait: String
  }
  type User {
    id: ID!
    name: String!
    avatar: String @rateLimit(limit: 4, windowMs: 60000, algorithm: "fixed-window")
    postCount: Int @rateLimit(limit: 2, windowMs: 60000, algorithm: "fixed-window", perOperation: true)
    posts(first: Int): [Post!]!
  }
  type Post {
    title: String!
  }
  type Node {
    id: ID!
    child: Node
  }
  type Mutation {
    send(text: String!): Boolean
  }
  type Subscription {
    ticks: Int
    held: Int
    limitedTicks: Int @rateLimit(limit: 1, windowMs: 60000, algorithm: "fixed-window")
  }
`;

/** A latch: a promise and the function that opens it. */
export function latch(): { promise: Promise<void>; open: () => void } {
  let open = () => {};
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

/** What the resolvers let a test hold: `wait` and `held` block until released; `held` ends when its subscriber leaves. */
export const gates = {
  wait: latch(),
  heldEnded: latch(),
  reset() {
    this.wait = latch();
    this.heldEnded = latch();
  },
};

const users = (n: number) => Array.from({ length: n }, (_, i) => ({ id: String(i + 1), name: `user ${i + 1}` }));

export const resolvers = {
  Query: {
    hello: () => 'world',
    cheap: () => 1,
    expensive: () => 2,
    users: (_: unknown, args: { first?: number; limit?: number }) => users(Math.min(args.first ?? args.limit ?? 3, 100)), // as a real server caps pages
    node: () => ({ id: 'root', child: null }),
    quota: (_: unknown, __: unknown, context: object & { quota?: (context: object) => number | undefined }) => context.quota?.(context),
    wait: async () => {
      await gates.wait.promise;
      return 'done';
    },
  },
  User: {
    avatar: (user: { id: string }) => `avatar ${user.id}`,
    postCount: () => 0,
    posts: (_: unknown, args: { first?: number }) => Array.from({ length: Math.min(args.first ?? 1, 100) }, (_, i) => ({ title: `post ${i + 1}` })),
  },
  Mutation: { send: () => true },
  Subscription: {
    ticks: {
      subscribe: async function* () {
        for (const ticks of [1, 2, 3]) yield { ticks };
      },
    },
    limitedTicks: {
      subscribe: async function* () {
        for (const limitedTicks of [1, 2]) yield { limitedTicks };
      },
    },
    held: {
      // An event, then none until the subscriber leaves: an iterator, as a pubsub's are, whose return() ends a pending next().
      subscribe: (): AsyncIterableIterator<{ held: number }> => {
        let sent = false;
        let end: (result: IteratorResult<{ held: number }>) => void = () => {};
        const ended = new Promise<IteratorResult<{ held: number }>>((resolve) => {
          end = resolve;
        });
        const finish = async (): Promise<IteratorResult<{ held: number }>> => {
          end({ done: true, value: undefined });
          gates.heldEnded.open();
          return { done: true, value: undefined };
        };
        return {
          [Symbol.asyncIterator]() {
            return this;
          },
          next: () => {
            if (sent) return ended;
            sent = true;
            return Promise.resolve({ done: false, value: { held: 1 } });
          },
          return: finish,
          throw: finish,
        };
      },
    },
  },
};

/** The test schema, with the directive defined, and applied when `directive` is given. */
export function testSchema(directive?: RateLimitDirective): GraphQLSchema {
  const schema = createSchema({ typeDefs: [(directive ?? rateLimitDirective()).typeDefs, typeDefs], resolvers });
  return directive === undefined ? schema : directive.transformer(schema);
}

export interface Running {
  readonly url: string;
  readonly wsUrl: string;
  readonly server: Server;
}

const open: { server: Server; wss: WebSocketServer; clients: Client[] }[] = [];
afterEach(async () => {
  for (const { server, wss, clients } of open.splice(0)) {
    for (const client of clients) await client.dispose();
    for (const socket of wss.clients) socket.terminate();
    await new Promise((resolve) => wss.close(resolve));
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
  gates.reset();
});

/** Yoga on an ephemeral port, with graphql-ws beside it (Yoga's own recipe), closed after the test. */
export async function serveYoga(
  options: { plugins: Plugin[]; schema?: GraphQLSchema } & Omit<YogaServerOptions<object, object>, 'plugins' | 'schema'>,
): Promise<Running> {
  const { plugins, schema = testSchema(), ...rest } = options;
  const yoga = createYoga({ schema, plugins, logging: false, ...rest });
  const server = createServer(yoga);
  const wss = new WebSocketServer({ server, path: yoga.graphqlEndpoint });
  useServer(
    {
      execute: (args: ExecutionArgs) => (args.rootValue as { execute: (a: ExecutionArgs) => unknown }).execute(args) as never,
      subscribe: (args: ExecutionArgs) => (args.rootValue as { subscribe: (a: ExecutionArgs) => unknown }).subscribe(args) as never,
      onSubscribe: async (ctx, _id, params) => {
        const { schema, execute, subscribe, contextFactory, parse, validate } = yoga.getEnveloped({
          ...ctx,
          req: ctx.extra.request,
          socket: ctx.extra.socket,
          params,
        });
        const args = {
          schema,
          operationName: params.operationName,
          document: parse(params.query),
          variableValues: params.variables,
          contextValue: await contextFactory(),
          rootValue: { execute, subscribe },
        };
        const errors = validate(args.schema, args.document);
        if (errors.length) return errors;
        return args;
      },
    },
    wss,
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  open.push({ server, wss, clients: [] });
  return { url: `http://127.0.0.1:${port}/graphql`, wsUrl: `ws://127.0.0.1:${port}/graphql`, server };
}

export interface Answer {
  readonly status: number;
  readonly headers: Headers;
  // biome-ignore lint/suspicious/noExplicitAny: a GraphQL response as JSON, read by the tests
  readonly body: any;
}

/** A GraphQL POST: one operation, or a batch (an array). */
export async function post(url: string, operation: object | object[], headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json', ...headers },
    body: JSON.stringify(operation),
  });
  return { status: res.status, headers: res.headers, body: await res.json() };
}

export const query = (url: string, text: string, variables?: Record<string, unknown>, headers?: Record<string, string>) =>
  post(url, variables === undefined ? { query: text } : { query: text, variables }, headers);

/** The rate-limit headers of an answer, by lower-case name. */
export function rateLimitHeadersOf(answer: Answer): Record<string, string> {
  const found: Record<string, string> = {};
  for (const [name, value] of answer.headers) if (name.startsWith('x-ratelimit') || name.startsWith('ratelimit') || name === 'retry-after') found[name] = value;
  return found;
}

/** A graphql-ws client over `ws`, disposed after the test. */
export function wsClient(url: string): Client {
  const client = createClient({ url, webSocketImpl: WebSocket, retryAttempts: 0, lazy: true });
  open[open.length - 1]?.clients.push(client);
  return client;
}

/** Everything a subscription sends until it completes or fails: its results, or the errors of its `error` message. */
export async function subscribeAll(client: Client, text: string): Promise<{ results: unknown[]; errors?: readonly GraphQLError[] }> {
  const results: unknown[] = [];
  try {
    for await (const result of client.iterate({ query: text })) results.push(result);
    return { results };
  } catch (error) {
    return { results, errors: error as readonly GraphQLError[] };
  }
}
