import { FloodgateModule } from '@floodgate/nestjs';
import { Module } from '@nestjs/common';
import { CatsController, HealthController } from './cats.controller.js';

@Module({
  // Every route: 100 requests a minute per client IP, with IETF draft-8 headers as well.
  // @RateLimit() on a controller or route takes these as defaults (window, headers, store...).
  imports: [FloodgateModule.forRoot({ limit: 100, windowMs: 60_000, headers: 'both' })],
  controllers: [CatsController, HealthController],
})
export class AppModule {}
