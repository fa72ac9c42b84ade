// @rateLimited from @floodgate/core on NestJS providers and controllers: this
// package compiles with experimentalDecorators, as Nest apps do (legacy decorators).
import 'reflect-metadata';
import { createLimiter, RateLimitedError, rateLimited } from '@floodgate/core';
import { type ArgumentsHost, Catch, Controller, type ExceptionFilter, Get, Inject, Injectable, Module, Param } from '@nestjs/common';
import { ExpressAdapter, type NestExpressApplication } from '@nestjs/platform-express';
import { Test } from '@nestjs/testing';
import { describe, expect, it } from 'vitest';

@Injectable()
class Clock {
  readonly now = () => 1_700_000_000_000;
}

@Injectable()
class OrderService {
  readonly placed: string[] = [];

  constructor(@Inject(Clock) private readonly clock: Clock) {}

  @rateLimited({
    rules: [
      { name: 'all', scope: 'global', algorithm: 'fixed-window', limit: 3, windowMs: 60_000 },
      { name: 'per-user', scope: 'user', algorithm: 'fixed-window', limit: 2, windowMs: 60_000 },
    ],
    key: (user: string) => ({ user }),
  })
  async place(user: string, item: string): Promise<string> {
    this.placed.push(`${user}:${item}`);
    return `${item} for ${user} at ${this.clock.now()}`;
  }
}

const paced = createLimiter({ algorithm: 'gcra', limit: 20, windowMs: 1_000, burst: 1 }); // one every 50 ms

@Injectable()
class Mailer {
  @rateLimited(paced, { key: () => 'smtp', wait: { maxWaitMs: 5_000 } })
  async send(to: string): Promise<string> {
    return to;
  }
}

/** A denial from a provider becomes a 429 with Retry-After (without a filter Nest answers 500: the error is not an HttpException). */
@Catch(RateLimitedError)
class RateLimitedFilter implements ExceptionFilter {
  catch(error: RateLimitedError, host: ArgumentsHost) {
    const response = host.switchToHttp().getResponse();
    response
      .status(429)
      .set('Retry-After', String(Math.max(1, Math.ceil(error.retryAfterMs / 1000))))
      .json({ rule: error.decision.rule });
  }
}

@Controller()
class GreetingController {
  // Listed above @Get: Get's route metadata, written on the method first, is carried over to the limited method.
  @rateLimited({ algorithm: 'fixed-window', limit: 1, windowMs: 60_000, key: (name: string) => name })
  @Get('hello/:name')
  async hello(@Param('name') name: string) {
    return { hello: name };
  }
}

describe('@rateLimited on NestJS (experimentalDecorators)', () => {
  it('limits a provider method; DI, `this` and the arguments reach it unchanged; a denial rejects with RateLimitedError', async () => {
    @Module({ providers: [Clock, OrderService] })
    class OrdersModule {}
    const moduleRef = await Test.createTestingModule({ imports: [OrdersModule] }).compile();
    const orders = moduleRef.get(OrderService);
    expect(await orders.place('u1', 'tea')).toBe('tea for u1 at 1700000000000');
    await orders.place('u1', 'milk');
    const denied = await orders.place('u1', 'sugar').catch((error: unknown) => error);
    expect(denied).toBeInstanceOf(RateLimitedError);
    expect(denied).toMatchObject({ code: 'ERR_FG_RATE_LIMITED', decision: { rule: 'per-user' } });
    expect(String(denied)).toMatch(/Rate limited by rule 'per-user' \(scope 'user'\): retry in \d+ ms/);
    await orders.place('u2', 'tea'); // the third for everyone
    await expect(orders.place('u3', 'tea')).rejects.toMatchObject({ decision: { rule: 'all' } });
    expect(orders.placed).toEqual(['u1:tea', 'u1:milk', 'u2:tea']);
    await moduleRef.close();
  });

  it('waits instead of refusing with { wait: { maxWaitMs } }', async () => {
    const moduleRef = await Test.createTestingModule({ providers: [Mailer] }).compile();
    const mailer = moduleRef.get(Mailer);
    const started = performance.now();
    expect(await Promise.all(['a', 'b', 'c'].map((to) => mailer.send(to)))).toEqual(['a', 'b', 'c']);
    expect(performance.now() - started).toBeGreaterThanOrEqual(2 * 50 - 2);
    await moduleRef.close();
  });

  it('keeps the route of a controller method when @rateLimited is listed above @Get', async () => {
    const moduleRef = await Test.createTestingModule({ controllers: [GreetingController] }).compile();
    const app = moduleRef.createNestApplication<NestExpressApplication>(new ExpressAdapter(), { logger: false });
    app.useGlobalFilters(new RateLimitedFilter());
    await app.listen(0, '127.0.0.1');
    const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
    try {
      const first = await fetch(`${url}/hello/ada`);
      expect(first.status).toBe(200);
      expect(await first.json()).toEqual({ hello: 'ada' });
      const second = await fetch(`${url}/hello/ada`);
      expect(second.status).toBe(429);
      expect(Number(second.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    } finally {
      app.getHttpServer().closeAllConnections();
      await app.close();
    }
  });
});
