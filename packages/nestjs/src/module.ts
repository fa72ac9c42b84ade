import {
  type CustomDecorator,
  type DynamicModule,
  type InjectionToken,
  Module,
  type ModuleMetadata,
  type OptionalFactoryDependency,
  type Provider,
  SetMetadata,
} from '@nestjs/common';
import { APP_FILTER, APP_GUARD, APP_INTERCEPTOR } from '@nestjs/core';
import { FLOODGATE_ROOT, RATE_LIMIT_METADATA, RateLimitedFilter, RateLimitGuard, RateLimitInterceptor } from './guard.js';
import { inherit, type NestRateLimitOptions } from './options.js';

/** Options of `FloodgateModule.forRootAsync()`: a factory of the module's options, with what it injects. */
export interface FloodgateAsyncOptions extends Pick<ModuleMetadata, 'imports'> {
  /** Providers handed to `useFactory`, in order. */
  inject?: (InjectionToken | OptionalFactoryDependency)[];
  // biome-ignore lint/suspicious/noExplicitAny: whatever `inject` resolves to.
  useFactory: (...args: any[]) => NestRateLimitOptions | Promise<NestRateLimitOptions>;
}

/**
 * Rate limiting for a Nest app: installs a global guard that limits every
 * HTTP route with these options, unless the route's `@RateLimit()` or
 * `@SkipRateLimit()` says otherwise. Without `limit`, `rules` or `limiter`,
 * the options are defaults for `@RateLimit()` and only decorated routes are limited.
 *
 * @example
 * ```ts
 * @Module({
 *   imports: [FloodgateModule.forRoot({ limit: 100, windowMs: 60_000 })], // 100 requests a minute per client IP
 *   controllers: [CatsController],
 * })
 * export class AppModule {}
 * ```
 */
@Module({})
// biome-ignore lint/complexity/noStaticOnlyClass: a Nest dynamic module is a class with static forRoot()/forRootAsync().
export class FloodgateModule {
  /** Options known now; bad ones throw a FloodgateError (ERR_FG_*) here. */
  static forRoot(options: NestRateLimitOptions = {}): DynamicModule {
    return withRoot({ provide: FLOODGATE_ROOT, useValue: inherit(undefined, options) });
  }

  /**
   * Options made by a factory with injected providers, e.g. a `RedisStore`
   * around the app's Redis client.
   *
   * @example
   * ```ts
   * FloodgateModule.forRootAsync({
   *   imports: [RedisModule],
   *   inject: [REDIS],
   *   useFactory: (redis: Redis) => ({ limit: 100, windowMs: 60_000, store: new RedisStore({ client: redis }) }),
   * });
   * ```
   */
  static forRootAsync(options: FloodgateAsyncOptions): DynamicModule {
    const root: Provider = {
      provide: FLOODGATE_ROOT,
      useFactory: async (...args: unknown[]) => inherit(undefined, await options.useFactory(...args)),
      inject: options.inject ?? [],
    };
    return withRoot(root, options.imports);
  }
}

function withRoot(root: Provider, imports: ModuleMetadata['imports'] = []): DynamicModule {
  return {
    module: FloodgateModule,
    imports,
    providers: [
      root,
      { provide: APP_GUARD, useClass: RateLimitGuard },
      { provide: APP_INTERCEPTOR, useClass: RateLimitInterceptor },
      { provide: APP_FILTER, useClass: RateLimitedFilter },
    ],
  };
}

/**
 * Limits a controller's routes, or one route, with these options over those
 * of the levels above (handler over controller over module). Without options
 * it limits the route with the options above, under a `@SkipRateLimit()` controller too.
 *
 * @example
 * ```ts
 * @Post('sms')
 * @RateLimit({ limit: 1, windowMs: 60_000, key: keyBy.header('x-user-id') })
 * send() { ... }
 * ```
 */
export function RateLimit(options: NestRateLimitOptions | readonly NestRateLimitOptions[] = {}): CustomDecorator<string> {
  return SetMetadata(RATE_LIMIT_METADATA, options);
}

/**
 * Exempts a controller, or one route, from rate limiting. A route's own
 * `@RateLimit()` limits it again under a skipped controller.
 *
 * @example
 * ```ts
 * @SkipRateLimit()
 * @Get('health')
 * health() { return 'ok'; }
 * ```
 */
export function SkipRateLimit(): CustomDecorator<string> {
  return SetMetadata(RATE_LIMIT_METADATA, false);
}
