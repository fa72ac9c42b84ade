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
    expect(await redis.exists('fg:{x-user-id:ada}:per-minute:v2', 'fg:{x-user-id:ada}:per-hour:v2')).toBe(2);
  });

  it('refuses a second limiter that would share counters on one store (ERR_FG_STORE_REUSE), and keeps limiters with their own prefix apart', async () => {
    const store = new RedisStore({ client: redisServer.client });
    const site = rateLimit({ limit: 100, windowMs: 60_000, store });
    // The same rule name ('default') under the same default prefix: both would count in fg:{ip}:default.
    expect(() => rateLimit({ limit: 5, windowMs: 60_000, store })).toThrow(
      expect.objectContaining({ code: 'ERR_FG_STORE_REUSE', message: expect.stringContaining("under prefix 'fg:'") }),
    );
    const app = express();
    app.get('/other', site, (_req, res) => {
      res.send('other');
    });
    app.get('/strict', rateLimit({ limit: 5, windowMs: 60_000, store, prefix: 'strict:' }), (_req, res) => {
      res.send('strict');
    });
    for (let i = 0; i < 10; i++) await request(app).get('/other').expect(200);
    const strict = await request(app).get('/strict').expect(200);
    expect(strict.headers['x-ratelimit-remaining']).toBe('4');
    // Rules of other names never collide: a login limit next to the site-wide one needs no prefix.
    expect(() => rateLimit({ name: 'login', limit: 5, windowMs: 60_000, store })).not.toThrow();
  });
});
