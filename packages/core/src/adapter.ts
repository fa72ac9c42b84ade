/**
 * @packageDocumentation
 * What a framework adapter builds on: the framework-neutral call flow
 * (options → skip → key → cost → limiter → verdict: `createCallFlow`, for
 * adapters that answer calls their own way), the HTTP request flow on top of
 * it (allow and deny lists, headers, denial bodies, refunds by status:
 * `createRateLimitFlow`), the key extractors
 * made from three functions that read a request, the proxy-trust reader of
 * Express and Fastify, option inheritance for adapters with levels (a plugin
 * and its routes, a module and its controllers), and the Node helper that
 * settles leases and refunds when a request's work is over. Exporters
 * (metrics, traces) tell measured decisions from `onStoreError`'s with
 * `isUnmeasured`. `@floodgate/express` is the reference adapter.
 */
export { type CallFlow, createCallFlow } from './call-flow.js';
export { type HeadersMode, type PolicyReport, rateLimitHeaders } from './http/headers.js';
export { createKeyBy, forwardedFor, normalizeIp, type RequestReader } from './http/keys.js';
export {
  createRateLimitFlow,
  handlerSignals,
  type NodeResponse,
  type RateLimitFlow,
  type RateLimitOptions,
  settleWhenDone,
} from './http/middleware.js';
export { type ProxyTrust, proxyTrustOf } from './http/proxy-trust.js';
export { isUnmeasured } from './limiter.js';
export { inheritOptions, type OptionLevel } from './options.js';
