import type { Decision, KeyBy } from '@floodgate/core';
import {
  createKeyBy,
  createRateLimitFlow,
  proxyTrustOf,
  type RateLimitFlow,
  type RateLimitOptions,
  type RequestReader,
  settleWhenDone,
} from '@floodgate/core/adapter';
import type { NextFunction, Request, RequestHandler, Response } from 'express';

export {
  createLimiter,
  type Decision,
  FloodgateError,
  type Limiter,
  MemoryStore,
  type RuleOptions,
} from '@floodgate/core';

declare global {
  namespace Express {
    interface Request {
      /** The rate-limit decision for this request, set by Floodgate's rateLimit(). */
      rateLimit?: Decision;
    }
  }
}

/** What Express hands a middleware, minus `next`: what `key`, `cost`, `skip` and `message` receive. */
export type ExpressArgs = [req: Request, res: Response];

/** A custom denial response. Rate-limit headers are already set on `res`. */
/**
 * A custom denial handler. Its fourth argument is the decision with what express-rate-limit's handlers
 * find in their `options` (statusCode, message, limit, windowMs): one copied from there answers as it did.
 */
export type ExpressHandler = (req: Request, res: Response, next: NextFunction, denial: RateLimitFlow.Denial) => unknown;

/** Options of `rateLimit()` for Express (see `@floodgate/core` RateLimitOptions). */
export type ExpressRateLimitOptions = RateLimitOptions<ExpressArgs, ExpressHandler>;

const reader: RequestReader<ExpressArgs> = {
  clientIp: (req) => req.ip,
  socketIp: (req) => req.socket?.remoteAddress,
  header: (name, req) => req.headers[name],
};

/**
 * Key extractors for Express. `keyBy.ip()` reads `req.ip`, so it follows
 * `app.set('trust proxy', ...)`.
 *
 * @example
 * ```ts
 * app.post('/sms', rateLimit({ limit: 1, windowMs: 60_000, key: keyBy.header('x-user-id') }), send);
 * ```
 */
export const keyBy: KeyBy<ExpressArgs> = createKeyBy(reader);

function respond(flow: RateLimitFlow<ExpressArgs, ExpressHandler>, outcome: RateLimitFlow.Outcome, req: Request, res: Response, next: NextFunction): void {
  if (outcome.kind === 'skip') {
    next();
    return;
  }
  if (!res.headersSent) for (const [name, value] of outcome.headers) res.setHeader(name, value);
  if (outcome.kind === 'pass') {
    settleWhenDone(flow, outcome, res);
    next();
    return;
  }
  if (outcome.custom && flow.handler !== undefined) {
    // A custom handler's deny outcome carries the Denial (createRateLimitFlow).
    Promise.resolve(flow.handler(req, res, next, outcome.decision as RateLimitFlow.Denial)).catch(next);
    return;
  }
  res.status(outcome.status).type(outcome.contentType).send(outcome.body);
}

/**
 * Rate-limiting middleware for Express 4 and 5.
 *
 * @example
 * ```ts
 * import express from 'express';
 * import { rateLimit } from '@floodgate/express';
 *
 * const app = express();
 * app.use(rateLimit({ limit: 100, windowMs: 60_000 })); // 100 requests a minute per client IP
 * ```
 */
export function rateLimit(options: ExpressRateLimitOptions): RequestHandler {
  const flow = createRateLimitFlow<ExpressArgs, ExpressHandler>(options, {
    name: '@floodgate/express',
    defaultKey: () => keyBy.ip(),
    expose: (decision, req) => {
      req.rateLimit = decision;
    },
    clientIp: reader.clientIp,
    header: reader.header,
    trust: proxyTrustOf,
  });
  const answer = (outcome: RateLimitFlow.Outcome, req: Request, res: Response, next: NextFunction): void => {
    try {
      respond(flow, outcome, req, res, next);
    } catch (error) {
      next(error);
    }
  };
  // runNow(): with a store that answers at once (MemoryStore), the request goes on in the same turn.
  return function floodgateRateLimit(req: Request, res: Response, next: NextFunction): void {
    let outcome: RateLimitFlow.Outcome | Promise<RateLimitFlow.Outcome>;
    try {
      outcome = flow.runNow([req, res]);
    } catch (error) {
      next(error);
      return;
    }
    if ('kind' in outcome) answer(outcome, req, res, next);
    else outcome.then((settled) => answer(settled, req, res, next), next);
  };
}
