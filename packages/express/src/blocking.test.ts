import express, { type Request, type Response } from 'express';
import request from 'supertest';
import { expect, it } from 'vitest';
import { rateLimit } from './index.js';

it('blocks a login for 15 minutes after 5 failed attempts, with Retry-After saying so (the core README example)', async () => {
  let now = Date.UTC(2026, 0, 1, 9); // 09:00, the start of a 15-minute window
  const app = express();
  app.use(express.json());
  app.post(
    '/login',
    rateLimit({
      algorithm: 'fixed-window',
      limit: 5,
      windowMs: 15 * 60_000,
      blockMs: 15 * 60_000,
      skipSuccessfulRequests: true, // only failed logins count
      now: () => now,
    }),
    (req: Request, res: Response) => {
      res.status(req.body.password === 'secret' ? 200 : 401).json({ remaining: req.rateLimit?.remaining });
    },
  );
  const login = (password: string) => request(app).post('/login').send({ password });

  // A successful login is given back: it does not count.
  await login('secret').expect(200);
  for (let i = 0; i < 5; i++) {
    now += 10_000;
    await login('guess').expect(401);
  }
  now += 10_000; // 09:01: the sixth attempt breaches
  const blocked = await login('guess').expect(429);
  expect(blocked.headers['retry-after']).toBe('900');
  expect(blocked.headers['x-ratelimit-remaining']).toBe('0');
  expect(blocked.headers['x-ratelimit-reset']).toBe(String((now + 900_000) / 1000));

  // Even the right password waits: the block holds, and trying does not extend it.
  now += 5 * 60_000;
  expect((await login('secret').expect(429)).headers['retry-after']).toBe('600');
  now += 10 * 60_000 - 1_000;
  expect((await login('secret').expect(429)).headers['retry-after']).toBe('1');
  now += 1_000; // 09:16: 15 minutes after the breach
  await login('secret').expect(200);
});

it('keeps blockMs when the limit is a function of the request (a plan)', async () => {
  let now = Date.UTC(2026, 0, 1, 9);
  const app = express();
  app.get(
    '/api',
    rateLimit({
      algorithm: 'fixed-window',
      windowMs: 60_000,
      blockMs: 10 * 60_000,
      limit: (req) => (req.get('x-plan') === 'pro' ? 3 : 1),
      now: () => now,
    }),
    (_req: Request, res: Response) => {
      res.send('ok');
    },
  );
  await request(app).get('/api').set('x-plan', 'pro').expect(200);
  await request(app).get('/api').set('x-plan', 'pro').expect(200);
  await request(app).get('/api').set('x-plan', 'pro').expect(200);
  const breached = await request(app).get('/api').set('x-plan', 'pro').expect(429);
  expect(breached.headers['retry-after']).toBe('600');
  now += 60_000; // a new window, but the block holds
  expect((await request(app).get('/api').set('x-plan', 'pro').expect(429)).headers['retry-after']).toBe('540');
});
