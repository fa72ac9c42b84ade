import { captureWarnings, serveHttp } from '@floodgate/test-support';
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import request from 'supertest';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type ExpressRateLimitOptions, keyBy, rateLimit } from './index.js';

/** An app limiting GET / with these options, answering 200 "ok"; errors answer 500 with their code. */
function appWith(options: ExpressRateLimitOptions, trustProxy?: unknown) {
  const app = express();
  if (trustProxy !== undefined) app.set('trust proxy', trustProxy);
  app.get('/', rateLimit(options) as RequestHandler, (_req, res) => {
    res.send('ok');
  });
  app.use((error: Error & { code?: string }, _req: Request, res: Response, _next: NextFunction) => {
    res.status(500).send(error.code);
  });
  return app;
}

/** The statuses of one request per header value, in order (each value one request). */
async function statuses(app: express.Express, name: string, values: (string | undefined)[]): Promise<(number | string)[]> {
  const answers: (number | string)[] = [];
  for (const value of values) {
    const res = value === undefined ? await request(app).get('/') : await request(app).get('/').set(name, value);
    answers.push(res.status === 500 ? res.text : res.status);
  }
  return answers;
}

const once = { limit: 1, windowMs: 60_000 };
let warnings: ReturnType<typeof captureWarnings>;
beforeEach(() => {
  warnings = captureWarnings();
});
afterEach(() => warnings.stop());

describe('X-Forwarded-For entries with a port', () => {
  it("keyBy.ip() keys 203.0.113.7:80 and [2001:db8::1]:80 by their address behind app.set('trust proxy', 1), never a 500", async () => {
    const app = appWith(once, 1);
    expect(await statuses(app, 'x-forwarded-for', ['203.0.113.7:80', '203.0.113.7:8080', '203.0.113.8'])).toEqual([200, 429, 200]);
    expect(
      await statuses(app, 'x-forwarded-for', ['[2001:db8:1234:5601::1]:443', '2001:db8:1234:56ff::9', '[::ffff:198.51.100.9]:80', '198.51.100.9']),
    ).toEqual([200, 429, 200, 429]);
    expect(await warnings.codes()).toEqual([]);
  });

  it('keyBy.forwardedFor() reads the address of an entry with a port, instead of keying every client by the proxy', async () => {
    const app = appWith({ ...once, key: keyBy.forwardedFor({ hops: 1 }) });
    expect(await statuses(app, 'x-forwarded-for', ['198.51.100.1:4711', '198.51.100.2:4711', 'spoof, 198.51.100.1', '[2001:db8::1]:80'])).toEqual([
      200, 200, 429, 200,
    ]);
    expect(await warnings.codes()).toEqual([]);
  });

  it('does not split a bare IPv6 address at its last group', async () => {
    const app = appWith({ ...once, key: keyBy.forwardedFor({ ipv6Subnet: false }) });
    expect(await statuses(app, 'x-forwarded-for', ['2001:db8::1:80', '2001:db8::1:81', '2001:db8::1', '2001:db8::1:80'])).toEqual([200, 200, 200, 429]);
  });

  it('keys an entry that is no address by the connection and warns once, naming the extractor and the entry', async () => {
    const app = appWith({ limit: 2, windowMs: 60_000, key: keyBy.forwardedFor({ hops: 1 }) });
    expect(await statuses(app, 'x-forwarded-for', ['198.51.100.1, unknown', 'garbage', '1.2.3.4:99999'])).toEqual([200, 200, 429]);
    const taken = await warnings.taken();
    expect(taken.map((w) => w.code)).toEqual(['WRN_FG_FORWARDED_ADDRESS']);
    expect(taken[0]?.message).toMatch(/^keyBy\.forwardedFor\(\) found no IP address in X-Forwarded-For \("unknown"\).*hops/);

    const quiet = appWith({ limit: 2, windowMs: 60_000, key: keyBy.forwardedFor(), validate: { forwardedAddress: false } });
    expect(await statuses(quiet, 'x-forwarded-for', ['unknown'])).toEqual([200]);
    expect(await warnings.codes()).toEqual([]);
  });

  it("keyBy.ip(): an address Express took from X-Forwarded-For that is none gives the connection's address and one warning, not a 500", async () => {
    const app = appWith({ limit: 2, windowMs: 60_000 }, 1);
    expect(await statuses(app, 'x-forwarded-for', ['unknown', '_hidden', 'garbage'])).toEqual([200, 200, 429]);
    const taken = await warnings.taken();
    expect(taken.map((w) => w.code)).toEqual(['WRN_FG_FORWARDED_ADDRESS']);
    expect(taken[0]?.message).toContain('keyBy.ip() found no IP address in the framework\'s client address ("unknown")');
  });
});

describe('platform presets', () => {
  it('keyBy.cloudflare() keys by cf-connecting-ip, and a request without it is ERR_FG_KEY (500)', async () => {
    const app = appWith({ ...once, key: keyBy.cloudflare() });
    expect(await statuses(app, 'cf-connecting-ip', ['::ffff:203.0.113.7', '203.0.113.7', '2001:db8:1234:5601::1', '2001:db8:1234:56ff::9'])).toEqual([
      200, 429, 200, 429,
    ]);
    expect(await statuses(app, 'cf-connecting-ip', [undefined, 'not-an-ip'])).toEqual(['ERR_FG_KEY', 'ERR_FG_KEY']);
    expect(await statuses(app, 'x-forwarded-for', ['198.51.100.1'])).toEqual(['ERR_FG_KEY']); // no fallback to another header
  });

  it('keyBy.fly() keys by fly-client-ip, with the ipv6Subnet asked for', async () => {
    const app = appWith({ ...once, key: keyBy.fly({ ipv6Subnet: 64 }) });
    expect(await statuses(app, 'fly-client-ip', ['2001:db8:0:1::1', '2001:db8:0:2::1', '2001:db8:0:1::2', undefined])).toEqual([200, 200, 429, 'ERR_FG_KEY']);
  });

  it('keyBy.vercel() keys by x-vercel-forwarded-for, else x-real-ip, never X-Forwarded-For', async () => {
    const app = appWith({ ...once, key: keyBy.vercel() });
    const at = async (headers: Record<string, string>) => {
      const res = await request(app).get('/').set(headers);
      return res.status === 500 ? res.text : res.status;
    };
    expect(await at({ 'x-vercel-forwarded-for': '198.51.100.1', 'x-real-ip': '198.51.100.99' })).toBe(200);
    expect(await at({ 'x-real-ip': '198.51.100.1' })).toBe(429);
    expect(await at({ 'x-vercel-forwarded-for': '198.51.100.2', 'x-forwarded-for': '198.51.100.1' })).toBe(200);
    expect(await at({ 'x-forwarded-for': '198.51.100.3' })).toBe('ERR_FG_KEY');
  });

  it('keyBy.cloudfront() keys by CloudFront-Viewer-Address without its port, IPv6 with or without brackets', async () => {
    const app = appWith({ ...once, key: keyBy.cloudfront() });
    expect(
      await statuses(app, 'cloudfront-viewer-address', [
        '198.51.100.10:46532',
        '198.51.100.10:1234',
        '2001:db8:1234:5601::1:46532',
        '[2001:db8:1234:56ff::9]:443',
        '2001:db8:1234:5700::1:443',
        undefined,
        '198.51.100.10',
      ]),
    ).toEqual([200, 429, 200, 429, 200, 'ERR_FG_KEY', 429]);
  });

  it('keyBy.forwarded() reads RFC 7239 for= values: quoted IPv6 with a port, hops from the right, the socket without a header', async () => {
    const app = appWith({ ...once, key: keyBy.forwarded({ hops: 2 }) });
    expect(
      await statuses(app, 'forwarded', [
        'for=spoof, for=198.51.100.1;proto=https;by=10.0.0.1, for=10.0.0.2',
        'For="198.51.100.1:4711", for=10.0.0.3',
        'for="[2001:db8:cafe::17]:4711";proto=http, for=10.0.0.2',
        'for="[2001:db8:cafe::18]", for=10.0.0.2',
        'for=10.0.0.2',
        undefined,
      ]),
    ).toEqual([200, 429, 200, 429, 200, 429]);
    expect(await warnings.codes()).toEqual([]);
  });

  it("keyBy.forwarded(): for=unknown and obfuscated identifiers give the connection's address and one warning", async () => {
    const app = appWith({ limit: 2, windowMs: 60_000, key: keyBy.forwarded() });
    expect(await statuses(app, 'forwarded', ['for=unknown', 'for=_hidden;proto=https', 'proto=https'])).toEqual([200, 200, 429]);
    const taken = await warnings.taken();
    expect(taken.map((w) => w.code)).toEqual(['WRN_FG_FORWARDED_ADDRESS']);
    expect(taken[0]?.message).toContain('keyBy.forwarded() found no IP address in Forwarded ("unknown")');
  });
});

describe('warnings about the setup: once per limiter, each naming the fix', () => {
  const xff = (app: express.Express, values: string[]) => statuses(app, 'x-forwarded-for', values);

  it("warns once that X-Forwarded-For arrives while Express trusts no proxy, naming app.set('trust proxy', 1)", async () => {
    const app = appWith({ limit: 100, windowMs: 60_000 });
    expect(await xff(app, ['198.51.100.1', '198.51.100.2', '198.51.100.3'])).toEqual([200, 200, 200]);
    const taken = await warnings.taken();
    expect(taken.map((w) => w.code)).toEqual(['WRN_FG_X_FORWARDED_FOR']);
    expect(taken[0]?.message).toContain("but Express trusts no proxy (app.set('trust proxy') is false)");
    expect(taken[0]?.message).toContain("app.set('trust proxy', 1) for one");
  });

  it("warns once that app.set('trust proxy', true) lets a client pick its own key", async () => {
    const app = appWith({ limit: 100, windowMs: 60_000 }, true);
    expect(await xff(app, ['198.51.100.1', '198.51.100.2'])).toEqual([200, 200]);
    const taken = await warnings.taken();
    expect(taken.map((w) => w.code)).toEqual(['WRN_FG_TRUST_PROXY']);
    expect(taken[0]?.message).toMatch(/^Express trusts every proxy \(app\.set\('trust proxy', true\)\): .*a client picks its own key/);
  });

  it('says nothing about a correct setup: a trusted proxy, or no proxy and no X-Forwarded-For', async () => {
    expect(await xff(appWith({ limit: 100, windowMs: 60_000 }, 1), ['spoof, 198.51.100.1', '198.51.100.2:4711', '[2001:db8::1]:80'])).toEqual([200, 200, 200]);
    expect(await xff(appWith({ limit: 100, windowMs: 60_000 }, 'loopback'), ['198.51.100.1'])).toEqual([200]);
    expect(await statuses(appWith({ limit: 100, windowMs: 60_000 }), 'x-user-id', [undefined, undefined])).toEqual([200, 200]);
    expect(await xff(appWith({ limit: 100, windowMs: 60_000, key: keyBy.forwardedFor() }), ['198.51.100.1'])).toEqual([200]);
    expect(await warnings.codes()).toEqual([]);
  });

  it('is silenced by validate: false, or check by check', async () => {
    expect(await xff(appWith({ limit: 100, windowMs: 60_000, validate: false }), ['198.51.100.1'])).toEqual([200]);
    expect(await xff(appWith({ limit: 100, windowMs: 60_000, validate: false }, true), ['198.51.100.1'])).toEqual([200]);
    expect(await xff(appWith({ limit: 100, windowMs: 60_000, validate: { xForwardedFor: false } }), ['198.51.100.1'])).toEqual([200]);
    expect(await xff(appWith({ limit: 100, windowMs: 60_000, validate: { trustProxy: false } }, true), ['198.51.100.1'])).toEqual([200]);
    expect(await warnings.codes()).toEqual([]);
  });

  it('rejects a check it does not know, at construction', () => {
    expect(() => rateLimit({ limit: 1, windowMs: 1000, validate: { xforwardedfor: false } as never })).toThrow(
      expect.objectContaining({
        code: 'ERR_FG_UNKNOWN_OPTION',
        message: expect.stringContaining('Known checks: xForwardedFor, trustProxy, singleKey, forwardedAddress'),
      }),
    );
  });

  it('warns once when one key makes most of 1000 requests, and not when the key tells clients apart', async () => {
    const burst = async (options: ExpressRateLimitOptions, headers: (i: number) => Record<string, string>) => {
      const running = await serveHttp(appWith(options));
      try {
        for (let i = 0; i < 1000; i += 100) {
          const batch = Array.from({ length: 100 }, (_, j) => fetch(running.url, { headers: headers(i + j) }).then((res) => res.arrayBuffer()));
          await Promise.all(batch);
        }
      } finally {
        await running.close();
      }
    };
    await burst({ limit: 10_000, windowMs: 60_000, key: keyBy.header('x-user-id') }, () => ({}));
    const taken = await warnings.taken();
    expect(taken.map((w) => w.code)).toEqual(['WRN_FG_SINGLE_KEY']);
    expect(taken[0]?.message).toContain('One key, "127.0.0.1", made most of the last 1000 requests');
    await burst({ limit: 10_000, windowMs: 60_000, key: keyBy.header('x-user-id') }, (i) => ({ 'x-user-id': `user-${i % 40}` }));
    expect(await warnings.codes()).toEqual([]);
  }, 20_000);
});
