import { createSchema } from 'graphql-yoga';
import { describe, expect, it } from 'vitest';
import { keyBy, rateLimitDirective } from './index.js';
import { query, serveYoga, subscribeAll, testSchema, wsClient } from './test-servers.js';

const T0 = Date.UTC(2100, 0, 1);
const frozen = () => T0;
const denied = (path: (string | number)[], retryAfterMs = 60_000) => ({
  message: 'Too many requests, please try again later.',
  locations: expect.any(Array),
  path,
  extensions: { code: 'RATE_LIMITED', retryAfterMs, rule: 'default' },
});

describe('the @rateLimit directive', () => {
  it('resolves a denied field to an error at its path while the other fields resolve', async () => {
    const directive = rateLimitDirective({ now: frozen });
    const { url } = await serveYoga({ plugins: [], schema: testSchema(directive) });
    expect((await query(url, '{ cheap expensive }')).body).toEqual({ data: { cheap: 1, expensive: 2 } });
    expect((await query(url, '{ expensive }')).body).toEqual({ data: { expensive: 2 } });
    const third = await query(url, '{ cheap expensive hello }');
    expect(third.status).toBe(200);
    expect(third.body).toEqual({ data: { cheap: 1, expensive: null, hello: 'world' }, errors: [denied(['expensive'])] });
    expect([...directive.limiters.keys()].sort()).toEqual(['Query.expensive', 'Subscription.limitedTicks', 'User.avatar', 'User.postCount']);
    expect((await directive.limiters.get('Query.expensive')?.peek('127.0.0.1'))?.remaining).toBe(0);
  });

  it('counts a field in a list once per item, or once per operation with perOperation: true', async () => {
    const directive = rateLimitDirective({ now: frozen });
    const { url } = await serveYoga({ plugins: [], schema: testSchema(directive) });
    // avatar: 4 per minute, one call per user.
    expect((await query(url, '{ users(first: 3) { avatar } }')).body.errors).toBeUndefined();
    const second = await query(url, '{ users(first: 3) { id avatar } }');
    expect(second.body.data.users).toEqual([
      { id: '1', avatar: 'avatar 1' },
      { id: '2', avatar: null },
      { id: '3', avatar: null },
    ]);
    expect(second.body.errors).toEqual([denied(['users', 1, 'avatar']), denied(['users', 2, 'avatar'])]);
    // postCount: 2 per minute, perOperation: the first resolution of an operation decides for all of them.
    const once = await query(url, '{ users(first: 3) { postCount } }');
    expect(once.body).toEqual({ data: { users: [{ postCount: 0 }, { postCount: 0 }, { postCount: 0 }] } });
    expect((await directive.limiters.get('User.postCount')?.peek('127.0.0.1'))?.remaining).toBe(1);
    expect((await query(url, '{ users(first: 5) { postCount } }')).body.errors).toBeUndefined();
    const third = await query(url, '{ users(first: 2) { postCount } }');
    expect(third.body.errors).toEqual([denied(['users', 0, 'postCount']), denied(['users', 1, 'postCount'])]);
  });

  it('takes several named rules (repeated), a key per scope, and a message', async () => {
    const directive = rateLimitDirective({
      now: frozen,
      key: { user: keyBy.header('x-user') },
      message: ({ field }) => `${field} is busy`,
    });
    const schema = directive.transformer(
      createSchema({
        typeDefs: [
          directive.typeDefs,
          `type Query {
            search: Int
              @rateLimit(name: "burst", scope: "user", algorithm: "fixed-window", limit: 2, windowMs: 1000)
              @rateLimit(name: "minute", scope: "global", algorithm: "fixed-window", limit: 3, windowMs: 60000, cost: 1)
          }`,
        ],
        resolvers: { Query: { search: () => 7 } },
      }),
    );
    const { url } = await serveYoga({ plugins: [], schema });
    const as = (user: string) => query(url, '{ search }', undefined, { 'x-user': user });
    expect((await as('a')).body).toEqual({ data: { search: 7 } });
    expect((await as('a')).body).toEqual({ data: { search: 7 } });
    expect((await as('a')).body.errors[0]).toMatchObject({ message: 'Query.search is busy', extensions: { rule: 'burst', retryAfterMs: 1000 } });
    expect((await as('b')).body).toEqual({ data: { search: 7 } });
    expect((await as('c')).body.errors[0]).toMatchObject({ extensions: { code: 'RATE_LIMITED', rule: 'minute', retryAfterMs: 60_000 } });
  });

  it('limits a subscription field when it is subscribed to, not at each event', async () => {
    const directive = rateLimitDirective({ now: frozen });
    const { wsUrl } = await serveYoga({ plugins: [], schema: testSchema(directive) });
    const client = wsClient(wsUrl);
    expect(await subscribeAll(client, 'subscription { limitedTicks }')).toEqual({
      results: [{ data: { limitedTicks: 1 } }, { data: { limitedTicks: 2 } }],
    });
    const second = await subscribeAll(client, 'subscription { limitedTicks }');
    expect(second.results).toEqual([{ errors: [denied(['limitedTicks'])] }]);
  });

  it('in shadow mode denies nothing; skip() exempts calls; a bad key is ERR_FG_KEY at the field alone', async () => {
    const shadow = rateLimitDirective({ now: frozen, shadow: true });
    const first = await serveYoga({ plugins: [], schema: testSchema(shadow) });
    for (let i = 0; i < 3; i++) expect((await query(first.url, '{ expensive }')).body).toEqual({ data: { expensive: 2 } });
    expect((await shadow.limiters.get('Query.expensive')?.peek('127.0.0.1'))?.remaining).toBe(0);

    const skipping = rateLimitDirective({ now: frozen, skip: ({ context }) => context.request.headers.get('x-admin') === 'yes' });
    const second = await serveYoga({ plugins: [], schema: testSchema(skipping) });
    for (let i = 0; i < 3; i++) expect((await query(second.url, '{ expensive }', undefined, { 'x-admin': 'yes' })).body).toEqual({ data: { expensive: 2 } });
    expect((await skipping.limiters.get('Query.expensive')?.peek('127.0.0.1'))?.remaining).toBe(2);

    const badKey = rateLimitDirective({ now: frozen, key: () => 42 as never });
    const third = await serveYoga({ plugins: [], schema: testSchema(badKey) });
    const answer = await query(third.url, '{ cheap expensive }');
    expect(answer.body).toEqual({
      data: { cheap: 1, expensive: null },
      errors: [
        {
          message: 'The key function returned 42; it must return a non-empty string (or an object of keys by scope). [ERR_FG_KEY]',
          locations: expect.any(Array),
          path: ['expensive'],
          extensions: { code: 'ERR_FG_KEY' },
        },
      ],
    });
  });

  it('takes another name, and refuses bad directives when the schema is transformed, naming the field', () => {
    const throttle = rateLimitDirective({ name: 'throttle' });
    expect(throttle.typeDefs).toContain('directive @throttle(');
    const schemaWith = (field: string, directive = rateLimitDirective()) =>
      directive.transformer(createSchema({ typeDefs: [directive.typeDefs, `type Query { ${field} }`], resolvers: { Query: {} } }));
    expect(schemaWith('a: Int @throttle(limit: 1, windowMs: 1000)', throttle).getQueryType()?.getFields().a).toBeDefined();
    expect(() => schemaWith('a: Int @rateLimit(limit: 0, windowMs: 1000)')).toThrow(
      expect.objectContaining({ code: 'ERR_FG_LIMIT', message: expect.stringMatching(/^@rateLimit on Query\.a: rule\.limit must be/) }),
    );
    expect(() => schemaWith('a: Int @rateLimit(limit: 1, windowMs: 1000) @rateLimit(limit: 5, windowMs: 60000)')).toThrow(
      expect.objectContaining({ code: 'ERR_FG_RULES', message: expect.stringContaining('each needs a name') }),
    );
    expect(() => schemaWith('a: Int @rateLimit(limit: 1, windowMs: 1000, algorithm: "leaky")')).toThrow(expect.objectContaining({ code: 'ERR_FG_ALGORITHM' }));
    expect(() => schemaWith('a: Int @rateLimit(limit: 1, windowMs: 1000, cost: 0)')).toThrow(expect.objectContaining({ code: 'ERR_FG_COST' }));
    expect(() => schemaWith('a: Int @rateLimit(limit: 1, windowMs: 1000, scope: "user")')).toThrow(
      expect.objectContaining({ code: 'ERR_FG_OPTION', message: expect.stringContaining("scope 'user' needs the directive's key option") }),
    );
    expect(() => rateLimitDirective({ limit: 5 } as never)).toThrow(expect.objectContaining({ code: 'ERR_FG_UNKNOWN_OPTION' }));
    expect(() => rateLimitDirective({ name: 'rate-limit' })).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
  });
});
