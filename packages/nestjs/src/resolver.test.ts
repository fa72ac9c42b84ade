import 'reflect-metadata';
import { once } from 'node:events';
import { type LimiterOptions, RedisStore } from '@floodgate/core';
import type { RateLimitExtensions } from '@floodgate/graphql';
import { startRedis } from '@floodgate/test-support';
import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import type { INestApplication } from '@nestjs/common';
import { Context, GraphQLModule, Mutation, Query, Resolver, Subscription } from '@nestjs/graphql';
import { Test } from '@nestjs/testing';
import { type Client, createClient } from 'graphql-ws';
import { afterEach, describe, expect, expectTypeOf, it } from 'vitest';
import WebSocket from 'ws';
import { FloodgateModule, keyBy, type NestRateLimitOptions, RateLimit, type RateLimitDenial, SkipRateLimit } from './index.js';

const closers: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

const typeDefs = /* GraphQL */ `
  type Query {
    hello: String
    whoami: String
    health: String
  }
  type Mutation {
    send(text: String!): Boolean
  }
  type Subscription {
    ticks: Int
  }
`;

@Resolver()
class AppResolver {
  @Query('hello')
  hello() {
    return 'world';
  }

  @Query('whoami')
  // biome-ignore lint/suspicious/noExplicitAny: the test's context.
  whoami(@Context() context: any) {
    return context.user?.id ?? 'nobody';
  }

  @Query('health')
  @SkipRateLimit()
  health() {
    return 'ok';
  }

  @Mutation('send')
  @RateLimit({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000, stack: false }) // its own limit, in place of the module's
  send() {
    return true;
  }

  @Subscription('ticks')
  async *ticks() {
    for (let ticks = 1; ticks <= 3; ticks++) yield { ticks };
  }
}

const userFrom = (value: unknown) => (typeof value === 'string' ? { id: value } : undefined);

/**
 * A context function that finds the user over HTTP (a header) and over graphql-ws (connectionParams);
 * it returns no req for graphql-ws, so Nest's Apollo driver puts graphql-ws's context there.
 */
// biome-ignore lint/suspicious/noExplicitAny: Apollo's and graphql-ws's context arguments.
const userContext = (arg: any) => (arg.req ? { req: arg.req, user: userFrom(arg.req.headers['x-user']) } : { user: userFrom(arg.connectionParams?.user) });

/** A Nest app with Apollo Server (queries over HTTP, subscriptions over graphql-ws) on a loopback port. */
async function startApp(options: NestRateLimitOptions, graphql: Partial<ApolloDriverConfig> = {}): Promise<{ url: string; wsUrl: string }> {
  const moduleRef = await Test.createTestingModule({
    imports: [
      FloodgateModule.forRoot(options),
      GraphQLModule.forRoot<ApolloDriverConfig>({
        driver: ApolloDriver,
        typeDefs,
        subscriptions: { 'graphql-ws': true },
        includeStacktraceInErrorResponses: false,
        graphiql: false,
        ...graphql,
      }),
    ],
    providers: [AppResolver],
  }).compile();
  const app: INestApplication = moduleRef.createNestApplication({ logger: false });
  await app.listen(0, '127.0.0.1');
  closers.push(() => app.close());
  const url = `${(await app.getUrl()).replace('[::1]', '127.0.0.1')}/graphql`;
  return { url, wsUrl: url.replace('http:', 'ws:') };
}

// biome-ignore lint/suspicious/noExplicitAny: GraphQL results as JSON.
type Result = { data?: any; errors?: { message: string; extensions?: Record<string, unknown> }[] };

async function post(url: string, query: string, headers: Record<string, string> = {}): Promise<{ result: Result; headers: Headers }> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ query }) });
  return { result: (await response.json()) as Result, headers: response.headers };
}

/** A graphql-ws client, from `localAddress` if given. */
function wsClient(url: string, options: { localAddress?: string; connectionParams?: Record<string, unknown> } = {}): Client {
  const { localAddress } = options;
  const client = createClient({
    url,
    connectionParams: options.connectionParams,
    retryAttempts: 0,
    webSocketImpl: class extends WebSocket {
      constructor(address: string, protocols?: string | string[]) {
        super(address, protocols, localAddress === undefined ? {} : { localAddress });
      }
    },
  });
  closers.push(() => client.dispose());
  return client;
}

/** Every result of a subscription until it completes, and the error it ended with, if any. */
function subscribeAll(client: Client, query: string): Promise<{ results: Result[]; error?: unknown }> {
  const results: Result[] = [];
  return new Promise((resolve) => {
    client.subscribe(
      { query },
      { next: (result) => results.push(result as Result), error: (error) => resolve({ results, error }), complete: () => resolve({ results }) },
    );
  });
}

const T0 = 1_200_000; // a fixed window of 10 s (and of 60 s) starts here (windows are aligned to the epoch)
const DENIED = 'Too many requests, please try again later.';

describe('GraphQL resolvers (@nestjs/graphql with Apollo Server 5; fetch and graphql-ws)', () => {
  it("denies a client's 3rd query with a GraphQL error RATE_LIMITED that says when to retry, exactly, with the headers on the HTTP response", async () => {
    let now = T0 + 3_000;
    const { url } = await startApp({ algorithm: 'fixed-window', limit: 2, windowMs: 10_000, now: () => now });
    expect((await post(url, '{ hello }')).result).toEqual({ data: { hello: 'world' } });
    const second = await post(url, '{ hello }');
    expect(second.headers.get('x-ratelimit-remaining')).toBe('0');
    const denied = await post(url, '{ hello }');
    expect(denied.result).toEqual({
      data: { hello: null },
      errors: [
        { message: DENIED, locations: [{ line: 1, column: 3 }], path: ['hello'], extensions: { code: 'RATE_LIMITED', retryAfterMs: 7_000, rule: 'default' } },
      ],
    });
    expect(denied.headers.get('retry-after')).toBe('7');
    now = T0 + 10_000;
    expect((await post(url, '{ hello }')).result).toEqual({ data: { hello: 'world' } });
  });

  it('applies @RateLimit and @SkipRateLimit on resolvers: a mutation with a limit of its own, a query without any', async () => {
    const { url } = await startApp({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000, now: () => T0 });
    expect((await post(url, 'mutation { send(text: "a") }')).result).toEqual({ data: { send: true } });
    expect((await post(url, 'mutation { send(text: "b") }')).result.errors?.[0]?.extensions).toEqual({
      code: 'RATE_LIMITED',
      retryAfterMs: 60_000,
      rule: 'default',
    });
    for (let i = 0; i < 3; i++) expect((await post(url, '{ health }')).result).toEqual({ data: { health: 'ok' } });
    // The mutation's limit replaced the module's: the module's unit is still there for a query.
    expect((await post(url, '{ hello }')).result).toEqual({ data: { hello: 'world' } });
  });

  it('limits a subscription over graphql-ws when it starts (no crash: the denial reaches the client), keyed by the upgrade request address', async () => {
    const { url, wsUrl } = await startApp({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000, now: () => T0 }); // Nest's default context
    const client = wsClient(wsUrl);
    expect(await subscribeAll(client, 'subscription { ticks }')).toEqual({ results: [{ data: { ticks: 1 } }, { data: { ticks: 2 } }, { data: { ticks: 3 } }] });
    const denied = await subscribeAll(client, 'subscription { ticks }');
    expect(denied.results.flatMap((r) => r.errors ?? []).map((e) => [e.message, e.extensions])).toEqual([
      [DENIED, { code: 'RATE_LIMITED', retryAfterMs: 60_000, rule: 'default' }],
    ]);
    // The server goes on: another address subscribes, and HTTP queries are answered (127.0.0.1's unit is spent).
    expect((await subscribeAll(wsClient(wsUrl, { localAddress: '127.0.0.2' }), 'subscription { ticks }')).results).toHaveLength(3);
    expect((await post(url, '{ hello }')).result.errors?.[0]?.extensions?.code).toBe('RATE_LIMITED');
  });

  it("keys by user with keyBy.user(): the context's user, from a header over HTTP and from connectionParams over graphql-ws", async () => {
    const { url, wsUrl } = await startApp(
      { algorithm: 'fixed-window', limit: 1, windowMs: 60_000, now: () => T0, key: keyBy.user() },
      { context: userContext },
    );
    expect((await post(url, '{ whoami }', { 'x-user': 'ann' })).result).toEqual({ data: { whoami: 'ann' } });
    expect((await post(url, '{ whoami }', { 'x-user': 'ann' })).result.errors?.[0]?.extensions?.code).toBe('RATE_LIMITED');
    expect((await post(url, '{ whoami }', { 'x-user': 'bob' })).result).toEqual({ data: { whoami: 'bob' } });
    // Over graphql-ws: ann's unit is spent, carol's is not; without a user, the upgrade request's address.
    expect(
      (await subscribeAll(wsClient(wsUrl, { connectionParams: { user: 'ann' } }), 'subscription { ticks }')).results[0]?.errors?.[0]?.extensions?.code,
    ).toBe('RATE_LIMITED');
    expect((await subscribeAll(wsClient(wsUrl, { connectionParams: { user: 'carol' } }), 'subscription { ticks }')).results).toHaveLength(3);
    expect((await subscribeAll(wsClient(wsUrl), 'subscription { ticks }')).results).toHaveLength(3);
    expect((await post(url, '{ whoami }')).result.errors?.[0]?.extensions?.code).toBe('RATE_LIMITED'); // 127.0.0.1, spent by the subscription
  });

  it('follows onStoreError when Redis is gone: allow admits, deny answers RATE_LIMITER_UNAVAILABLE', async () => {
    const server = await startRedis();
    closers.push(() => server.stop());
    const client = server.client({ maxRetriesPerRequest: 1 });
    client.on('error', () => {});
    await once(client, 'ready');
    closers.push(() => client.disconnect());
    const policies: NonNullable<LimiterOptions['onStoreError']>[] = ['allow', 'deny'];
    const urls: string[] = [];
    for (const [i, onStoreError] of policies.entries()) {
      const store = new RedisStore({ client });
      urls.push((await startApp({ store, prefix: `policy-${i}:`, timeoutMs: 500, onStoreError, limit: 5, windowMs: 60_000 })).url);
    }
    expect((await post(urls[1] as string, '{ hello }')).result).toEqual({ data: { hello: 'world' } }); // while Redis is up
    await server.stop();
    expect((await post(urls[0] as string, '{ hello }')).result).toEqual({ data: { hello: 'world' } });
    const refused = await post(urls[1] as string, '{ hello }');
    expect(refused.result.errors?.map((e) => [e.message, e.extensions])).toEqual([
      ['Service unavailable: the rate limiter cannot reach its store.', { code: 'RATE_LIMITER_UNAVAILABLE', retryAfterMs: 1_000, rule: 'default' }],
    ]);
  });

  it("sends @floodgate/graphql's extensions: the same fields and codes", () => {
    expectTypeOf<RateLimitExtensions>().toExtend<RateLimitDenial>();
    expectTypeOf<keyof RateLimitDenial>().toEqualTypeOf<keyof RateLimitExtensions>();
  });
});
