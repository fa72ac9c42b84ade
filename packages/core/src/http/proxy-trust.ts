/**
 * How far a framework trusts X-Forwarded-For, read from its settings by shape
 * (core imports no framework): what the limiter's proxy warnings need, with
 * the words each framework's users know the setting by.
 */
export interface ProxyTrust {
  /**
   * `'none'`: the client address is the TCP peer's. `'some'`: proxies are
   * trusted by count or by address. `'all'`: the left-most X-Forwarded-For
   * entry, which the client writes, is the client address.
   */
  readonly level: 'none' | 'some' | 'all';
  /** The setting as it is, for a warning: "Express trusts no proxy (app.set('trust proxy') is false)". */
  readonly setting: string;
  /** How to trust exactly the proxies in front of the app. */
  readonly fix: string;
}

function trust(level: ProxyTrust['level'], setting: string, fix: string): ProxyTrust {
  return Object.freeze({ level, setting, fix });
}

const EXPRESS_FIX =
  "tell Express how many proxies are in front of the app, app.set('trust proxy', 1) for one (a load balancer), or which they are, app.set('trust proxy', 'loopback') or a list of addresses and CIDR ranges";
const EXPRESS = {
  none: trust('none', "Express trusts no proxy (app.set('trust proxy') is false)", EXPRESS_FIX),
  some: trust('some', "Express trusts some proxies (app.set('trust proxy', ...))", EXPRESS_FIX),
  all: trust('all', "Express trusts every proxy (app.set('trust proxy', true))", EXPRESS_FIX),
};

/**
 * Express's `trust proxy` setting (Express 4 and 5; NestJS on Express): `req.app`.
 *
 * @example
 * ```ts
 * createRateLimitFlow(options, { ..., trust: (req) => expressProxyTrust(req.app) });
 * ```
 */
export function expressProxyTrust(app: unknown): ProxyTrust | undefined {
  const get = (app as { get?: unknown } | undefined)?.get;
  if (typeof get !== 'function') return undefined;
  const value: unknown = get.call(app, 'trust proxy');
  if (value === true) return EXPRESS.all;
  return value === false || value === undefined || value === 0 ? EXPRESS.none : EXPRESS.some;
}

const KOA_FIX = 'set app.proxy = true and app.maxIpsCount to the number of proxies in front of the app (1 for one load balancer)';
const KOA = {
  none: trust('none', 'Koa trusts no proxy (app.proxy is false)', KOA_FIX),
  some: trust('some', 'Koa trusts app.maxIpsCount proxies', KOA_FIX),
  all: trust('all', 'Koa trusts every proxy (app.proxy is true and app.maxIpsCount is 0)', KOA_FIX),
};

/**
 * Koa's `app.proxy` and `app.maxIpsCount`: `ctx.app`.
 *
 * @example
 * ```ts
 * createRateLimitFlow(options, { ..., trust: (ctx) => koaProxyTrust(ctx.app) });
 * ```
 */
export function koaProxyTrust(app: unknown): ProxyTrust | undefined {
  if (typeof app !== 'object' || app === null || !('proxy' in app)) return undefined;
  const { proxy, maxIpsCount } = app as { proxy?: unknown; maxIpsCount?: unknown };
  if (!proxy) return KOA.none;
  return typeof maxIpsCount === 'number' && maxIpsCount > 0 ? KOA.some : KOA.all;
}

const FASTIFY_FIX =
  "name the proxies in front of the app, Fastify({ trustProxy: '127.0.0.1' }) or a list of addresses and CIDR ranges, or key by keyBy.forwardedFor({ hops }) with their number";
const FASTIFY = {
  none: trust('none', 'Fastify trusts no proxy (its trustProxy option is off)', FASTIFY_FIX),
  counted: trust('none', 'Fastify 5 trusts no proxy when trustProxy is a number (it only takes addresses)', FASTIFY_FIX),
  some: trust('some', 'Fastify trusts some proxies (trustProxy)', FASTIFY_FIX),
  all: trust('all', 'Fastify trusts every proxy (trustProxy: true)', FASTIFY_FIX),
};
const fastifyTrusts = new WeakMap<object, ProxyTrust | null>();

/** The options a Fastify instance was created with: on the root instance under a private symbol, inherited by every encapsulated context. */
function fastifyOptions(instance: object): { trustProxy?: unknown } | undefined {
  for (let object: object | null = instance; object !== null; object = Object.getPrototypeOf(object)) {
    for (const symbol of Object.getOwnPropertySymbols(object)) {
      if (symbol.description === 'fastify.options') return (object as Record<symbol, { trustProxy?: unknown } | undefined>)[symbol];
    }
  }
  return undefined;
}

/**
 * Fastify's `trustProxy` server option (Fastify 4 and 5; NestJS on Fastify):
 * `request.server`. Fastify keeps it private: read once per instance, and
 * undefined when this Fastify keeps it elsewhere.
 *
 * @example
 * ```ts
 * createRateLimitFlow(options, { ..., trust: (request) => fastifyProxyTrust(request.server) });
 * ```
 */
export function fastifyProxyTrust(instance: unknown): ProxyTrust | undefined {
  if (typeof instance !== 'object' || instance === null) return undefined;
  let known = fastifyTrusts.get(instance);
  if (known === undefined) {
    const options = fastifyOptions(instance);
    const value = options?.trustProxy;
    const major = Number.parseInt(String((instance as { version?: unknown }).version), 10);
    if (options === undefined) known = null;
    else if (value === true) known = FASTIFY.all;
    else if (!value) known = FASTIFY.none;
    else if (typeof value === 'number') known = major >= 5 ? FASTIFY.counted : FASTIFY.some;
    else known = FASTIFY.some;
    fastifyTrusts.set(instance, known);
  }
  return known ?? undefined;
}

/**
 * A framework without a trust-proxy setting, whose client address is the TCP
 * peer's (Hono on Node): behind proxies, the key must come from their header.
 *
 * @example
 * ```ts
 * const socketOnly = socketOnlyProxyTrust('Hono');
 * createRateLimitFlow(options, { ..., trust: () => socketOnly });
 * ```
 */
export function socketOnlyProxyTrust(framework: string): ProxyTrust {
  return trust(
    'none',
    `${framework} has no trust-proxy setting: keyBy.ip() is the address of the connection`,
    'key by the header your proxies set: keyBy.forwardedFor({ hops: 1 }) with one proxy in front (see the keyBy presets for platforms)',
  );
}
