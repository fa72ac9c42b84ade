import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { ExpressAdapter, type NestExpressApplication } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { AppModule } from './app.module.js';

// PLATFORM=fastify runs the same app on Fastify. BEHIND_PROXY=1 trusts X-Forwarded-For from a proxy
// on this host, so that request.ip (Floodgate's default key) is the client's address.
const behindProxy = process.env.BEHIND_PROXY === '1';
const app =
  process.env.PLATFORM === 'fastify'
    ? await NestFactory.create(AppModule, new FastifyAdapter({ trustProxy: behindProxy ? 'loopback' : false }), { logger: ['error'] })
    : await NestFactory.create<NestExpressApplication>(AppModule, new ExpressAdapter(), { logger: ['error'] });
if (behindProxy && process.env.PLATFORM !== 'fastify') (app as NestExpressApplication).set('trust proxy', 'loopback');

await app.listen(Number(process.env.PORT ?? 3000), '127.0.0.1');
console.log(`listening on ${(await app.getUrl()).replace('[::1]', 'localhost')} (${process.env.PLATFORM === 'fastify' ? 'Fastify' : 'Express'})`);
