import type { Decision } from '@floodgate/core';
import { handlerSignals, type NodeResponse, type RateLimitFlow, settleWhenDone } from '@floodgate/core/adapter';
import {
  type ArgumentsHost,
  type CallHandler,
  type CanActivate,
  Catch,
  type ExceptionFilter,
  type ExecutionContext,
  HttpException,
  Inject,
  Injectable,
  type NestInterceptor,
  type OnModuleInit,
} from '@nestjs/common';
import { HttpAdapterHost, MetadataScanner, ModulesContainer, Reflector } from '@nestjs/core';
import { finalize, map, type Observable, tap } from 'rxjs';
import { denialOf, failureOf } from './answers.js';
import { type NestCall, remember, resolveCall } from './contexts.js';
import { type Flow, inherit, type Level, type NestRateLimitOptions, type NestRequest } from './options.js';

/** Injection token of the module's options, merged into a Level. */
export const FLOODGATE_ROOT = Symbol('FloodgateRoot');
/** Metadata key of `@RateLimit()` (options) and `@SkipRateLimit()` (false). */
export const RATE_LIMIT_METADATA = 'floodgate:rate-limit';

/**
 * What Floodgate throws for a denied request: a 429 (or the `statusCode`
 * option; 503 when the store is down and `onStoreError` is 'deny'; 403 for
 * the deny list). Your exception filters see it with the rate-limit headers
 * already set on the response; without one, Floodgate's filter answers with
 * `body` as `contentType` (the `message` option).
 *
 * @example
 * ```ts
 * @Catch(RateLimitedException)
 * class TooManyFilter implements ExceptionFilter {
 *   catch(error: RateLimitedException, host: ArgumentsHost) {
 *     host.switchToHttp().getResponse().status(429).send({ retryInMs: error.decision.retryAfterMs });
 *   }
 * }
 * ```
 */
export class RateLimitedException extends HttpException {
  /** The decision that denied the request. */
  readonly decision: Decision;
  /** The rendered `message`: what Floodgate's filter sends. */
  readonly body: string;
  readonly contentType: string;

  constructor(denial: { decision: Decision; status: number; body: string; contentType: string }) {
    const json = denial.contentType.startsWith('application/json');
    super(json ? JSON.parse(denial.body) : denial.body, denial.status);
    this.decision = denial.decision;
    this.body = denial.body;
    this.contentType = denial.contentType;
  }
}

/** Sends a RateLimitedException that no filter of yours caught: its status, body and content type. */
@Catch(RateLimitedException)
export class RateLimitedFilter implements ExceptionFilter<RateLimitedException> {
  constructor(@Inject(HttpAdapterHost) private readonly host: HttpAdapterHost) {}

  catch(exception: RateLimitedException, host: ArgumentsHost): void {
    const adapter = this.host.httpAdapter;
    const response = host.switchToHttp().getResponse();
    adapter.setHeader(response, 'Content-Type', exception.contentType);
    adapter.reply(response, exception.body, exception.getStatus());
  }
}

/** Requests whose lease or refund waits for their handler: when it is done, with its status. */
const handlers = handlerSignals();

/** Express's response is Node's; Fastify's reply holds it as `raw`. */
// biome-ignore lint/suspicious/noExplicitAny: the platform's response object.
const nodeResponse = (response: any): NodeResponse => response.raw ?? response;

function settleLater(flow: Flow, outcome: RateLimitFlow.Outcome, request: NestRequest, response: NodeResponse): void {
  const handled = handlers.wait(request);
  // The handler never runs when a later guard or pipe throws, and may answer by itself (@Res()):
  // ending the response ends its work then. The interceptor tells otherwise.
  const end = response.end;
  response.end = function endAndSettle(this: unknown, ...args: unknown[]) {
    handlers.done(request, response.statusCode);
    return end.apply(this, args);
  };
  settleWhenDone(flow, outcome, response, handled);
}

/**
 * The global guard `FloodgateModule` installs: limits every HTTP route, gateway
 * message and GraphQL resolver with the options of the module, its class's
 * `@RateLimit()` and its own.
 */
@Injectable()
export class RateLimitGuard implements CanActivate, OnModuleInit {
  /** Each route's level, by controller class, then handler: built once, at startup or on the first request. */
  private readonly levels = new WeakMap<object, WeakMap<object, readonly Level[]>>();
  private readonly controllerLevels = new WeakMap<object, readonly Level[]>();

  constructor(
    @Inject(FLOODGATE_ROOT) private readonly root: Level,
    @Inject(Reflector) private readonly reflector: Reflector,
    @Inject(HttpAdapterHost) private readonly host: HttpAdapterHost,
    @Inject(ModulesContainer) private readonly modules: ModulesContainer,
  ) {}

  /**
   * Builds every route's flow, and those of gateways and resolvers with a `@RateLimit()` (or
   * `@SkipRateLimit()`), so that bad options fail at startup.
   */
  onModuleInit(): void {
    const scanner = new MetadataScanner();
    const decorated = (target: unknown) => this.reflector.get(RATE_LIMIT_METADATA, target as never) !== undefined;
    for (const module of this.modules.values()) {
      const classes = [...module.controllers.values(), ...module.providers.values()].map(({ metatype }) => metatype);
      for (const [i, metatype] of classes.entries()) {
        // The controller's methods and those it inherits, as Nest's router finds them: any of them may be a route.
        const prototype = (metatype as { prototype?: Record<string, object> } | null)?.prototype;
        if (typeof metatype !== 'function' || prototype === undefined) continue;
        const names = scanner.getAllMethodNames(prototype);
        // Providers are gateways, resolvers or services: only those with Floodgate's decorators are built now.
        if (i >= module.controllers.size && !decorated(metatype) && !names.some((name) => decorated(prototype[name]))) continue;
        for (const name of names) this.levelOf(metatype, prototype[name] as object);
      }
    }
  }

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const type = context.getType<string>();
    if (type !== 'http' && type !== 'ws' && type !== 'graphql') return true;
    const levels = this.levelOf(context.getClass(), context.getHandler());
    if (levels.length === 0) return true;
    if (type !== 'http') return this.limitCall(levels, await (resolveCall(context) as NestCall | Promise<NestCall>), context);
    const http = context.switchToHttp();
    const request = http.getRequest<NestRequest>();
    const response = http.getResponse();
    // Several option sets on one route (@RateLimit([...])) are stacked limiters, in order: the first denial answers.
    for (const { flow } of levels) {
      if (flow === undefined) continue;
      const outcome = await flow.run([request, context]);
      if (outcome.kind === 'skip') continue;
      for (const [name, value] of outcome.headers) this.host.httpAdapter.setHeader(response, name, value);
      if (outcome.kind === 'pass') {
        if (flow.mustSettle(outcome)) settleLater(flow, outcome, request, nodeResponse(response));
        continue;
      }
      if (outcome.custom && flow.handler !== undefined) throw await flow.handler(request, context, outcome.decision);
      throw new RateLimitedException(outcome);
    }
    return true;
  }

  /**
   * A gateway's message or a resolver's call: the same levels and flows as a route, answered as
   * their kind answers errors (a WsException, a GraphQLError); rate-limit headers only on a
   * GraphQL operation's HTTP response.
   */
  private async limitCall(levels: readonly Level[], call: NestCall, context: ExecutionContext): Promise<boolean> {
    remember(context, call);
    const request = call.request ?? ({ headers: {} } as NestRequest);
    for (const { flow } of levels) {
      if (flow === undefined) continue;
      let outcome: RateLimitFlow.Outcome;
      try {
        outcome = await flow.run([request, context]);
      } catch (error) {
        throw await failureOf(call, error);
      }
      if (outcome.kind === 'skip') continue;
      if (call.response !== undefined) for (const [name, value] of outcome.headers) this.host.httpAdapter.setHeader(call.response, name, value);
      if (outcome.kind === 'pass') {
        if (flow.mustSettle(outcome)) settleCall(flow, outcome, context);
        continue;
      }
      if (outcome.custom && flow.handler !== undefined) throw await flow.handler(request, context, outcome.decision);
      throw await denialOf(call, outcome);
    }
    return true;
  }

  /**
   * The limiters of a route, in the order they decide: the module's, the
   * controller's, the handler's, each level's own limits added to those
   * above (`stack: false`: in their place). The nearest of
   * `@RateLimit()`/`@SkipRateLimit()` says whether the route is limited at
   * all. Several option sets (`@RateLimit([a, b])`) are stacked limiters,
   * each over the level above. Empty: skipped.
   */
  private levelOf(controller: object, handler: object): readonly Level[] {
    return cached(
      cached(this.levels, controller, () => new WeakMap()),
      handler,
      () => {
        type Given = NestRateLimitOptions | readonly NestRateLimitOptions[] | false | undefined;
        const own = this.reflector.get<Given>(RATE_LIMIT_METADATA, handler as never);
        const above = this.reflector.get<Given>(RATE_LIMIT_METADATA, controller as never);
        if (own === false || (own === undefined && above === false)) return [];
        const controllerName = (controller as { name?: string }).name || 'controller';
        const levels = (parent: Level, given: NestRateLimitOptions | readonly NestRateLimitOptions[], name: string): Level[] =>
          Array.isArray(given)
            ? given.map((options: NestRateLimitOptions, i) => inherit(parent, options, `${name}#${i + 1}`))
            : [inherit(parent, given as NestRateLimitOptions, name)];
        const controllerOwn = above ? cached(this.controllerLevels, controller, () => levels(this.root, above, controllerName)) : undefined;
        const parents = controllerOwn === undefined ? [this.root] : this.onTop([this.root], controllerOwn);
        if (!own) return parents;
        // Under stacked controller limits, a handler's own options build on the module's.
        const parent = controllerOwn?.length === 1 ? (controllerOwn[0] as Level) : this.root;
        return this.onTop(parents, levels(parent, own, `${controllerName}.${(handler as { name?: string }).name || 'handler'}`));
      },
    );
  }

  /**
   * A level's own limiters over those of the levels above: added to them
   * (`stack`, by default the module's, else true), or in their place. A
   * level without limits of its own shares a limiter above, and takes that
   * one's place with its own options (a `cost`), so that no limiter counts twice.
   */
  private onTop(above: readonly Level[], own: readonly Level[]): Level[] {
    if (!own.every((level) => level.stack ?? this.root.stack ?? true)) return [...own];
    return [...above.filter((level) => level.flow !== undefined && !own.some((mine) => mine.limiter === level.limiter)), ...own];
  }
}

function cached<K extends object, V>(cache: WeakMap<K, V>, key: K, make: () => V): V {
  if (cache.has(key)) return cache.get(key) as V;
  const value = make();
  cache.set(key, value);
  return value;
}

/**
 * Tells the guard when a handler is done (completed, failed, or torn down when
 * its client left), for the leases and refunds that wait for it.
 */
@Injectable()
export class RateLimitInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const type = context.getType<string>();
    if (type === 'ws' || type === 'graphql') return interceptCall(context, next);
    const request = context.switchToHttp().getRequest();
    if (!handlers.waiting(request)) return next.handle();
    const response = nodeResponse(context.switchToHttp().getResponse());
    let completed = false;
    return next.handle().pipe(
      tap({ complete: () => (completed = true) }),
      finalize(() => handlers.done(request, completed ? response.statusCode : undefined)),
    );
  }
}

/**
 * A gateway's message or resolver's call is done when its handler's result completes (a
 * success, as HTTP's 200) or fails; a subscription's when its stream ends (the client left,
 * or the server ended it).
 */
function interceptCall(context: ExecutionContext, next: CallHandler): Observable<unknown> {
  const call = context.getArgs(); // the same array the guard saw
  if (!handlers.waiting(call)) return next.handle();
  let completed = false;
  let streaming = false;
  return next.handle().pipe(
    map((result) => {
      if (!isAsyncIterable(result)) return result;
      streaming = true;
      return untilEnded(result, (failed) => handlers.done(call, failed ? undefined : 200));
    }),
    tap({ complete: () => (completed = true) }),
    finalize(() => {
      if (!streaming || !completed) handlers.done(call, completed ? 200 : undefined);
    }),
  );
}

const isAsyncIterable = (value: unknown): value is AsyncIterable<unknown> =>
  typeof value === 'object' && value !== null && typeof (value as { [Symbol.asyncIterator]?: unknown })[Symbol.asyncIterator] === 'function';

/** The stream, telling `ended` once when it ends: done, returned (the client left), or failed. */
function untilEnded<T>(stream: AsyncIterable<T>, ended: (failed: boolean) => void): AsyncIterableIterator<T> {
  const iterator = stream[Symbol.asyncIterator]();
  let over = false;
  const end = (failed: boolean) => {
    if (over) return;
    over = true;
    ended(failed);
  };
  return {
    [Symbol.asyncIterator]() {
      return this;
    },
    async next() {
      try {
        const result = await iterator.next();
        if (result.done) end(false);
        return result;
      } catch (error) {
        end(true);
        throw error;
      }
    },
    async return(value?: unknown) {
      end(false);
      return iterator.return ? iterator.return(value) : { done: true, value: value as T };
    },
    async throw(error?: unknown) {
      end(true);
      if (iterator.throw) return iterator.throw(error);
      throw error;
    },
  };
}

/** Settles a call's lease or refund once its handler is done (the interceptor tells). */
function settleCall(flow: Flow, outcome: RateLimitFlow.Outcome, context: ExecutionContext): void {
  handlers.wait(context.getArgs()).then(
    (status) => flow.settle(outcome, status),
    () => flow.settle(outcome, undefined),
  );
}
