/**
 * @packageDocumentation
 * What a framework adapter builds on: the framework-neutral request flow
 * (options → key → cost → limiter → headers → denial), key extractors made
 * from three functions that read a request, header builders, and the Node
 * helper that settles leases and refunds when a request's work is over.
 * `@floodgate/express` is the reference adapter.
 */
export { isPromise } from './awaitable.js';
export { type Header, type HeadersMode, type PolicyReport, partitionKeys, rateLimitHeaders, retryAfterSeconds } from './http/headers.js';
export {
  createKeyBy,
  type ForwardedForOptions,
  forwardedAddress,
  forwardedFor,
  type HeaderKeyOptions,
  hostOf,
  type IpKeyOptions,
  joinHeader,
  type KeyBy,
  type KeyFunction,
  normalizeIp,
  type RequestReader,
} from './http/keys.js';
export { type AccessList, compileAccessList } from './http/lists.js';
export {
  createRateLimitFlow,
  type Denial,
  type HandlerSignals,
  handlerSignals,
  type KeyOption,
  type Message,
  type NodeResponse,
  type Outcome,
  type PerRequest,
  type RateLimitFlow,
  type RateLimitOptions,
  settleWhenDone,
} from './http/middleware.js';
export { PROBLEM_CONTENT_TYPE, type ProblemOptions, problemResponse, problemTypes, type RateLimitProblem, rateLimitProblem } from './http/problem.js';
export { expressProxyTrust, fastifyProxyTrust, koaProxyTrust, type ProxyTrust, socketOnlyProxyTrust } from './http/proxy-trust.js';
export type { ValidationFacts } from './http/validate.js';
export { isUnmeasured } from './limiter.js';
export { derivedPrefix, givenOptions, inheritOptions, limiterOptionNames, type OptionLevel, overlayLimiterOptions, ruleShorthandNames } from './options.js';
