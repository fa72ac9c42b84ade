// @ts-check
// Floodgate on Fastify. Run from the repository root: pnpm example fastify-basic

import { keyBy, rateLimit } from '@floodgate/fastify';
import Fastify from 'fastify';

// Behind a proxy on this host? Then request.ip (and Floodgate's default key) comes from X-Forwarded-For.
const app = Fastify({ trustProxy: process.env.BEHIND_PROXY === '1' ? '127.0.0.1' : false });

// Every route of the app (and its not-found answers): 100 requests a minute per client IP,
// with both the X-RateLimit-* and the IETF draft-8 RateLimit-* headers.
// Awaited, so that it is loaded before the routes below are declared.
await app.register(rateLimit, { limit: 100, windowMs: 60_000, headers: 'both' });

// One route with a budget of its own on top of the plugin's: 5 requests per 10 s (windowMs replaced,
// headers inherited), and each of them counts in the 100 a minute too.
app.get('/api/hello', { config: { rateLimit: { limit: 5, windowMs: 10_000 } } }, async (request) => ({
  hello: 'world',
  remaining: request.rateLimit?.remaining,
}));

// Logins, on top of the 100 a minute: 10 failed attempts a minute per client IP and 3 per account.
// Keyed by the address and the account being tried, never by anything the client makes up before
// it has logged in: neither a new name nor a new address buys more guesses at one password. The key
// reads the body, so the limit runs in preHandler (after parsing and validation); successful logins
// are given back.
app.post(
  '/login',
  {
    schema: {
      body: { type: 'object', required: ['account', 'password'], properties: { account: { type: 'string', minLength: 1 }, password: { type: 'string' } } },
    },
    config: {
      rateLimit: {
        hook: 'preHandler',
        rules: [
          { name: 'login-ip', scope: 'ip', algorithm: 'sliding-log', limit: 10, windowMs: 60_000 },
          { name: 'login-account', scope: 'account', algorithm: 'sliding-log', limit: 3, windowMs: 60_000 },
        ],
        key: { ip: keyBy.ip(), account: (request) => /** @type {{ account: string }} */ (request.body).account.toLowerCase() },
        skipSuccessfulRequests: true,
        message: { error: 'too many failed logins, try again later' },
      },
    },
  },
  async (request, reply) => {
    const { password } = /** @type {{ password: string }} */ (request.body);
    if (password === 'correct horse battery staple') return { ok: true };
    return reply.code(401).send({ ok: false });
  },
);

// Not limited at all: load balancers poll it.
app.get('/health', { config: { rateLimit: false } }, async () => 'ok');

const url = await app.listen({ port: Number(process.env.PORT ?? 3000), host: '127.0.0.1' });
console.log(`listening on ${url}`);
