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
 */
function expressProxyTrust(app: unknown): ProxyTrust | undefined {
  const get = (app as { get?: unknown } | undefined)?.get;
  if (typeof get !== 'function') return undefined;
  const value: unknown = get.call(app, 'trust proxy');
  if (value === true) return EXPRESS.all;
  return value === false || value === undefined || value === 0 ? EXPRESS.none : EXPRESS.some;
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
 */
function fastifyProxyTrust(instance: unknown): ProxyTrust | undefined {
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
 * How far the framework of a request trusts proxies: Express's `trust proxy`
 * setting (`req.app`) or Fastify's `trustProxy` option (`request.server`), the
 * two frameworks NestJS runs on; undefined for a request of neither.
 *
 * @example
 * ```ts
 * createRateLimitFlow(options, { ..., trust: proxyTrustOf });
 * ```
 */
export function proxyTrustOf(request: unknown): ProxyTrust | undefined {
  if (typeof request !== 'object' || request === null) return undefined;
  const { app, server } = request as { app?: unknown; server?: unknown };
  // Fastify first: a Fastify instance has a get() too (it declares routes).
  return fastifyProxyTrust(server) ?? expressProxyTrust(app);
}
