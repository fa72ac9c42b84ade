import { ApolloServer, type BaseContext } from '@apollo/server';
import { startStandaloneServer } from '@apollo/server/standalone';
import { afterEach, describe, expect, it } from 'vitest';
import { apolloRateLimit } from './apollo.js';
import { getRateLimit, rateLimitDirective } from './index.js';
import { query, rateLimitHeadersOf, testSchema } from './test-servers.js';

const T0 = Date.UTC(2100, 0, 1);
const frozen = () => T0;

const running: ApolloServer<BaseContext>[] = [];
afterEach(async () => {
  for (const server of running.splice(0)) await server.stop();
});

/** A real Apollo Server 4 standalone server on an ephemeral port; its context carries the Node request (what the default key reads). */
async function serveApollo(options: { plugins: ApolloServer['internals']['plugins']; directive?: ReturnType<typeof rateLimitDirective>; withReq?: boolean }) {
  const server = new ApolloServer<BaseContext>({ schema: testSchema(options.directive), plugins: options.plugins });
  running.push(server);
  const { url } = await startStandaloneServer(server, {
    listen: { port: 0, host: '127.0.0.1' },
    context: async ({ req }) => (options.withReq === false ? {} : { req }),
  });
  return url;
}

describe('apolloRateLimit() on Apollo Server 4 (standalone, over HTTP)', () => {
  it('denies the 3rd operation with RATE_LIMITED, 429, Retry-After and the X-RateLimit headers', async () => {
    const plugin = apolloRateLimit({ algorithm: 'fixed-window', limit: 2, windowMs: 60_000, now: () => T0 + 20_000 });
    const url = await serveApollo({ plugins: [plugin] });
    const first = await query(url, '{ hello }');
    expect(first.body).toEqual({ data: { hello: 'world' } });
    const reset = String((T0 + 60_000) / 1000);
    expect(rateLimitHeadersOf(first)).toEqual({ 'x-ratelimit-limit': '2', 'x-ratelimit-remaining': '1', 'x-ratelimit-reset': reset });
    await query(url, '{ hello }');
    const denied = await query(url, '{ hello }');
    expect(denied.status).toBe(429);
    expect(denied.body).toEqual({
      errors: [{ message: 'Too many requests, please try again later.', extensions: { code: 'RATE_LIMITED', retryAfterMs: 40_000, rule: 'default' } }],
    });
    expect(rateLimitHeadersOf(denied)).toEqual({ 'x-ratelimit-limit': '2', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': reset, 'retry-after': '40' });
    expect((await plugin.limiter.peek('127.0.0.1')).remaining).toBe(0); // keyed by context.req's address
  });

  it("charges cost: 'complexity', and works beside the @rateLimit directive", async () => {
    const plugin = apolloRateLimit({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000, now: frozen, cost: 'complexity' });
    const directive = rateLimitDirective({ now: frozen });
    const url = await serveApollo({ plugins: [plugin], directive });
    const answer = await query(url, '{ users(first: 3) { name avatar } }'); // 1 + 3 × 2 = 7
    expect(rateLimitHeadersOf(answer)['x-ratelimit-remaining']).toBe('93');
    const second = await query(url, '{ users(first: 3) { avatar } }'); // avatar: 4 per minute
    expect(second.status).toBe(200);
    expect(second.body.data.users).toEqual([{ avatar: 'avatar 1' }, { avatar: null }, { avatar: null }]);
    expect(second.body.errors.map((e: { path: unknown; extensions: { code: string } }) => [e.path, e.extensions.code])).toEqual([
      [['users', 1, 'avatar'], 'RATE_LIMITED'],
      [['users', 2, 'avatar'], 'RATE_LIMITED'],
    ]);
    const never = await query(url, '{ users(first: 100) { name } }'); // 101 > 100: it can never pass
    expect(never.status).toBe(429);
    expect(never.body.errors[0].extensions).toEqual({ code: 'RATE_LIMITED', retryAfterMs: null, rule: 'default' });
  });

  it('gives resolvers the decision, and says a key is needed when the context has no request', async () => {
    const plugin = apolloRateLimit({ algorithm: 'fixed-window', limit: 5, windowMs: 60_000, now: frozen });
    const server = new ApolloServer<BaseContext>({ schema: testSchema(), plugins: [plugin] });
    running.push(server);
    const { url } = await startStandaloneServer(server, {
      listen: { port: 0, host: '127.0.0.1' },
      // Apollo hands resolvers a copy of this object: getRateLimit reads the one they get.
      context: async ({ req }) => ({ req, quota: (resolving: object) => getRateLimit(resolving)?.remaining }),
    });
    expect((await query(url, '{ quota }')).body).toEqual({ data: { quota: 4 } });

    const bare = await serveApollo({ plugins: [apolloRateLimit({ limit: 5, windowMs: 60_000 })], withReq: false });
    const refused = await query(bare, '{ hello }');
    expect(refused.status).toBe(500);
    expect(refused.body.errors[0]).toMatchObject({ extensions: { code: 'ERR_FG_OPTION' }, message: expect.stringContaining('the context has no request') });
  });
});
