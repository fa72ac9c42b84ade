/**
 * @packageDocumentation
 * What a framework adapter builds on: the framework-neutral request flow
 * (options → key → cost → limiter → headers → denial), the key extractors
 * made from three functions that read a request, the proxy-trust reader of
 * Express and Fastify, option inheritance for adapters with levels (a plugin
 * and its routes, a module and its controllers), and the Node helper that
 * settles leases and refunds when a request's work is over. Exporters
 * (metrics, traces) tell measured decisions from `onStoreError`'s with
 * `isUnmeasured`. `@floodgate/express` is the reference adapter.
 */
export { type HeadersMode, type PolicyReport, rateLimitHeaders } from './http/headers.js';
export { createKeyBy, forwardedFor, normalizeIp, type RequestReader } from './http/keys.js';
export {
  createRateLimitFlow,
  type Denial,
  handlerSignals,
  type NodeResponse,
  type Outcome,
  type RateLimitFlow,
  type RateLimitOptions,
  settleWhenDone,
} from './http/middleware.js';
export { type ProxyTrust, proxyTrustOf } from './http/proxy-trust.js';
export { isUnmeasured } from './limiter.js';
export { inheritOptions, type OptionLevel } from './options.js';
