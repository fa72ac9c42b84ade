import 'reflect-metadata';
import { createLimiter, type Decision, RedisStore } from '@floodgate/core';
import { type AdapterUnderTest, adapterContract, captureWarnings, held, type Route, type Running, useRedisServer } from '@floodgate/test-support';
import {
  type ArgumentsHost,
  type CanActivate,
  Catch,
  Controller,
  type ExceptionFilter,
  type ExecutionContext,
  Get,
  HttpException,
  type INestApplication,
  Injectable,
  Module,
  type ModuleMetadata,
  Post,
  Query,
  Req,
  Res,
  type Type,
  UnauthorizedException,
  UseFilters,
  UseGuards,
} from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { ExpressAdapter, type NestExpressApplication } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import type { Redis } from 'ioredis';
import { Observable } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { FloodgateModule, keyBy, type NestRateLimitOptions, type NestRequest, RateLimit, RateLimitedException, SkipRateLimit } from './index.js';

type Platform = 'express' | 'fastify';

/** Builds `metadata` into a Nest app on `platform`, listening on a free loopback port. */
async function startNest(
  platform: Platform,
  metadata: ModuleMetadata,
  settings: { trustProxy?: boolean | 'every proxy' } = {},
  setup: (app: INestApplication) => void = () => {},
): Promise<Running & { app: INestApplication }> {
  const moduleRef = await Test.createTestingModule(metadata).compile();
  const app =
    platform === 'express'
      ? moduleRef.createNestApplication<NestExpressApplication>(new ExpressAdapter(), { logger: false })
      : moduleRef.createNestApplication(
          new FastifyAdapter({ trustProxy: settings.trustProxy === 'every proxy' ? true : settings.trustProxy ? 'loopback' : false }),
          { logger: false },
        );
  if (platform === 'express' && settings.trustProxy)
    (app as NestExpressApplication).set('trust proxy', settings.trustProxy === 'every proxy' ? true : 'loopback');
  setup(app);
  await app.listen(0, '127.0.0.1');
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  return {
    app,
    url,
    close: async () => {
      app.getHttpServer().closeAllConnections();
      await app.close();
    },
  };
}

/** One controller per contract route: its options on @RateLimit, the contract's query parameters in its handler. */
function routeController(route: Route): Type {
  // Several option sets stack limiters on the route, in order: @RateLimit([a, b]).
  const options: NestRateLimitOptions | NestRateLimitOptions[] = route.options;
  const Method = route.method === 'POST' ? Post : Get;
  @Controller()
  class RouteController {
    @RateLimit(options)
    @Method(route.path)
    async answer(
      @Req() request: NestRequest,
      @Res({ passthrough: true }) response: { status(code: number): unknown; header(name: string, value: string): unknown },
      @Query() query: Record<string, string>,
    ) {
      if (query.throw) throw new Error('the route failed');
      if (query.hang) return new Promise(() => {});
      if (query.used) response.header('x-used', query.used); // Express's res and Fastify's reply both have header()
      if (query.hold) await held(query.hold);
      else if (query.wait) await new Promise((resolve) => setTimeout(resolve, Number(query.wait)));
      response.status(Number(query.status ?? 200));
      return request.rateLimit ?? { skipped: true };
    }
  }
  return RouteController;
}

function nestUnderTest(platform: Platform): AdapterUnderTest {
  return {
    name: `NestJS on ${platform}`,
    rateLimit: (options) => FloodgateModule.forRoot(options),
    keyBy,
    createLimiter,
    header: ([request], name) => (request as NestRequest).headers[name] as string | undefined,
    teapot: (_request: NestRequest, context: ExecutionContext, decision: Decision) => {
      const retryAfter = context.switchToHttp().getResponse().getHeader('retry-after');
      return new HttpException({ rule: decision.rule, retryAfter }, 418);
    },
    seesAbandonedRequests: true,
    reported: ([, context]) => (context as ExecutionContext).switchToHttp().getResponse().getHeader('x-used') ?? undefined,
    start: (routes, settings) => startNest(platform, { imports: [FloodgateModule.forRoot()], controllers: routes.map(routeController) }, settings),
  };
}

adapterContract(nestUnderTest('express'));
adapterContract(nestUnderTest('fastify'));

// ---------------------------------------------------------------------------------------------
// What is particular to Nest: module options, decorators, exception filters, the request pipeline.

const redisServer = useRedisServer();
const REDIS = Symbol('REDIS');
const frozen = () => Date.UTC(2026, 0, 1);

async function waitFor(condition: () => Promise<boolean>, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** GETs `path` and reads what the tests look at. */
async function get(running: Running, path: string, headers: Record<string, string> = {}) {
  const res = await fetch(running.url + path, { headers });
  const text = await res.text();
  return {
    status: res.status,
    text,
    limit: res.headers.get('x-ratelimit-limit'),
    remaining: res.headers.get('x-ratelimit-remaining'),
    policy: res.headers.get('ratelimit-policy'),
    retryAfter: res.headers.get('retry-after'),
  };
}

const shared = createLimiter({ algorithm: 'fixed-window', limit: 7, windowMs: 60_000, now: frozen });

@Controller('plain')
class PlainController {
  @Get()
  plain() {
    return 'ok';
  }
}

const tier: { limit?: number; headers?: 'legacy' } = {};

@Controller('cats')
@RateLimit({ limit: 3 })
class CatsController {
  @Get()
  list() {
    return 'cats';
  }

  @Get('expensive')
  @RateLimit({ cost: 2 })
  expensive() {
    return 'expensive';
  }

  @Get('strict')
  @RateLimit({ limit: 1 })
  strict() {
    return 'strict';
  }

  @Get('shared')
  @RateLimit({ limiter: shared })
  shared() {
    return 'shared';
  }

  @Get('rules')
  @RateLimit({ rules: [{ name: 'per-second', limit: 1, windowMs: 1000 }] })
  rules() {
    return 'rules';
  }

  // Options built from an optional tier: undefined is not given, so the controller's limiter and the module's headers stay.
  @Get('tier')
  @RateLimit({ limit: tier.limit, headers: tier.headers })
  tier() {
    return 'tier';
  }

  @Get('free')
  @SkipRateLimit()
  free() {
    return 'free';
  }
}

@Controller('internal')
@SkipRateLimit()
class InternalController {
  @Get()
  skipped() {
    return 'skipped';
  }

  @Get('again')
  @RateLimit()
  again() {
    return 'again';
  }

  @Get('own')
  @RateLimit({ limit: 1 })
  own() {
    return 'own';
  }
}

@Catch(RateLimitedException)
class TooManyFilter implements ExceptionFilter {
  catch(exception: RateLimitedException, host: ArgumentsHost) {
    host
      .switchToHttp()
      .getResponse()
      .status(exception.getStatus())
      .send({ error: 'slow down', retryInMs: exception.decision.retryAfterMs, message: exception.getResponse() });
  }
}

@Catch(HttpException)
class EveryHttpErrorFilter implements ExceptionFilter {
  catch(exception: HttpException, host: ArgumentsHost) {
    host.switchToHttp().getResponse().status(exception.getStatus()).send({ caughtBy: 'EveryHttpErrorFilter', exception: exception.constructor.name });
  }
}

@Controller('filtered')
@UseFilters(TooManyFilter)
@RateLimit({ limit: 1, message: { error: 'rate_limited' } })
class FilteredController {
  @Get()
  filtered() {
    return 'filtered';
  }
}

@Injectable()
class NeedsTokenGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    if (context.switchToHttp().getRequest<NestRequest>().headers['x-token'] === 'secret') return true;
    throw new UnauthorizedException();
  }
}

const inFlight = createLimiter({ algorithm: 'concurrency', limit: 1, windowMs: 60_000 });
let tornDown = 0;

@Controller('in-flight')
@RateLimit({ limiter: inFlight, key: () => 'k' })
class InFlightController {
  @Get('guarded')
  @UseGuards(NeedsTokenGuard)
  guarded() {
    return 'guarded';
  }

  @Get('stream')
  stream() {
    // Never emits: the request is in flight until Nest tears the Observable down.
    return new Observable(() => () => {
      tornDown++;
    });
  }
}

@Controller('account')
@RateLimit({ limit: 3 })
class AccountController {
  @Get()
  view() {
    return 'account';
  }

  @Get('export')
  @RateLimit({ cost: 2 })
  export() {
    return 'export';
  }

  @Post('password')
  @RateLimit({ limit: 1, key: () => 'password' })
  password() {
    return 'changed';
  }

  @Get('apart')
  @RateLimit({ limit: 10, stack: false })
  apart() {
    return 'apart';
  }
}

/** The README's login: per client IP and per account name from the body; `handler` answers a denial. */
@Controller('auth')
class LoginController {
  @Post('login')
  @RateLimit({
    rules: [
      { name: 'login-ip', scope: 'ip', algorithm: 'sliding-log', limit: 20, windowMs: 15 * 60_000 },
      { name: 'login-account', scope: 'account', algorithm: 'sliding-log', limit: 5, windowMs: 15 * 60_000 },
    ],
    key: { ip: keyBy.ip(), account: (request) => String(request.body?.account ?? '').toLowerCase() || '-' },
    skipSuccessfulRequests: true,
    handler: (_request, _context, decision) => new HttpException({ retryInMs: decision.retryAfterMs }, 429),
  })
  login(@Req() request: NestRequest) {
    if (request.body?.password !== 'right') throw new UnauthorizedException();
    return { ok: true };
  }
}

describe.each<Platform>(['express', 'fastify'])('NestJS on %s', (platform) => {
  const root = { algorithm: 'fixed-window' as const, limit: 5, windowMs: 60_000, now: frozen, headers: 'both' as const };

  it('merges options handler over controller over module; a level without limiter options shares the limiter above; stack: false, limits replace those above', async () => {
    const running = await startNest(platform, {
      imports: [FloodgateModule.forRoot({ ...root, stack: false })],
      controllers: [PlainController, CatsController, InternalController],
    });
    await shared.reset('127.0.0.1');
    try {
      // Module options on a route without decorators, headers included.
      expect(await get(running, '/plain')).toMatchObject({ status: 200, limit: '5', remaining: '4', policy: '"default";q=5;w=60' });
      // Controller: its own limit, the module's window, algorithm and headers.
      expect(await get(running, '/cats')).toMatchObject({ status: 200, limit: '3', remaining: '2', policy: '"default";q=3;w=60' });
      // Handler with only `cost`: the controller's limiter, same counts.
      expect(await get(running, '/cats/expensive')).toMatchObject({ status: 200, limit: '3', remaining: '0' });
      expect((await get(running, '/cats')).status).toBe(429);
      // Handler with its own limit: its own limiter.
      expect(await get(running, '/cats/strict')).toMatchObject({ status: 200, limit: '1', policy: '"default";q=1;w=60' });
      expect((await get(running, '/cats/strict')).status).toBe(429);
      // `limiter` replaces the rule options above; `rules` replaces the shorthand above.
      expect(await get(running, '/cats/shared')).toMatchObject({ status: 200, limit: '7', remaining: '6' });
      expect(await get(running, '/cats/rules')).toMatchObject({ status: 200, policy: '"per-second";q=1;w=1' });
      // Options set to undefined: the controller's limiter (spent above) and the module's headers.
      expect(await get(running, '/cats/tier')).toMatchObject({ status: 429, limit: '3', policy: '"default";q=3;w=60' });
    } finally {
      await running.close();
    }
  });

  it("spends the module's budget on a handler with limits of its own too: 300 guesses from one IP under new x-user-ids reach the login handler 100 times (issue #29.5)", async () => {
    const perIp = createLimiter({ algorithm: 'fixed-window', limit: 100, windowMs: 60_000, now: frozen });
    let guesses = 0;
    @Controller('auth')
    class AuthController {
      // The login of issue #29.5: keyed by a header the client picks before it has logged in.
      @Post('login')
      @RateLimit({ algorithm: 'fixed-window', limit: 5, windowMs: 60_000, now: frozen, key: keyBy.header('x-user-id') })
      login() {
        guesses++;
        throw new UnauthorizedException();
      }
    }
    const running = await startNest(platform, { imports: [FloodgateModule.forRoot({ limiter: perIp })], controllers: [AuthController] });
    try {
      const answers: number[] = [];
      for (let i = 0; i < 300; i++) {
        const res = await fetch(`${running.url}/auth/login`, { method: 'POST', headers: { 'x-user-id': `guess-${i}` } });
        await res.arrayBuffer();
        answers.push(res.status);
      }
      expect(guesses).toBe(100);
      expect(answers).toEqual([...Array(100).fill(401), ...Array(200).fill(429)]);
      expect((await perIp.peek('127.0.0.1')).remaining).toBe(0);
    } finally {
      await running.close();
    }
  });

  it("adds each level's own limits to those above: the module's, the controller's and the handler's must all pass; stack: false replaces them", async () => {
    const running = await startNest(platform, { imports: [FloodgateModule.forRoot(root)], controllers: [PlainController, AccountController] });
    const post = async (path: string) => {
      const res = await fetch(running.url + path, { method: 'POST' });
      return { status: res.status, policy: res.headers.get('ratelimit-policy'), text: await res.text() };
    };
    try {
      // Handler, controller and module: three limiters, in that order in the headers.
      expect(await post('/account/password')).toMatchObject({ status: 201, policy: '"default";q=5;w=60, "2:default";q=3;w=60, "3:default";q=1;w=60' });
      // The handler's limit denies; the module's and the controller's have each taken a unit.
      expect((await post('/account/password')).status).toBe(429);
      expect(await get(running, '/account')).toMatchObject({ status: 200, limit: '3', remaining: '0', policy: '"default";q=5;w=60, "2:default";q=3;w=60' });
      // A handler with only `cost` spends the controller's budget (and the module's): none left.
      expect((await get(running, '/account/export')).status).toBe(429);
      expect(await get(running, '/plain')).toMatchObject({ status: 200, limit: '5', remaining: '0' });
      expect((await get(running, '/plain')).status).toBe(429);
      // stack: false: the handler's own limit alone.
      expect(await get(running, '/account/apart')).toMatchObject({ status: 200, limit: '10', remaining: '9', policy: '"default";q=10;w=60' });
    } finally {
      await running.close();
    }
  });

  it("limits the README's login per client IP and per account name from the body, over the module's limit", async () => {
    const running = await startNest(
      platform,
      { imports: [FloodgateModule.forRoot({ ...root, limit: 100 })], controllers: [LoginController] },
      { trustProxy: true },
    );
    const login = async (ip: string, account: string, password = 'wrong') => {
      const res = await fetch(`${running.url}/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': ip },
        body: JSON.stringify({ account, password }),
      });
      await res.arrayBuffer();
      return res.status;
    };
    try {
      const answers: number[] = [];
      for (let i = 0; i < 25; i++) answers.push(await login('198.51.100.1', `guess-${i}`)); // new names, one address
      expect(answers).toEqual([...Array(20).fill(401), ...Array(5).fill(429)]);
      answers.length = 0;
      for (let i = 0; i < 10; i++) answers.push(await login(`203.0.113.${i + 1}`, i % 2 ? 'ADA' : 'ada')); // one account, new addresses
      expect(answers).toEqual([...Array(5).fill(401), ...Array(5).fill(429)]);
      expect(await login('192.0.2.1', 'grace', 'right')).toBe(201);
    } finally {
      await running.close();
    }
  });

  it('@SkipRateLimit() exempts a controller or a route; a route of a skipped controller with @RateLimit() is limited again', async () => {
    const running = await startNest(platform, { imports: [FloodgateModule.forRoot(root)], controllers: [PlainController, CatsController, InternalController] });
    try {
      for (const path of ['/cats/free', '/internal']) {
        const answers = [];
        for (let i = 0; i < 7; i++) answers.push(await get(running, path));
        expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200, 200]);
        expect(answers.every((a) => a.limit === null && a.policy === null)).toBe(true);
      }
      expect(await get(running, '/plain')).toMatchObject({ remaining: '4' });
      // @RateLimit() without options: the module's options and the module's limiter (same counts as /plain).
      expect(await get(running, '/internal/again')).toMatchObject({ status: 200, limit: '5', remaining: '3' });
      expect(await get(running, '/internal/own')).toMatchObject({ status: 200, limit: '1' });
      expect((await get(running, '/internal/own')).status).toBe(429);
    } finally {
      await running.close();
    }
  });

  it('without limit, rules or limiter the module limits only decorated routes, with its options as defaults', async () => {
    const running = await startNest(platform, {
      imports: [FloodgateModule.forRoot({ windowMs: 60_000, headers: 'draft-8' })],
      controllers: [PlainController, CatsController],
    });
    try {
      expect(await get(running, '/plain')).toMatchObject({ status: 200, limit: null, policy: null });
      expect(await get(running, '/cats')).toMatchObject({ status: 200, limit: null, policy: '"default";q=3;w=60' });
    } finally {
      await running.close();
    }
  });

  it('hands callbacks the request and the ExecutionContext', async () => {
    const seen: string[] = [];
    const running = await startNest(platform, {
      imports: [
        FloodgateModule.forRoot({
          limit: 1,
          windowMs: 60_000,
          // One count per route and client, as @nestjs/throttler keeps them.
          key: (request, context) => `${context.getClass().name}.${context.getHandler().name}:${request.ip}`,
          skip: (request, context) => {
            seen.push(`${context.getType()} ${request.headers['x-seen'] ?? ''}`);
            return false;
          },
        }),
      ],
      controllers: [PlainController, InternalController],
    });
    try {
      expect((await get(running, '/plain', { 'x-seen': 'one' })).status).toBe(200);
      expect((await get(running, '/plain')).status).toBe(429);
      expect((await get(running, '/internal/again')).status).toBe(200);
      expect(seen).toEqual(['http one', 'http ', 'http ']);
    } finally {
      await running.close();
    }
  });

  it("forRootAsync builds the options from injected providers: a RedisStore around the app's Redis client", async () => {
    @Module({ providers: [{ provide: REDIS, useFactory: () => redisServer.client }], exports: [REDIS] })
    class RedisModule {}
    const prefix = `nest-${platform}:`;
    const running = await startNest(platform, {
      imports: [
        FloodgateModule.forRootAsync({
          imports: [RedisModule],
          inject: [REDIS],
          // stack: false: CatsController's own limit replaces the module's, and shows its own counts below.
          useFactory: async (redis: Redis) => ({
            limit: 2,
            windowMs: 60_000,
            prefix,
            store: new RedisStore({ client: redis }),
            timeoutMs: 30_000,
            stack: false,
          }),
        }),
      ],
      controllers: [PlainController, CatsController],
    });
    try {
      expect((await Promise.all([0, 1, 2].map(() => get(running, '/plain')))).map((a) => a.status).sort()).toEqual([200, 200, 429]);
      expect(await redisServer.client.keys(`*${prefix}*`)).toHaveLength(1);
      // CatsController's own limit counts on the same store in a namespace of its own: the module's 3 requests are not in it.
      expect(await get(running, '/cats')).toMatchObject({ status: 200, limit: '3', remaining: '2' });
      expect((await redisServer.client.keys(`${prefix}CatsController:*`)).length).toBe(1);
    } finally {
      await running.close();
    }
  });

  it('fails at startup, with an ERR_FG_* code, for bad options in forRootAsync or in a @RateLimit()', async () => {
    await expect(
      startNest(platform, { imports: [FloodgateModule.forRootAsync({ useFactory: () => ({ limit: 0, windowMs: 1000 }) })], controllers: [PlainController] }),
    ).rejects.toMatchObject({ code: 'ERR_FG_LIMIT' });
    @Controller('bad')
    class BadController {
      @Get()
      @RateLimit({ max: 5 } as never)
      bad() {}
    }
    class BaseController {
      @Get()
      @RateLimit({ limit: 5, windowMs: 1000, headers: 'draft-9' as never })
      inherited() {}
    }
    @Controller('sub')
    class SubController extends BaseController {}
    await expect(startNest(platform, { imports: [FloodgateModule.forRoot(root)], controllers: [BadController] })).rejects.toMatchObject({
      code: 'ERR_FG_UNKNOWN_OPTION',
    });
    await expect(startNest(platform, { imports: [FloodgateModule.forRoot(root)], controllers: [SubController] })).rejects.toMatchObject({
      code: 'ERR_FG_OPTION',
    });
    @Controller('unstacked')
    class UnstackedController {
      @Get()
      @RateLimit({ cost: 2, stack: false })
      nothingToReplaceWith() {}
    }
    await expect(startNest(platform, { imports: [FloodgateModule.forRoot(root)], controllers: [UnstackedController] })).rejects.toMatchObject({
      code: 'ERR_FG_OPTION',
      message: expect.stringContaining('UnstackedController.nothingToReplaceWith has stack: false but no limit of its own'),
    });
    expect(() => FloodgateModule.forRoot({ ...root, stack: 'no' as never })).toThrow(/stack must be true or false, got "no"/);
  });

  it('warns once about X-Forwarded-For while the platform trusts no proxy, once when it trusts every proxy, never with the loopback proxy trusted', async () => {
    const warnings = captureWarnings();
    const warned = async (trustProxy: boolean | 'every proxy', validate?: boolean) => {
      const running = await startNest(
        platform,
        { imports: [FloodgateModule.forRoot({ ...root, limit: 100, validate })], controllers: [PlainController] },
        { trustProxy },
      );
      try {
        for (const xff of ['198.51.100.1', '198.51.100.2']) expect((await get(running, '/plain', { 'x-forwarded-for': xff })).status).toBe(200);
      } finally {
        await running.close();
      }
      return warnings.taken();
    };
    try {
      const untrusted = await warned(false);
      expect(untrusted.map((w) => w.code)).toEqual(['WRN_FG_X_FORWARDED_FOR']);
      expect(untrusted[0]?.message).toContain(platform === 'express' ? 'Express trusts no proxy' : 'Fastify trusts no proxy');
      expect((await warned('every proxy')).map((w) => w.code)).toEqual(['WRN_FG_TRUST_PROXY']);
      expect(await warned(true)).toEqual([]);
      expect(await warned(false, false)).toEqual([]);
    } finally {
      warnings.stop();
    }
  });

  it('throws a RateLimitedException that your filters catch, with the rate-limit headers already set', async () => {
    const running = await startNest(platform, { imports: [FloodgateModule.forRoot(root)], controllers: [FilteredController, PlainController] });
    try {
      await get(running, '/filtered');
      const denied = await get(running, '/filtered');
      // The module's limit and the controller's, both reported; the controller's denies.
      expect(denied).toMatchObject({ status: 429, remaining: '0', retryAfter: '60', policy: '"default";q=5;w=60, "2:default";q=1;w=60' });
      expect(JSON.parse(denied.text)).toEqual({ error: 'slow down', retryInMs: 60_000, message: { error: 'rate_limited' } });
    } finally {
      await running.close();
    }
  });

  it('lets your global filters answer the denial: app.useGlobalFilters(), or APP_FILTER in a module imported after FloodgateModule', async () => {
    @Module({ providers: [{ provide: APP_FILTER, useClass: EveryHttpErrorFilter }] })
    class FiltersModule {}
    const setups: [ModuleMetadata['imports'], (app: INestApplication) => void][] = [
      [[FloodgateModule.forRoot({ ...root, limit: 1 })], (app) => app.useGlobalFilters(new EveryHttpErrorFilter())],
      [[FloodgateModule.forRoot({ ...root, limit: 1 }), FiltersModule], () => {}],
    ];
    for (const [imports, setup] of setups) {
      const running = await startNest(platform, { imports, controllers: [PlainController] }, {}, setup);
      try {
        await get(running, '/plain');
        const denied = await get(running, '/plain');
        expect(denied).toMatchObject({ status: 429, retryAfter: '60', remaining: '0' });
        expect(JSON.parse(denied.text)).toEqual({ caughtBy: 'EveryHttpErrorFilter', exception: 'RateLimitedException' });
      } finally {
        await running.close();
      }
    }
  });

  it('ends the lease when a later guard refuses the request: the handler never runs, the response ends', async () => {
    const running = await startNest(platform, { imports: [FloodgateModule.forRoot()], controllers: [InFlightController] });
    await inFlight.reset('k');
    try {
      expect((await get(running, '/in-flight/guarded')).status).toBe(401);
      await waitFor(async () => (await inFlight.peek('k')).remaining === 1);
      expect((await get(running, '/in-flight/guarded', { 'x-token': 'secret' })).status).toBe(200);
      await waitFor(async () => (await inFlight.peek('k')).remaining === 1);
    } finally {
      await running.close();
    }
  });

  it('ends the lease when Nest tears down the Observable of a client that left, though no response is sent', async () => {
    const running = await startNest(platform, { imports: [FloodgateModule.forRoot()], controllers: [InFlightController] });
    await inFlight.reset('k');
    const before = tornDown;
    try {
      const controller = new AbortController();
      const pending = fetch(`${running.url}/in-flight/stream`, { signal: controller.signal }).catch(() => 'aborted');
      await waitFor(async () => (await inFlight.peek('k')).remaining === 0);
      expect((await get(running, '/in-flight/stream')).status).toBe(429);
      controller.abort();
      expect(await pending).toBe('aborted');
      await waitFor(async () => tornDown > before && (await inFlight.peek('k')).remaining === 1);
    } finally {
      await running.close();
    }
  });
});
