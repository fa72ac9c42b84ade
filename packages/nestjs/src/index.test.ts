import 'reflect-metadata';
import { createLimiter, type Decision } from '@floodgate/core';
import { type AdapterUnderTest, adapterContract, held, type Route, type Running } from '@floodgate/test-support';
import {
  Controller,
  type ExecutionContext,
  Get,
  HttpException,
  type INestApplication,
  type ModuleMetadata,
  Post,
  Query,
  Req,
  Res,
  type Type,
} from '@nestjs/common';
import { ExpressAdapter, type NestExpressApplication } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { FloodgateModule, keyBy, type NestRequest, RateLimit } from './index.js';

export type Platform = 'express' | 'fastify';

/** Builds `metadata` into a Nest app on `platform`, listening on a free loopback port. */
export async function startNest(
  platform: Platform,
  metadata: ModuleMetadata,
  settings: { trustProxy?: boolean } = {},
): Promise<Running & { app: INestApplication }> {
  const moduleRef = await Test.createTestingModule(metadata).compile();
  const app =
    platform === 'express'
      ? moduleRef.createNestApplication<NestExpressApplication>(new ExpressAdapter(), { logger: false })
      : moduleRef.createNestApplication(new FastifyAdapter({ trustProxy: settings.trustProxy ?? false }), { logger: false });
  if (platform === 'express' && settings.trustProxy) (app as NestExpressApplication).set('trust proxy', true);
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
  if (Array.isArray(route.options)) throw new Error('one @RateLimit() per route: a Nest route has one set of rate-limit options');
  const Method = route.method === 'POST' ? Post : Get;
  @Controller()
  class RouteController {
    @RateLimit(route.options)
    @Method(route.path)
    async answer(@Req() request: NestRequest, @Res({ passthrough: true }) response: { status(code: number): unknown }, @Query() query: Record<string, string>) {
      if (query.throw) throw new Error('the route failed');
      if (query.hang) return new Promise(() => {});
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
    start: (routes, settings) => startNest(platform, { imports: [FloodgateModule.forRoot()], controllers: routes.map(routeController) }, settings),
  };
}

adapterContract(nestUnderTest('express'));
adapterContract(nestUnderTest('fastify'));
