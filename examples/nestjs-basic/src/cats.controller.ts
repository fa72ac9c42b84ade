import { keyBy, type NestRequest, RateLimit, SkipRateLimit } from '@floodgate/nestjs';
import { Controller, Get, Post, Req } from '@nestjs/common';

// This controller: 10 requests a minute per client IP, within the module's 100 (its own limiter; the
// window, the key and the headers come from the module). Limits of different levels add up: a request
// must pass the module's and the controller's (stack: false would make the 10 replace the 100).
@Controller('cats')
@RateLimit({ limit: 10 })
export class CatsController {
  @Get()
  list(@Req() request: NestRequest) {
    return { cats: ['Tom', 'Felix'], remaining: request.rateLimit?.remaining };
  }

  // Costs 3 of this controller's 10 (and 1 of the module's 100): the same limiter, a higher price (3 searches, then 429).
  @Get('search')
  @RateLimit({ cost: 3 })
  search() {
    return { found: [] };
  }

  // Per user (x-user-id, else the client IP), in a sliding log of 2 a minute: a limiter of its own,
  // on top of the controller's and the module's (a client that varies x-user-id still meets those).
  @Post()
  @RateLimit({ algorithm: 'sliding-log', limit: 2, key: keyBy.header('x-user-id') })
  create() {
    return { created: true };
  }
}

@Controller('health')
@SkipRateLimit()
export class HealthController {
  @Get()
  health() {
    return 'ok';
  }
}
