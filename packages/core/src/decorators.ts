/*
 * `@rateLimited`: a method decorator that admits each call before the method
 * runs. One function serves both decorator kinds, told apart by what they
 * pass at run time: TypeScript 5's standard decorators call it with the method
 * and a context object (`{ kind: 'method', name, ... }`); legacy ones
 * (`experimentalDecorators`, as NestJS compiles) with the prototype, the
 * property key and its descriptor.
 */
import { describe, ErrorCodes, FloodgateError } from './errors.js';
import { createLimiter, type Limiter } from './limiter.js';
import { type LimiterOptions, limiterOptionNames, rejectUnknownKeys } from './options.js';
import { type CallPlan, planCalls, runLimited, type WrapOptions } from './wrap.js';

/**
 * The call options of a decorator: `key`, `cost` and `wait` (and `rules`, with
 * a limiter of your own). `key` and `cost` get the method's arguments, with
 * its `this`; annotate their parameters (the decorator cannot see the method's).
 */
// biome-ignore lint/suspicious/noExplicitAny: a key function may read any of the method's parameters, and its `this`
type RateLimitedCallOptions = WrapOptions<any[], any>;

/** The options of `@rateLimited(options)`: the limiter's (rules, store, ...) and the call's (key, cost, wait). */
type RateLimitedOptions = LimiterOptions & Omit<RateLimitedCallOptions, 'rules'>;

/** An async method of any parameters. */
// biome-ignore lint/suspicious/noExplicitAny: the parameters of a method are contravariant: only any[] takes them all
type AsyncMethod<This = unknown> = (this: This, ...args: any[]) => Promise<unknown>;

/**
 * What `rateLimited(...)` returns: a decorator for async methods, under
 * TypeScript 5's standard decorators and under `experimentalDecorators`.
 */
export interface RateLimitedDecorator {
  /** Standard (TC39) decorators. */
  // biome-ignore lint/suspicious/noExplicitAny: any async method (parameters are contravariant: only any[] takes them all)
  <This, M extends (this: This, ...args: any[]) => Promise<unknown>>(method: M, context: ClassMethodDecoratorContext<This, M>): M;
  /** Legacy decorators (`experimentalDecorators: true`, as in NestJS). */
  // biome-ignore lint/suspicious/noExplicitAny: as above
  <M extends (...args: any[]) => Promise<unknown>>(
    target: object,
    propertyKey: string | symbol,
    descriptor: TypedPropertyDescriptor<M>,
  ): TypedPropertyDescriptor<M>;
}

const decoratorOptionNames: ReadonlySet<string> = new Set([...limiterOptionNames, 'key', 'cost', 'wait']);

const isLimiter = (value: unknown): value is Limiter =>
  typeof value === 'object' && value !== null && typeof (value as Limiter).consume === 'function' && typeof (value as Limiter).wait === 'function';

/**
 * Limits an async method: each call is admitted (its keys and cost computed
 * from the method's arguments, with the same `this`) before the method runs.
 * A denied call rejects with `RateLimitedError`; with `wait`, it waits its
 * turn instead (see `limiter.wait()`).
 *
 * Two forms: `@rateLimited({ ...limiterOptions, key, cost?, wait? })` owns its
 * limiter, created once per decorated method (when the class is defined) and
 * shared by every instance; `@rateLimited(limiter, { key, cost?, wait?, rules? })`
 * uses a limiter you created (to share it, reset keys, listen to events, close it).
 * Works with TypeScript 5 decorators and with `experimentalDecorators`.
 *
 * @example
 * ```ts
 * class OrderService {
 *   @rateLimited({
 *     rules: [
 *       { name: 'all-10s', scope: 'global', limit: 50, windowMs: 10_000 },
 *       { name: 'per-user', scope: 'user', limit: 2, windowMs: 1_000 },
 *     ],
 *     key: (order: { userId: string }) => ({ user: order.userId }),
 *   })
 *   async place(order: { userId: string }) {
 *     return { placed: order.userId };
 *   }
 * }
 * ```
 */
// biome-ignore lint/suspicious/noExplicitAny: key and cost may read any of the method's parameters, and its `this`
export function rateLimited(options: LimiterOptions & Omit<WrapOptions<any[], any>, 'rules'>): RateLimitedDecorator;
// biome-ignore lint/suspicious/noExplicitAny: as above
export function rateLimited(limiter: Limiter, options: WrapOptions<any[], any>): RateLimitedDecorator;
export function rateLimited(first: Limiter | RateLimitedOptions, second?: RateLimitedCallOptions): RateLimitedDecorator {
  let plan: CallPlan<unknown[], unknown>;
  let limiterFor: () => Limiter;
  if (isLimiter(first)) {
    plan = planCalls(second as RateLimitedCallOptions, 'rateLimited(limiter, options)');
    limiterFor = () => first;
  } else {
    if (second !== undefined || typeof first !== 'object' || first === null || Array.isArray(first)) {
      throw new FloodgateError(
        ErrorCodes.OPTION,
        `rateLimited() takes one options object ({ rules, key, ... }) or a limiter and call options (limiter, { key, ... }), got ${describe(first)}${second === undefined ? '' : ' and more'}.`,
      );
    }
    rejectUnknownKeys(first, decoratorOptionNames, 'rateLimited()');
    const { key, cost, wait, ...limiterOptions } = first;
    plan = planCalls({ key, cost, wait }, 'rateLimited()');
    // The limiter's options are checked now, when the decorator is made; that first limiter goes to the first method decorated.
    let unused: Limiter | undefined = createLimiter(limiterOptions);
    limiterFor = () => {
      const limiter = unused ?? createLimiter(limiterOptions);
      unused = undefined;
      return limiter;
    };
  }

  const limit = (method: AsyncMethod, name: string): AsyncMethod => {
    const limiter = limiterFor();
    const limited = function (this: unknown, ...args: unknown[]): Promise<unknown> {
      return runLimited(limiter, plan, method, this, args);
    };
    Object.defineProperty(limited, 'name', { value: name, configurable: true });
    return limited;
  };

  return function decorate(target: unknown, context: unknown, descriptor?: PropertyDescriptor): unknown {
    if (typeof context === 'object' && context !== null && 'kind' in context) {
      const standard = context as DecoratorContext;
      if (standard.kind !== 'method' || typeof target !== 'function') throw notAMethod(`a ${standard.kind}`);
      return limit(target as AsyncMethod, String(standard.name));
    }
    if (typeof descriptor === 'object' && descriptor !== null && typeof descriptor.value === 'function') {
      const method = descriptor.value as AsyncMethod;
      const limited = limit(method, String(context));
      copyMetadata(method, limited);
      descriptor.value = limited;
      return descriptor;
    }
    throw notAMethod(descriptor === undefined ? describe(target) : 'an accessor or a property');
  } as RateLimitedDecorator;
}

function notAMethod(what: string): FloodgateError {
  return new FloodgateError(ErrorCodes.OPTION, `@rateLimited decorates methods (async ones), not ${what}.`);
}

/**
 * Legacy decorators (NestJS's among them) keep metadata on the method itself
 * with reflect-metadata: a decorator listed above @rateLimited ran before it
 * and wrote it there. The replacement carries it over, so that it is not lost.
 */
function copyMetadata(from: object, to: object): void {
  const reflect = Reflect as unknown as {
    getMetadataKeys?: (target: object) => unknown[];
    getMetadata?: (key: unknown, target: object) => unknown;
    defineMetadata?: (key: unknown, value: unknown, target: object) => void;
  };
  if (typeof reflect.getMetadataKeys !== 'function' || typeof reflect.getMetadata !== 'function' || typeof reflect.defineMetadata !== 'function') return;
  for (const key of reflect.getMetadataKeys(from)) reflect.defineMetadata(key, reflect.getMetadata(key, from), to);
}
