import { createLimiter, type Decision } from '@floodgate/core';
import { type AdapterUnderTest, adapterContract, held, serveHttp } from '@floodgate/test-support';
import express5, { type NextFunction, type Request, type Response } from 'express';
import express4 from 'express4';
import request from 'supertest';
import { describe, expect, it } from 'vitest';
import { keyBy, rateLimit } from './index.js';

type Express = typeof express5;

function expressUnderTest(name: string, express: Express): AdapterUnderTest {
  return {
    name,
    rateLimit,
    keyBy,
    createLimiter,
    header: ([req], header) => (req as Request).headers[header] as string | undefined,
    teapot: (_req: Request, res: Response, _next: NextFunction, decision: Decision) => {
      res.status(418).json({ rule: decision.rule, retryAfter: res.getHeader('retry-after') });
    },
    seesAbandonedRequests: true,
    reported: ([, res]) => (res as Response).getHeader('x-used') as string | undefined,
    async start(routes, settings = {}) {
      const app = express();
      if (settings.trustProxy) app.set('trust proxy', 'loopback');
      for (const route of routes) {
        const method = route.method === 'POST' ? 'post' : 'get';
        app[method](route.path, ...[route.options].flat().map(rateLimit), (req: Request, res: Response) => {
          if (req.query.throw) throw new Error('the route failed');
          if (req.query.hang) return;
          if (req.query.used) res.setHeader('x-used', String(req.query.used));
          const answer = () => res.status(Number(req.query.status ?? 200)).json(req.rateLimit ?? { skipped: true });
          if (req.query.hold) held(String(req.query.hold)).then(answer);
          else if (req.query.wait) setTimeout(answer, Number(req.query.wait));
          else answer();
        });
      }
      return serveHttp(app);
    },
  };
}

const frameworks: [string, Express][] = [
  ['Express 4', express4 as unknown as Express],
  ['Express 5', express5],
];

for (const [name, express] of frameworks) adapterContract(expressUnderTest(name, express));

describe.each(frameworks)('%s specifics', (_, express) => {
  it("follows app.set('trust proxy'): loopback proxies are trusted, others not", async () => {
    const app = express();
    app.set('trust proxy', 'loopback');
    app.get('/', rateLimit({ limit: 1, windowMs: 60_000 }), (req, res) => {
      res.json(req.rateLimit);
    });
    await request(app).get('/').set('x-forwarded-for', '198.51.100.1').expect(200);
    await request(app).get('/').set('x-forwarded-for', '198.51.100.2').expect(200);
    await request(app).get('/').set('x-forwarded-for', '198.51.100.1').expect(429);
  });

  it('ports from express-rate-limit in one go: every unknown option named in one error, each with its Floodgate name (issue #29.8)', () => {
    const erl = {
      windowMs: 60_000,
      max: 100,
      keyGenerator: () => 'k',
      standardHeaders: 'draft-7',
      legacyHeaders: false,
      requestPropertyName: 'limit',
      identifier: 'api',
    };
    let thrown: (Error & { code?: string }) | undefined;
    try {
      rateLimit(erl as never);
    } catch (error) {
      thrown = error as Error & { code?: string };
    }
    expect(thrown?.code).toBe('ERR_FG_UNKNOWN_OPTION');
    for (const [name, hint] of [
      ['max', "'limit'"],
      ['keyGenerator', "'key'"],
      ['standardHeaders', 'headers:'],
      ['legacyHeaders', 'headers:'],
      ['requestPropertyName', 'req.rateLimit'],
      ['identifier', "rule's name"],
    ]) {
      expect(thrown?.message, name).toContain(`'${name}'`);
      expect(thrown?.message, name).toContain(hint);
    }
  });

  it('answers a denial through an express-rate-limit handler copied as is: handler(req, res, next, options) finds options.statusCode and options.message (issue #29.8)', async () => {
    const app = express();
    app.get(
      '/',
      rateLimit({
        limit: 1,
        windowMs: 60_000,
        statusCode: 429,
        message: 'Slow down.',
        // express-rate-limit's own default handler, as its users copy it:
        handler: (_req, res, _next, options) => {
          res.status(options.statusCode).send(options.message);
        },
      }),
      (_req, res) => {
        res.send('ok');
      },
    );
    await request(app).get('/').expect(200, 'ok');
    const denied = await request(app).get('/');
    expect([denied.status, denied.text]).toEqual([429, 'Slow down.']);
    const defaults = express();
    let seen: Record<string, unknown> | undefined;
    defaults.get(
      '/',
      rateLimit({
        limit: 1,
        windowMs: 60_000,
        handler: (_req, res, _next, options) => {
          seen = { ...options };
          res.status(options.statusCode).send(options.message);
        },
      }),
      (_req, res) => {
        res.send('ok');
      },
    );
    await request(defaults).get('/');
    const text = (await request(defaults).get('/').expect(429)).text;
    expect(text).toBe('Too many requests, please try again later.');
    expect(seen).toMatchObject({ statusCode: 429, limit: 1, windowMs: 60_000, allowed: false, rule: 'default' });
  });

  it("counts a CORS preflight and a HEAD as requests, as express-rate-limit does, and skips preflights with the README's skip (issue #29.10)", async () => {
    const preflight = (app: ReturnType<Express>) => request(app).options('/').set('origin', 'https://app.example').set('access-control-request-method', 'POST');
    const counted = express();
    counted.use(rateLimit({ limit: 3, windowMs: 60_000 }));
    counted.all('/', (_req, res) => {
      res.send('ok');
    });
    await preflight(counted);
    await request(counted).head('/').expect(200);
    await request(counted).get('/').expect(200);
    await request(counted).get('/').expect(429);
    const skipped = express();
    skipped.use(rateLimit({ limit: 1, windowMs: 60_000, skip: (req) => req.method === 'OPTIONS' && req.get('access-control-request-method') !== undefined }));
    skipped.all('/', (_req, res) => {
      res.send('ok');
    });
    for (let i = 0; i < 3; i++) expect((await preflight(skipped)).status).not.toBe(429);
    await request(skipped).get('/').expect(200);
    await request(skipped).get('/').expect(429);
  });

  it('passes request-time errors to the error path as a FloodgateError with a clear message', async () => {
    const errors: string[] = [];
    const app = express();
    app.get('/key', rateLimit({ limit: 10, windowMs: 60_000, key: () => '' }), (_req, res) => {
      res.send('ok');
    });
    app.use((error: Error & { code?: string }, _req: Request, res: Response, _next: NextFunction) => {
      errors.push(`${error.name} ${error.code}: ${error.message}`);
      res.status(500).send('handled');
    });
    await request(app).get('/key').expect(500, 'handled');
    expect(errors).toEqual([
      'FloodgateError ERR_FG_KEY: The key function returned ""; it must return a non-empty string (or an object of keys by scope). [ERR_FG_KEY]',
    ]);
    // Without an error handler, Express's own answers 500 and (outside production) shows the message.
    const plain = express();
    plain.get('/', rateLimit({ limit: 10, windowMs: 60_000, cost: () => 0 }), (_req, res) => {
      res.send('ok');
    });
    const res = await request(plain).get('/');
    expect(res.status).toBe(500);
    expect(res.text).toContain('cost must be a positive integer, got 0');
  });

  it('wraps what a key function throws in ERR_FG_KEY, keeping it as cause and keeping its HTTP status', async () => {
    const errors: unknown[] = [];
    const app = express();
    const unauthorized = Object.assign(new Error('no session'), { status: 401 });
    app.get(
      '/throws',
      rateLimit({
        limit: 10,
        windowMs: 60_000,
        key: () => {
          throw unauthorized;
        },
      }),
      (_req, res) => {
        res.send('ok');
      },
    );
    app.get('/rejects', rateLimit({ limit: 10, windowMs: 60_000, key: { user: () => Promise.reject(new Error('session store down')) } }), (_req, res) => {
      res.send('ok');
    });
    app.use((error: Error & { status?: number }, _req: Request, res: Response, _next: NextFunction) => {
      errors.push(error);
      res.status(error.status ?? 500).send(error.message);
    });
    const thrown = await request(app).get('/throws');
    expect([thrown.status, thrown.text]).toEqual([401, 'The key function threw: no session [ERR_FG_KEY]']);
    expect(errors[0]).toMatchObject({ name: 'FloodgateError', code: 'ERR_FG_KEY', cause: unauthorized });
    const rejected = await request(app).get('/rejects');
    expect([rejected.status, rejected.text]).toEqual([500, 'The key.user function threw: session store down [ERR_FG_KEY]']);
  });

  it('sends the default message when a message function returns undefined', async () => {
    const app = express();
    app.get('/', rateLimit({ limit: 1, windowMs: 60_000, message: () => undefined }), (_req, res) => {
      res.send('ok');
    });
    await request(app).get('/').expect(200);
    const denied = await request(app).get('/');
    expect([denied.status, denied.headers['content-type'], denied.text]).toEqual([
      429,
      'text/plain; charset=utf-8',
      'Too many requests, please try again later.',
    ]);
  });

  it('types req.rateLimit as a Decision', async () => {
    const app = express();
    app.get('/', rateLimit({ limit: 3, windowMs: 60_000 }), (req, res) => {
      const decision: Decision | undefined = req.rateLimit;
      res.json({ remaining: decision?.remaining, rules: decision?.rules.length });
    });
    expect((await request(app).get('/')).body).toEqual({ remaining: 2, rules: 1 });
  });
});
