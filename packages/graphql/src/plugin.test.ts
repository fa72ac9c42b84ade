import { createLimiter, type Decision } from '@floodgate/core';
import { createYoga, type Plugin } from 'graphql-yoga';
import { describe, expect, it } from 'vitest';
import { getRateLimit, keyBy, useRateLimit } from './index.js';
import { gates, post, query, rateLimitHeadersOf, serveYoga, testSchema } from './test-servers.js';

const T0 = Date.UTC(2100, 0, 1); // a window boundary of every windowMs below: waits are exact
const frozen = () => T0;

describe('useRateLimit() on GraphQL Yoga, over HTTP', () => {
  it('denies the 3rd operation with RATE_LIMITED, 429, Retry-After and the X-RateLimit headers', async () => {
    const { url } = await serveYoga({ plugins: [useRateLimit({ algorithm: 'fixed-window', limit: 2, windowMs: 60_000, now: () => T0 + 15_000 })] });
    const first = await query(url, '{ hello }');
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ data: { hello: 'world' } });
    const reset = String((T0 + 60_000) / 1000);
    expect(rateLimitHeadersOf(first)).toEqual({ 'x-ratelimit-limit': '2', 'x-ratelimit-remaining': '1', 'x-ratelimit-reset': reset });
    expect(rateLimitHeadersOf(await query(url, '{ hello }'))).toMatchObject({ 'x-ratelimit-remaining': '0' });

    const denied = await query(url, '{ hello }');
    expect(denied.status).toBe(429);
    expect(denied.body).toEqual({
      errors: [{ message: 'Too many requests, please try again later.', extensions: { code: 'RATE_LIMITED', retryAfterMs: 45_000, rule: 'default' } }],
    });
    expect(rateLimitHeadersOf(denied)).toEqual({ 'x-ratelimit-limit': '2', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': reset, 'retry-after': '45' });
  });

  it('keys by the client address of context.req, and lets the window pass on the injected clock', async () => {
    let now = T0;
    const plugin = useRateLimit({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000, now: () => now });
    const { url } = await serveYoga({ plugins: [plugin] });
    expect((await query(url, '{ hello }')).status).toBe(200);
    expect((await plugin.limiter.peek('127.0.0.1')).remaining).toBe(0);
    expect((await query(url, 'mutation { send(text: "hi") }')).status).toBe(429);
    now = T0 + 59_999;
    expect((await query(url, '{ hello }')).body.errors[0].extensions.retryAfterMs).toBe(1);
    now = T0 + 60_000;
    expect((await query(url, '{ hello }')).body).toEqual({ data: { hello: 'world' } });
  });

  it('takes a key function of { context, operationName, operationType, document, variables }, and costs per operation', async () => {
    const seen: unknown[] = [];
    const plugin = useRateLimit({
      algorithm: 'fixed-window',
      limit: 10,
      windowMs: 60_000,
      now: frozen,
      key: ({ context, operationName, operationType, variables, document }) => {
        seen.push({ operationName, operationType, variables, definitions: document.definitions.length });
        return `client:${context.request.headers.get('x-client')}`;
      },
      cost: ({ operationType }) => (operationType === 'mutation' ? 5 : 1),
    });
    const { url } = await serveYoga({ plugins: [plugin] });
    await query(url, 'query Greeting { hello }', undefined, { 'x-client': 'a' });
    await query(url, 'mutation Send($text: String!) { send(text: $text) }', { text: 'hi' }, { 'x-client': 'a' });
    const other = await query(url, '{ hello }', undefined, { 'x-client': 'b' });
    expect(seen).toEqual([
      { operationName: 'Greeting', operationType: 'query', variables: {}, definitions: 1 },
      { operationName: 'Send', operationType: 'mutation', variables: { text: 'hi' }, definitions: 1 },
      { operationName: undefined, operationType: 'query', variables: {}, definitions: 1 },
    ]);
    expect((await plugin.limiter.peek('client:a')).remaining).toBe(4);
    expect(rateLimitHeadersOf(other)['x-ratelimit-remaining']).toBe('9');
    const tooDear = await query(url, 'mutation { send(text: "x") }', undefined, { 'x-client': 'a' });
    expect(tooDear.body.errors[0].extensions).toEqual({ code: 'RATE_LIMITED', retryAfterMs: 60_000, rule: 'default' });
    expect((await plugin.limiter.peek('client:a')).remaining).toBe(4); // a denied call takes nothing
  });

  it('limits by scope: one call over a global rule and a per-client rule, all or nothing', async () => {
    const plugin = useRateLimit({
      rules: [
        { name: 'everyone', scope: 'global', algorithm: 'fixed-window', limit: 3, windowMs: 60_000 },
        { name: 'per-client', scope: 'client', algorithm: 'fixed-window', limit: 2, windowMs: 60_000 },
      ],
      key: { client: keyBy.header('x-client') },
      now: frozen,
    });
    const { url } = await serveYoga({ plugins: [plugin] });
    const as = (client: string) => query(url, '{ hello }', undefined, { 'x-client': client });
    expect((await as('a')).status).toBe(200);
    expect((await as('a')).status).toBe(200);
    expect((await as('a')).body.errors[0].extensions.rule).toBe('per-client');
    expect((await as('b')).status).toBe(200);
    const last = await as('c');
    expect(last.body.errors[0].extensions).toEqual({ code: 'RATE_LIMITED', retryAfterMs: 60_000, rule: 'everyone' });
  });

  it('sends draft-8 headers, or with headers: false only the Retry-After of a denial', async () => {
    const draft8 = await serveYoga({ plugins: [useRateLimit({ algorithm: 'fixed-window', limit: 5, windowMs: 60_000, now: frozen, headers: 'draft-8' })] });
    expect(rateLimitHeadersOf(await query(draft8.url, '{ hello }'))).toEqual({ 'ratelimit-policy': '"default";q=5;w=60', ratelimit: '"default";r=4;t=60' });
    const none = await serveYoga({ plugins: [useRateLimit({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000, now: frozen, headers: false })] });
    await query(none.url, '{ hello }');
    const denied = await query(none.url, '{ hello }');
    expect(denied.status).toBe(429);
    expect(rateLimitHeadersOf(denied)).toEqual({ 'retry-after': '60' }); // as every adapter: Retry-After whatever the mode
  });

  it('answers a batch with one set of headers: the tighter decision of the quota, and Retry-After when an operation was denied', async () => {
    const { url } = await serveYoga({ plugins: [useRateLimit({ algorithm: 'fixed-window', limit: 2, windowMs: 60_000, now: frozen })], batching: true });
    const answer = await post(url, [{ query: '{ hello }' }, { query: '{ cheap }' }, { query: '{ hello }' }]);
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual([
      { data: { hello: 'world' } },
      { data: { cheap: 1 } },
      { errors: [{ message: 'Too many requests, please try again later.', extensions: { code: 'RATE_LIMITED', retryAfterMs: 60_000, rule: 'default' } }] },
    ]);
    expect(rateLimitHeadersOf(answer)).toEqual({
      'x-ratelimit-limit': '2',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': String((T0 + 60_000) / 1000),
      'retry-after': '60',
    });
  });

  it('in shadow mode decides and reports, and denies nothing', async () => {
    const plugin = useRateLimit({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000, now: frozen, shadow: true });
    const limited: Decision[] = [];
    plugin.limiter.on('limited', ({ decision }) => limited.push(decision));
    const { url } = await serveYoga({ plugins: [plugin] });
    await query(url, '{ hello }');
    const over = await query(url, '{ hello }');
    expect(over.status).toBe(200);
    expect(over.body).toEqual({ data: { hello: 'world' } });
    expect(rateLimitHeadersOf(over)).toEqual({ 'x-ratelimit-limit': '1', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String((T0 + 60_000) / 1000) });
    expect(limited).toHaveLength(1);
  });

  it('does not count operations skip() exempts', async () => {
    const plugin = useRateLimit({
      algorithm: 'fixed-window',
      limit: 1,
      windowMs: 60_000,
      now: frozen,
      skip: ({ operationName }) => operationName === 'Health',
    });
    const { url } = await serveYoga({ plugins: [plugin] });
    for (let i = 0; i < 3; i++) expect((await query(url, 'query Health { hello }')).status).toBe(200);
    expect(rateLimitHeadersOf(await query(url, 'query Health { hello }'))).toEqual({});
    expect((await query(url, '{ hello }')).status).toBe(200);
    expect((await query(url, '{ hello }')).status).toBe(429);
  });

  it('gives resolvers the decision through getRateLimit(context)', async () => {
    const plugin = useRateLimit({ algorithm: 'fixed-window', limit: 5, windowMs: 60_000, now: frozen });
    const quota: Plugin = {
      onContextBuilding: ({ extendContext }) => extendContext({ quota: (resolving: object) => getRateLimit(resolving)?.remaining } as object),
    };
    const { url } = await serveYoga({ plugins: [plugin, quota] });
    expect((await query(url, '{ quota }')).body).toEqual({ data: { quota: 4 } });
    expect((await query(url, '{ quota }')).body).toEqual({ data: { quota: 3 } });
  });

  it('holds a concurrency lease while the operation runs, and gives it back when it is done', async () => {
    const plugin = useRateLimit({ algorithm: 'concurrency', limit: 1, windowMs: 60_000, now: frozen });
    const { url } = await serveYoga({ plugins: [plugin] });
    const running = query(url, '{ wait }');
    while ((await plugin.limiter.peek('127.0.0.1')).remaining > 0) await new Promise((resolve) => setImmediate(resolve)); // until it is admitted
    const second = await query(url, '{ hello }');
    expect(second.status).toBe(429);
    expect(second.body.errors[0].extensions.code).toBe('RATE_LIMITED');
    gates.wait.open();
    expect((await running).body).toEqual({ data: { wait: 'done' } });
    expect((await query(url, '{ hello }')).status).toBe(200);
    expect((await query(url, '{ hello }')).status).toBe(200);
  });
});

describe('bad keys and costs', () => {
  it('answers ERR_FG_KEY or ERR_FG_COST in the result (500), and serves the next operation', async () => {
    const { url } = await serveYoga({
      plugins: [
        useRateLimit({
          limit: 5,
          windowMs: 60_000,
          now: frozen,
          key: ({ context }) => context.request.headers.get('x-key') ?? '',
          cost: ({ variables }) => {
            if (variables.boom === true) throw new Error('no cost today');
            return (variables.cost as number) ?? 1;
          },
        }),
      ],
    });
    const noKey = await query(url, '{ hello }');
    expect(noKey.status).toBe(500);
    expect(noKey.body.errors).toEqual([{ message: expect.stringContaining('The key function returned ""'), extensions: { code: 'ERR_FG_KEY' } }]);
    const zero = await query(url, 'query ($cost: Int) { users(first: $cost) { id } }', { cost: 0 }, { 'x-key': 'k' });
    expect(zero.body.errors).toEqual([{ message: 'cost must be a positive integer, got 0. [ERR_FG_COST]', extensions: { code: 'ERR_FG_COST' } }]);
    const threw = await query(url, 'query ($boom: Boolean!) { hello @include(if: $boom) }', { boom: true }, { 'x-key': 'k' });
    expect(threw.body.errors[0]).toEqual({ message: 'The cost function threw: no cost today [ERR_FG_COST]', extensions: { code: 'ERR_FG_COST' } });
    expect((await query(url, '{ hello }', undefined, { 'x-key': 'k' })).body).toEqual({ data: { hello: 'world' } });
  });

  it('says a key is needed where the context carries no client address (Yoga without Node: a fetch Request only)', async () => {
    const yoga = createYoga({ schema: testSchema(), plugins: [useRateLimit({ limit: 5, windowMs: 60_000 })], logging: false });
    const res = await yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ hello }' }),
    });
    expect(res.status).toBe(500);
    const body = await res.json();
    expect(body.errors[0].extensions).toEqual({ code: 'ERR_FG_OPTION' });
    expect(body.errors[0].message).toMatch(/has no key option, and the context has no Node request \(context\.req\).*Pass key: /);
  });

  it('refuses bad options at construction, naming the fix', () => {
    expect(() => useRateLimit({ limit: 0, windowMs: 1000 })).toThrow(expect.objectContaining({ code: 'ERR_FG_LIMIT' }));
    expect(() => useRateLimit({ limit: 1, windowMs: 1000, cost: 0 })).toThrow(expect.objectContaining({ code: 'ERR_FG_COST' }));
    expect(() => useRateLimit({ limit: 1, windowMs: 1000, statusCode: 503 } as never)).toThrow(
      expect.objectContaining({
        code: 'ERR_FG_UNKNOWN_OPTION',
        message: expect.stringContaining("no option 'statusCode' (a denial is a GraphQL error RATE_LIMITED"),
      }),
    );
    expect(() => useRateLimit({ limit: 1, windowMs: 1000, complexity: { maxDepth: 5 } })).toThrow(
      expect.objectContaining({ code: 'ERR_FG_OPTION', message: expect.stringContaining("cost: 'complexity'") }),
    );
    expect(() => useRateLimit({ limit: 1, windowMs: 1000, cost: 'complexity', complexity: { maxListSize: -1 } })).toThrow(
      expect.objectContaining({ code: 'ERR_FG_OPTION', message: expect.stringContaining('complexity.maxListSize must be an integer >= 0') }),
    );
    expect(() => useRateLimit({ rules: [{ name: 'u', scope: 'user', limit: 1, windowMs: 1000 }] })).toThrow(
      expect.objectContaining({ code: 'ERR_FG_OPTION', message: expect.stringContaining("rules of scope 'user' need a key option") }),
    );
    expect(() => useRateLimit({ limiter: createLimiter({ limit: 1, windowMs: 1000 }), limit: 2 })).toThrow(
      expect.objectContaining({ code: 'ERR_FG_OPTION', message: expect.stringContaining("got both 'limiter' and 'limit'") }),
    );
    expect(() => useRateLimit({ limit: 1, windowMs: 1000, headers: 'draft-99' as never })).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
    expect(() => useRateLimit({ limit: 1, windowMs: 1000, key: 'ip' as never })).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
  });
});
