// What the fragments of the root README, docs/ and packages/express/README.md
// use without declaring it: the app around them. A snippet that uses none of
// these names is a whole program (and, in JavaScript, is run).
import type * as floodgate from '@floodgate/express';
import type expressModule from 'express';
import type { Express as ExpressApp, Request, RequestHandler } from 'express';
import type { Redis } from 'ioredis';

declare global {
  const express: typeof expressModule;
  const app: ExpressApp;
  const redis: Redis;
  const rateLimit: typeof floodgate.rateLimit;
  const keyBy: typeof floodgate.keyBy;
  // The app's own route handlers and helpers.
  const sendSms: RequestHandler;
  const download: RequestHandler;
  function sizeInMb(req: Request): number;
  const log: { warn(fields: object): void };
  namespace Express {
    interface Request {
      /** Set by the app's authentication middleware. */
      user: { tenantId: string; plan: 'free' | 'pro' };
    }
  }
}
