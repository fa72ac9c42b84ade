/*
 * An HTTP adapter's options, read once (`parseFlowOptions`): the options of
 * every call flow (call-options.ts: limiter, key, cost, rules, skip, shadow,
 * headers), then those of HTTP: allow and deny lists, the denial's status and
 * body, refunds by status, `settle` and the setup warnings; what the request
 * flow then calls per request, frozen. The flow itself is http/middleware.ts.
 */
import { type CallConfiguration, checkBoolean, checkFunction, guarded, parseCallOptions } from '../call-options.js';
import { describe, ErrorCodes, FloodgateError, orDefault } from '../errors.js';
import type { Keys } from '../keys.js';
import { isPromise, type Later } from '../later.js';
import { adapterOptionNames } from '../options.js';
import type { KeyFunction } from './keys.js';
import { compileAccessList } from './lists.js';
import type { ProxyTrust } from './proxy-trust.js';
import { checkSettled } from './settle.js';
import { createValidations } from './validate.js';

/** A denial body: a string (sent as text), an object (sent as JSON), or a function of the request (undefined: the default message). */
type Message<Args extends unknown[]> = string | object | ((...args: Args) => string | object | undefined | Promise<string | object | undefined>);

export function render(message: string | object): { body: string; contentType: string } {
  return typeof message === 'string'
    ? { body: message, contentType: 'text/plain; charset=utf-8' }
    : { body: JSON.stringify(message), contentType: 'application/json; charset=utf-8' };
}

export const DEFAULT_MESSAGE = 'Too many requests, please try again later.';

/** What the flow needs of the adapter to read options: its name, its default key, its own options, and for the setup warnings how it reads headers and proxy trust. */
interface AdapterFacts<Args extends unknown[]> {
  name: string;
  defaultKey: () => KeyFunction<Args>;
  extraKeys?: readonly string[];
  header?: (name: string, ...args: Args) => string | readonly string[] | undefined;
  trust?: (...args: Args) => ProxyTrust | undefined;
}

/** An adapter's options, checked, with every default filled in, and the per-request functions built from them. */
export interface FlowConfiguration<Args extends unknown[], Handler> {
  /** What every call flow reads: limiter, skip, key, cost, rules, shadow, headers. */
  readonly call: CallConfiguration<Args>;
  readonly handler: Handler | undefined;
  /** Whether a request is on the deny list, or on the allow list (by the client address, or the list's function). */
  readonly denied: ((clientIp: string | undefined, args: Args) => Later<boolean>) | undefined;
  readonly allowed: ((clientIp: string | undefined, args: Args) => Later<boolean>) | undefined;
  /** The setup warnings' check of a request and the keys it got, when any is on. */
  readonly validate: ((args: Args, keys: Keys) => void) | undefined;
  readonly statusCode: number;
  readonly problemDetails: boolean;
  readonly message: Message<Args>;
  /** The denial body when it is the same for every request. */
  readonly staticBody: { readonly body: string; readonly contentType: string } | undefined;
  readonly skipSuccessfulRequests: boolean;
  readonly skipFailedRequests: boolean;
  /** The units a request took, once its response is over (the `settle` option), checked: undefined keeps the estimate. */
  readonly settle: ((args: Args) => Later<number | undefined>) | undefined;
}

/** Reads and checks an adapter's options once; throws ERR_FG_* naming the option. */
export function parseFlowOptions<Args extends unknown[], Handler>(
  options: {
    readonly [name: string]: unknown;
    handler?: Handler;
    message?: unknown;
    statusCode?: number;
    problemDetails?: boolean;
    skipSuccessfulRequests?: boolean;
    skipFailedRequests?: boolean;
    settle?: unknown;
    allowList?: unknown;
    denyList?: unknown;
    validate?: unknown;
  },
  adapter: AdapterFacts<Args>,
): FlowConfiguration<Args, Handler> {
  const call = parseCallOptions<Args>(options, {
    where: `${adapter.name}'s rateLimit()`,
    defaultKey: adapter.defaultKey,
    extraKeys: [...adapterOptionNames, ...(adapter.extraKeys ?? [])],
  });

  checkFunction(options.handler, 'handler');
  checkBoolean(options.skipSuccessfulRequests, 'skipSuccessfulRequests');
  checkBoolean(options.skipFailedRequests, 'skipFailedRequests');
  checkFunction(options.settle, 'settle');
  const statusCode = orDefault(options.statusCode, 429);
  if (!Number.isInteger(statusCode) || statusCode < 400 || statusCode > 599) {
    throw new FloodgateError(ErrorCodes.OPTION, `statusCode must be an HTTP error status (400-599), got ${describe(options.statusCode)}.`);
  }
  checkBoolean(options.problemDetails, 'problemDetails');
  const problemDetails = options.problemDetails === true;
  const message = orDefault(options.message, DEFAULT_MESSAGE) as Message<Args>;
  if (typeof message !== 'string' && typeof message !== 'function' && (typeof message !== 'object' || message === null)) {
    throw new FloodgateError(ErrorCodes.OPTION, `message must be a string, an object (sent as JSON) or a function, got ${describe(options.message)}.`);
  }

  const validate = createValidations<Args>(options.validate, call.key, adapter);
  const settled = options.settle as ((...args: Args) => number | undefined | Promise<number | undefined>) | undefined;
  return Object.freeze({
    call,
    handler: options.handler,
    denied: compileAccessList<Args>(options.denyList, 'denyList'),
    allowed: compileAccessList<Args>(options.allowList, 'allowList'),
    // The warnings read one string per request: the keys of several scopes joined.
    validate: validate && ((args: Args, keys: Keys) => validate(args, typeof keys === 'string' ? keys : Object.values(keys).join('}'))),
    statusCode,
    problemDetails,
    message,
    staticBody: typeof message === 'function' || problemDetails ? undefined : render(message),
    skipSuccessfulRequests: options.skipSuccessfulRequests === true,
    skipFailedRequests: options.skipFailedRequests === true,
    settle:
      settled === undefined
        ? undefined
        : (args: Args) => {
            const units = guarded(settled, args, ErrorCodes.COST, 'settle');
            return isPromise(units) ? units.then(checkSettled) : checkSettled(units);
          },
  });
}
