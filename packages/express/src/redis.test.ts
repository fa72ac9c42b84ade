import { RedisStore } from '@floodgate/core';
import { useRedisServer } from '@floodgate/test-support';
import express from 'express';
import request from 'supertest';
import { describe, expect, it } from 'vitest';
import { keyBy, rateLimit } from './index.js';

const redisServer = useRedisServer();

describe('rateLimit with a RedisStore', () => {
  it('works unchanged: two apps sharing one Redis share one limit', async () => {
    const redis = redisServer.client;
    const options = {
      rules: [
        { name: 'per-minute', algorithm: 'gcra' as const, limit: 3, windowMs: 60_000 },
        { name: 'per-hour', algorithm: 'fixed-window' as const, limit: 100, windowMs: 3_600_000 },
      ],
      key: keyBy.header('x-user-id'),
      headers: 'both' as const,
      // The apps' clock stands still (RedisStore clock: 'client'): the wait below is exact however long the
      // requests take; timeoutMs is far above any round trip, so a slow moment cannot become a store error.
      now: () => Date.UTC(2100, 0, 1), // ahead of Redis's clock, as clock: 'client' needs
      timeoutMs: 30_000,
    };
    const apps = [0, 1].map(() => {
      const app = express();
      app.use(rateLimit({ ...options, store: new RedisStore({ client: redis, clock: 'client' }) }));
      app.get('/', (req, res) => {
        res.json(req.rateLimit);
      });
      return app;
    });
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++)
      statuses.push(
        (
          await request(apps[i % 2] as express.Express)
            .get('/')
            .set('x-user-id', 'ada')
        ).status,
      );
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
    const denied = await request(apps[0] as express.Express)
      .get('/')
      .set('x-user-id', 'ada');
    expect(denied.headers['retry-after']).toBe('20');
    expect(denied.headers['ratelimit-policy']).toBe('"per-minute";q=3;w=60');
    expect(
      (
        await request(apps[1] as express.Express)
          .get('/')
          .set('x-user-id', 'bob')
      ).status,
    ).toBe(200);
    expect(await redis.exists('fg:{x-user-id:ada}:per-minute', 'fg:{x-user-id:ada}:per-hour')).toBe(2);
  });
});
