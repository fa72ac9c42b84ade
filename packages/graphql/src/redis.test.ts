import { once } from 'node:events';
import { RedisStore } from '@floodgate/core';
import { startRedis, useRedisServer } from '@floodgate/test-support';
import { describe, expect, it } from 'vitest';
import { rateLimitDirective, useRateLimit } from './index.js';
import { query, rateLimitHeadersOf, serveYoga, testSchema } from './test-servers.js';

const T0 = Date.UTC(2100, 0, 1);
const frozen = () => T0; // with clock: 'client', Redis decides on this clock: waits are exact

describe('on Redis', () => {
  const redis = useRedisServer();

  it('shares one limit between two Yoga servers: operations and @rateLimit fields', async () => {
    const server = () => {
      const store = new RedisStore({ client: redis.client, clock: 'client' });
      const directive = rateLimitDirective({ store, now: frozen, timeoutMs: 30_000 });
      return serveYoga({
        plugins: [useRateLimit({ store, algorithm: 'fixed-window', limit: 3, windowMs: 60_000, now: frozen, timeoutMs: 30_000 })],
        schema: testSchema(directive),
      });
    };
    const [one, two] = [(await server()).url, (await server()).url];
    expect((await query(one, '{ expensive }')).body).toEqual({ data: { expensive: 2 } });
    expect((await query(two, '{ expensive }')).body).toEqual({ data: { expensive: 2 } });
    const third = await query(one, '{ hello expensive }'); // the field's limit (2) is spent, the operation's (3) is not
    expect(third.body.data).toEqual({ hello: 'world', expensive: null });
    expect(third.body.errors[0].extensions).toEqual({ code: 'RATE_LIMITED', retryAfterMs: 60_000, rule: 'default' });
    expect(rateLimitHeadersOf(third)['x-ratelimit-remaining']).toBe('0');
    const fourth = await query(two, '{ hello }');
    expect(fourth.status).toBe(429);
    expect(fourth.body.errors[0].extensions).toEqual({ code: 'RATE_LIMITED', retryAfterMs: 60_000, rule: 'default' });
    expect(await redis.client.exists('fg:{127.0.0.1}:default:v2', 'fg:Query.expensive:{127.0.0.1}:default:v2')).toBe(2);
  });

  it("follows onStoreError when Redis is gone: 'allow' answers without headers, 'deny' answers 503 RATE_LIMITER_UNAVAILABLE with Retry-After: 1", async () => {
    const server = await startRedis();
    const client = server.client({ maxRetriesPerRequest: 1 });
    client.on('error', () => {}); // ioredis reports each failed reconnect; the limiter's 'error' event reports what matters
    await once(client, 'ready');
    const urls: string[] = [];
    for (const onStoreError of ['allow', 'deny'] as const) {
      const plugin = useRateLimit({ store: new RedisStore({ client }), prefix: `${onStoreError}:`, onStoreError, limit: 5, windowMs: 60_000, timeoutMs: 500 });
      plugin.limiter.on('error', () => {});
      urls.push((await serveYoga({ plugins: [plugin] })).url);
    }
    const [allow, deny] = urls as [string, string];
    expect(rateLimitHeadersOf(await query(deny, '{ hello }'))).toMatchObject({ 'x-ratelimit-remaining': '4' }); // while Redis is up
    await server.stop();

    const allowed = await query(allow, '{ hello }');
    expect(allowed.status).toBe(200);
    expect(allowed.body).toEqual({ data: { hello: 'world' } });
    expect(rateLimitHeadersOf(allowed)).toEqual({}); // the numbers are unknown

    const refused = await query(deny, '{ hello }');
    expect(refused.status).toBe(503);
    expect(refused.body).toEqual({
      errors: [
        {
          message: 'Service unavailable: the rate limiter cannot reach its store.',
          extensions: { code: 'RATE_LIMITER_UNAVAILABLE', retryAfterMs: 1_000, rule: 'default' },
        },
      ],
    });
    expect(rateLimitHeadersOf(refused)).toEqual({ 'retry-after': '1' });
  });
});
