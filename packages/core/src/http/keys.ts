import ipaddr from 'ipaddr.js';
import { describe, ErrorCodes, FloodgateError, orDefault } from '../errors.js';

/**
 * How an adapter reads a request. `Args` is what the framework hands a
 * middleware: `[req, res]` in Express, `[ctx]` in Koa, `[c]` in Hono.
 */
export interface RequestReader<Args extends unknown[]> {
  /** The client address as the framework sees it (it follows the framework's trust-proxy setting). */
  clientIp(...args: Args): string | undefined;
  /** The address of the TCP peer, whatever the proxy settings. */
  socketIp(...args: Args): string | undefined;
  /** A request header (names are lower case): a string, or its values when the framework keeps them apart (Node's `req.headers`). */
  header(name: string, ...args: Args): string | readonly string[] | undefined;
}

/** A header as Node's IncomingMessage holds it (`req.headers[name]`), as one string: repeated values joined with ', '. */
export function joinHeader(value: string | readonly string[] | undefined): string | undefined {
  return typeof value === 'string' || value === undefined ? value : value.join(', ');
}

/** A RequestReader whose headers are one string each. */
type Reader<Args extends unknown[]> = Omit<RequestReader<Args>, 'header'> & { header(name: string, ...args: Args): string | undefined };

/** A function from a request to the key it is limited under. */
export type KeyFunction<Args extends unknown[]> = (...args: Args) => string | Promise<string>;

function checkSubnet(ipv6Subnet: unknown): number | false {
  if (ipv6Subnet === false) return false;
  if (typeof ipv6Subnet !== 'number' || !Number.isInteger(ipv6Subnet) || ipv6Subnet < 1 || ipv6Subnet > 128) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `ipv6Subnet must be an integer from 1 to 128, or false to keep full IPv6 addresses, got ${describe(ipv6Subnet)}.`,
    );
  }
  return ipv6Subnet;
}

/**
 * Canonical form of an address for use as a key, or undefined when it is not
 * an IP address. IPv4-mapped IPv6 (`::ffff:1.2.3.4`) becomes `1.2.3.4`; IPv6
 * is masked to `ipv6Subnet` bits and written as a CIDR (`2001:db8:0:100::/56`).
 * A port is dropped (`1.2.3.4:80`, `[2001:db8::1]:80`: see `hostOf`).
 * Only the four-part decimal form of IPv4 is accepted, so that `0x7f.1` and
 * friends cannot pose as another address.
 *
 * @example
 * ```ts
 * normalizeIp('::ffff:203.0.113.9'); // '203.0.113.9'
 * normalizeIp('2001:db8:1234:56ff::1'); // '2001:db8:1234:5600::/56'
 * normalizeIp('[2001:db8::1]:4711', false); // '2001:db8::1'
 * ```
 */
export function normalizeIp(address: string | undefined, ipv6Subnet: number | false = 56): string | undefined {
  if (typeof address !== 'string') return undefined;
  const memo = memoFor(ipv6Subnet);
  const known = memo.get(address);
  if (known !== undefined) return known === null ? undefined : known;
  const text = address.trim();
  // An address with a port (`203.0.113.9:4711`, `[2001:db8::1]:4711`) is the same client: one parse more, once per text.
  const key = canonicalIp(text, ipv6Subnet) ?? canonicalWithoutPort(text, ipv6Subnet);
  // Cleared, not trimmed: deleting a Map's oldest entries one by one leaves it scanning their tombstones.
  if (memo.size >= MEMO_SIZE) memo.clear();
  memo.set(address, key ?? null);
  return key;
}

function canonicalWithoutPort(text: string, ipv6Subnet: number | false): string | undefined {
  const host = hostOf(text);
  return host === undefined || host === text ? undefined : canonicalIp(host, ipv6Subnet);
}

/** normalizeIp without the memo: one parse with ipaddr.js, IPv6 masked part by part. */
function canonicalIp(text: string, ipv6Subnet: number | false): string | undefined {
  if (isFourPartDecimal(text)) return ipaddr.IPv4.parse(text).toString();
  // How a dual-stack server reports an IPv4 client: only the IPv4 part needs parsing.
  if (text.length > MAPPED_PREFIX.length && text.slice(0, MAPPED_PREFIX.length).toLowerCase() === MAPPED_PREFIX) {
    const v4 = text.slice(MAPPED_PREFIX.length);
    if (isFourPartDecimal(v4)) return ipaddr.IPv4.parse(v4).toString();
  }
  let v6: ipaddr.IPv6;
  try {
    v6 = ipaddr.IPv6.parse(text); // one parse: isValid() would parse it too
  } catch {
    return undefined;
  }
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().toString();
  // A new address from the parts drops a zone id (`fe80::1%eth0`): one client, one key.
  if (ipv6Subnet === false) return new ipaddr.IPv6(v6.parts).toString();
  const mask = subnetMask(ipv6Subnet);
  return `${new ipaddr.IPv6(v6.parts.map((part, i) => part & (mask[i] as number))).toString()}/${ipv6Subnet}`;
}

const MAPPED_PREFIX = '::ffff:';

/**
 * ipaddr.js's isValidFourPartDecimal with its own pattern tested first: the
 * same answer, but a string that is not dotted decimal (every IPv6 address)
 * skips the validity check, which throws and catches to say no.
 */
const FOUR_PART_DECIMAL = /^(0|[1-9]\d*)(\.(0|[1-9]\d*)){3}$/;
const isFourPartDecimal = (text: string): boolean => FOUR_PART_DECIMAL.test(text) && ipaddr.IPv4.isValidFourPartDecimal(text);

const masks = new Map<number, readonly number[]>();
function subnetMask(bits: number): readonly number[] {
  let mask = masks.get(bits);
  if (mask === undefined) {
    mask = ipaddr.IPv6.subnetMaskFromPrefixLength(bits).parts;
    masks.set(bits, mask);
  }
  return mask;
}

/*
 * Addresses already seen, per IPv6 prefix length: parsing costs microseconds
 * (more for IPv6 and for the ::ffff: form a dual-stack server reports), and a
 * server sees the same clients over and over. Bounded: a full memo starts
 * over, so rotating addresses cost a parse each, never memory.
 */
const MEMO_SIZE = 10_000;
const fullMemo = new Map<string, string | null>();
const subnetMemos = new Map<number, Map<string, string | null>>();

function memoFor(ipv6Subnet: number | false): Map<string, string | null> {
  if (ipv6Subnet === false) return fullMemo;
  let memo = subnetMemos.get(ipv6Subnet);
  if (memo === undefined) {
    memo = new Map();
    subnetMemos.set(ipv6Subnet, memo);
  }
  return memo;
}

/**
 * The address in an entry that may carry a port, as proxies and platforms write
 * them: `203.0.113.9:4711` and `[2001:db8::1]:4711` give the address alone, a
 * bracketed IPv6 without port loses its brackets, anything else is returned as
 * it is (a bare IPv6 such as `2001:db8::80` keeps its last group: only brackets
 * set a port apart from IPv6). The port may be RFC 7239's obfuscated form
 * (`_abc`). Undefined when brackets or port are malformed. The address itself is
 * not checked: `normalizeIp` does that.
 *
 * @example
 * ```ts
 * hostOf('203.0.113.9:4711'); // '203.0.113.9'
 * hostOf('[2001:db8::1]:4711'); // '2001:db8::1'
 * hostOf('2001:db8::1'); // '2001:db8::1'
 * ```
 */
export function hostOf(entry: string): string | undefined {
  const text = entry.trim();
  if (text.startsWith('[')) {
    const end = text.indexOf(']');
    if (end < 0) return undefined;
    const rest = text.slice(end + 1);
    return rest === '' || (rest[0] === ':' && isPort(rest.slice(1))) ? text.slice(1, end) : undefined;
  }
  const colon = text.indexOf(':');
  // One colon: IPv4 (or a name) and a port. Two or more: IPv6, whose last group is no port.
  if (colon < 0 || text.indexOf(':', colon + 1) >= 0) return text;
  return isPort(text.slice(colon + 1)) ? text.slice(0, colon) : undefined;
}

const PORT = /^(\d{1,5}|_[A-Za-z0-9._-]+)$/;
const isPort = (text: string): boolean => PORT.test(text) && (text[0] === '_' || Number(text) <= 65_535);

/**
 * The X-Forwarded-For entry `hops` from the right, trimmed, or undefined when
 * the header is absent or shorter than that. The entry is what a proxy wrote:
 * an address, perhaps with a port, or anything else (`normalizeIp` says which).
 */
export function forwardedAddress(header: string | undefined, hops: number): string | undefined {
  if (header === undefined || header === '') return undefined;
  const entries = header.split(',');
  const entry = entries[entries.length - hops];
  return entry === undefined ? undefined : entry.trim();
}

/** `text` split at `separator` where it is not inside a quoted string (RFC 9110 quoted-string, with backslash escapes). */
function splitUnquoted(text: string, separator: string): string[] {
  const parts: string[] = [];
  let start = 0;
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const char = text[i];
    if (quoted && char === '\\') i++;
    else if (char === '"') quoted = !quoted;
    else if (!quoted && char === separator) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts;
}

/** A token or a quoted string, as the text it stands for; undefined for an unterminated quote. */
function unquote(value: string): string | undefined {
  if (!value.startsWith('"')) return value;
  if (value.length < 2 || !value.endsWith('"')) return undefined;
  return value.slice(1, -1).replace(/\\(.)/g, '$1');
}

/**
 * The `for=` value of the RFC 7239 `Forwarded` element `hops` from the right,
 * unquoted (`"[2001:db8::1]:4711"` gives `[2001:db8::1]:4711`), or undefined
 * when the header is absent or has fewer elements. An element without `for=`
 * gives `''`. Each proxy appends one element; `unknown` and obfuscated
 * identifiers (`_hidden`) are returned as written, and are no address.
 *
 * @example
 * ```ts
 * forwardedFor('for=192.0.2.60;proto=https, for="[2001:db8:cafe::17]:4711"', 1); // '[2001:db8:cafe::17]:4711'
 * ```
 */
export function forwardedFor(header: string | undefined, hops: number): string | undefined {
  if (header === undefined || header.trim() === '') return undefined;
  const elements = splitUnquoted(header, ',');
  const element = elements[elements.length - hops];
  if (element === undefined) return undefined;
  for (const pair of splitUnquoted(element, ';')) {
    const equals = pair.indexOf('=');
    if (equals > 0 && pair.slice(0, equals).trim().toLowerCase() === 'for') return unquote(pair.slice(equals + 1).trim()) ?? '';
  }
  return '';
}

/**
 * The address in CloudFront's `CloudFront-Viewer-Address` (`198.51.100.10:46532`),
 * which always ends with the viewer's port, also after an IPv6 address without
 * brackets (`2001:db8::1:46532`).
 */
function viewerAddress(value: string): string | undefined {
  const text = value.trim();
  const last = text.lastIndexOf(':');
  if (text.startsWith('[') || text.indexOf(':') === last) return hostOf(text);
  return isPort(text.slice(last + 1)) ? text.slice(0, last) : undefined;
}

/** What a key extractor could not read on a request: the limiter's `forwardedAddress` check reports it. */
export interface UnreadAddress {
  /** The extractor, as the user wrote it: `keyBy.forwardedFor()`. */
  readonly extractor: string;
  /** Where the value came from: `X-Forwarded-For`, `Forwarded`, `the framework's client address`. */
  readonly source: string;
  /** The entry as written (client-supplied text: quote it, never trust it). */
  readonly value: string;
}

/**
 * Entries the extractors could not read, by request (what a middleware gets
 * first: Express's req, Koa's ctx, Hono's c, a Request): the limiter that
 * keys the request reads it once its key is known. Weak, so nothing outlives
 * its request; written only on the rare path where an entry is unreadable.
 */
const unread = new WeakMap<object, UnreadAddress>();

function noteUnread(request: unknown, note: UnreadAddress): void {
  if (typeof request === 'object' && request !== null) unread.set(request, note);
}

/** The address a key extractor could not read on this request, if any. */
export function unreadAddressOf(request: unknown): UnreadAddress | undefined {
  return typeof request === 'object' && request !== null ? unread.get(request) : undefined;
}

/**
 * Key functions that read the framework's client address (keyBy.ip(), and
 * keyBy.header() falling back to it) or that read something else (the
 * presets): what the limiter's proxy checks need to know about its key.
 */
const readsClientIp = new WeakMap<object, boolean>();

/**
 * Whether a key reads the framework's client address: true for `keyBy.ip()`
 * and `keyBy.header()` with its default fallback, false for the other
 * extractors, undefined for a function of your own (it might). An object of
 * key functions reads it when one of them does.
 */
export function keyReadsClientIp(key: unknown): boolean | undefined {
  if (typeof key === 'function') return readsClientIp.get(key);
  if (typeof key !== 'object' || key === null) return undefined;
  let answer: boolean | undefined = false;
  for (const value of Object.values(key)) {
    const reads = keyReadsClientIp(value);
    if (reads === true) return true;
    if (reads === undefined) answer = undefined;
  }
  return answer;
}

function tagged<F extends object>(key: F, clientIp: boolean | undefined): F {
  if (clientIp !== undefined) readsClientIp.set(key, clientIp);
  return key;
}

function missingIp(source: string): FloodgateError {
  return new FloodgateError(
    ErrorCodes.KEY,
    `keyBy.${source} found no client IP address on the request. On runtimes without a socket (Bun, Deno, Workers) pass the runtime's getConnInfo, or use keyBy.header() or a key function.`,
  );
}

function checkHops(hops: unknown, extractor: string, header: string): number {
  if (typeof hops !== 'number' || !Number.isInteger(hops) || hops < 1) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `${extractor} hops must be an integer >= 1 (the number of proxies you run, each appending one ${header} entry), got ${describe(hops)}.`,
    );
  }
  return hops;
}

/**
 * A platform's edge puts the client address in a header of its own on every
 * request it forwards. A request without it (or with something else in it)
 * did not come through that edge: the app is elsewhere, or the request went
 * around the edge. Either way no client address can be trusted, and keying it
 * by the connection would put every such request in one bucket without a
 * word: it is an ERR_FG_KEY (500) naming the header.
 */
function platformPreset<Args extends unknown[]>(
  preset: string,
  platform: string,
  headers: readonly string[],
  reader: Reader<Args>,
  read: (value: string) => string | undefined = hostOf,
) {
  return (
    options: {
      /** IPv6 addresses are masked to this prefix length (`false`: the full address). @defaultValue 56 */
      ipv6Subnet?: number | false;
    } = {},
  ): KeyFunction<Args> => {
    const subnet = checkSubnet(orDefault(options.ipv6Subnet, 56));
    return tagged(function platformKey(...args: Args): string {
      let value: string | undefined;
      for (const name of headers) {
        value = reader.header(name, ...args);
        if (value !== undefined) break;
      }
      const address = value === undefined ? undefined : read(value);
      const key = address === undefined ? undefined : normalizeIp(address, subnet);
      if (key !== undefined) return key;
      throw new FloodgateError(
        ErrorCodes.KEY,
        `keyBy.${preset}() found ${value === undefined ? `no ${headers.join(' or ')} header` : `no IP address in ${headers.join(' or ')} (${describe(value)})`} on the request: ${platform} sets it on every request it forwards, so this one did not come through ${platform}. Use keyBy.${preset}() only behind ${platform}, and let the app take requests from ${platform} alone.`,
      );
    }, false);
  };
}

/**
 * The key extractors of one framework, built from how it reads a request.
 * Adapters export the result as `keyBy`.
 */
export function createKeyBy<Args extends unknown[]>(given: RequestReader<Args>) {
  const reader: Reader<Args> = {
    clientIp: (...args) => given.clientIp(...args),
    socketIp: (...args) => given.socketIp(...args),
    header: (name, ...args) => joinHeader(given.header(name, ...args)),
  };
  /**
   * The socket address, for requests whose proxy header is absent or too short
   * (they did not pass all the proxies), or unreadable (noted for the limiter's
   * `forwardedAddress` warning: the proxy's address is one bucket for all).
   */
  function throughProxies(args: Args, entry: string | undefined, subnet: number | false, extractor: string, source: string): string {
    if (entry !== undefined) {
      const key = normalizeIp(entry, subnet);
      if (key !== undefined) return key;
      noteUnread(args[0], { extractor, source, value: entry });
    }
    const key = normalizeIp(reader.socketIp(...args), subnet);
    if (key === undefined) throw missingIp(extractor.slice('keyBy.'.length));
    return key;
  }

  const keyBy = {
    /**
     * The framework's own client address: Express `req.ip`, Koa `ctx.ip`, Hono
     * `getConnInfo`. It follows the framework's trust-proxy setting, so a
     * client cannot spoof it with a header while that is off. A port is
     * dropped; an address the framework took from a proxy header and that is
     * none (`unknown`) gives the socket address, and the limiter warns once.
     *
     * @example
     * ```ts
     * app.use(rateLimit({ limit: 100, windowMs: 60_000, key: keyBy.ip({ ipv6Subnet: 64 }) }));
     * ```
     */
    ip(
      options: {
        /**
         * IPv6 addresses are masked to this prefix length, so that one client
         * (who usually holds a /56 or a /64) cannot rotate through its addresses.
         * `false` keeps the full address. @defaultValue 56
         */
        ipv6Subnet?: number | false;
      } = {},
    ): KeyFunction<Args> {
      const subnet = checkSubnet(orDefault(options.ipv6Subnet, 56));
      return tagged(function ipKey(...args: Args): string {
        const address = reader.clientIp(...args);
        const key = normalizeIp(address, subnet);
        if (key !== undefined) return key;
        if (address === undefined || address === '') throw missingIp('ip()');
        return throughProxies(args, address, subnet, 'keyBy.ip()', "the framework's client address");
      }, true);
    },

    /**
     * The address `hops` entries from the right of X-Forwarded-For — the one
     * your own proxies appended — or the socket address when there is none.
     * Use it when the framework's trust-proxy setting cannot express your
     * proxies, and behind an AWS Application Load Balancer (`hops: 1`; it
     * appends the client address, with its port when `routing.http.xff_client_port.enabled`).
     * An entry that is no address (the limiter warns once) gives the socket address.
     *
     * @example
     * ```ts
     * // Two proxies (CDN, then load balancer) in front of the app:
     * app.use(rateLimit({ limit: 100, windowMs: 60_000, key: keyBy.forwardedFor({ hops: 2 }) }));
     * ```
     */
    forwardedFor(
      options: {
        /**
         * Which entry is the client: counted from the right, 1 = the last
         * entry, the one your closest proxy appended. Set it to the number of
         * proxies you run. @defaultValue 1
         */
        hops?: number;
        /** IPv6 addresses are masked to this prefix length (`false`: the full address). @defaultValue 56 */
        ipv6Subnet?: number | false;
      } = {},
    ): KeyFunction<Args> {
      const hops = checkHops(orDefault(options.hops, 1), 'keyBy.forwardedFor', 'X-Forwarded-For');
      const subnet = checkSubnet(orDefault(options.ipv6Subnet, 56));
      return tagged(function forwardedForKey(...args: Args): string {
        const entry = forwardedAddress(reader.header('x-forwarded-for', ...args), hops);
        return throughProxies(args, entry, subnet, 'keyBy.forwardedFor()', 'X-Forwarded-For');
      }, false);
    },

    /**
     * The `for=` address of the standard `Forwarded` header (RFC 7239) in the
     * element `hops` from the right — the one your own proxies appended — or the
     * socket address when there is none. Quoted IPv6 with a port
     * (`for="[2001:db8::1]:4711"`) is read; `for=unknown` and obfuscated
     * identifiers (`for=_hidden`) are no address: they give the socket address,
     * and the limiter warns once.
     *
     * @example
     * ```ts
     * app.use(rateLimit({ limit: 100, windowMs: 60_000, key: keyBy.forwarded({ hops: 1 }) }));
     * ```
     */
    forwarded(
      options: {
        /**
         * Which entry is the client: counted from the right, 1 = the last
         * entry, the one your closest proxy appended. Set it to the number of
         * proxies you run. @defaultValue 1
         */
        hops?: number;
        /** IPv6 addresses are masked to this prefix length (`false`: the full address). @defaultValue 56 */
        ipv6Subnet?: number | false;
      } = {},
    ): KeyFunction<Args> {
      const hops = checkHops(orDefault(options.hops, 1), 'keyBy.forwarded', 'Forwarded');
      const subnet = checkSubnet(orDefault(options.ipv6Subnet, 56));
      return tagged(function forwardedKey(...args: Args): string {
        const entry = forwardedFor(reader.header('forwarded', ...args), hops);
        return throughProxies(args, entry, subnet, 'keyBy.forwarded()', 'Forwarded');
      }, false);
    },

    /**
     * Cloudflare's `cf-connecting-ip`: the address that connected to
     * Cloudflare's edge (Workers, or any origin behind Cloudflare's proxy). A
     * request without it did not come through Cloudflare: ERR_FG_KEY.
     *
     * @example
     * ```ts
     * app.use(rateLimit({ limit: 100, windowMs: 60_000, key: keyBy.cloudflare() }));
     * ```
     */
    cloudflare: platformPreset<Args>('cloudflare', 'Cloudflare', ['cf-connecting-ip'], reader),

    /**
     * Fly.io's `fly-client-ip`, set by Fly's proxy. A request without it did
     * not come through Fly's proxy: ERR_FG_KEY.
     *
     * @example
     * ```ts
     * app.use(rateLimit({ limit: 100, windowMs: 60_000, key: keyBy.fly() }));
     * ```
     */
    fly: platformPreset<Args>('fly', 'Fly.io', ['fly-client-ip'], reader),

    /**
     * Vercel's `x-vercel-forwarded-for`, else `x-real-ip` (what Vercel's own
     * `ipAddress()` reads): the client address, set by Vercel's edge, which also
     * overwrites `X-Forwarded-For`; `x-vercel-forwarded-for` stays right when
     * a proxy of yours in front of Vercel rewrites X-Forwarded-For. A request
     * with neither did not come through Vercel: ERR_FG_KEY.
     *
     * @example
     * ```ts
     * export const GET = withRateLimit(handler, { limit: 10, windowMs: 60_000, key: keyBy.vercel() });
     * ```
     */
    vercel: platformPreset<Args>('vercel', 'Vercel', ['x-vercel-forwarded-for', 'x-real-ip'], reader),

    /**
     * Amazon CloudFront's `CloudFront-Viewer-Address` (`198.51.100.10:46532`:
     * the viewer's address and port), which CloudFront adds when the origin
     * request policy includes it. A request without it did not come through
     * CloudFront (or the policy leaves it out): ERR_FG_KEY. Without that policy,
     * CloudFront appends the viewer to X-Forwarded-For: `keyBy.forwardedFor({ hops })`.
     *
     * @example
     * ```ts
     * app.use(rateLimit({ limit: 100, windowMs: 60_000, key: keyBy.cloudfront() }));
     * ```
     */
    cloudfront: platformPreset<Args>('cloudfront', 'CloudFront', ['cloudfront-viewer-address'], reader, viewerAddress),

    /**
     * The value of a request header, such as a user id your auth layer sets:
     * `x-user-id: 42` gives the key `x-user-id:42`. Requests without it fall
     * back to `fallback` (the client IP by default).
     *
     * @example
     * ```ts
     * app.post('/sms', rateLimit({ rules, key: keyBy.header('x-user-id') }), send);
     * ```
     */
    header(
      name: string,
      options: {
        /** Key for requests without the header. @defaultValue keyBy.ip() */
        fallback?: KeyFunction<Args>;
      } = {},
    ): KeyFunction<Args> {
      if (typeof name !== 'string' || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) {
        throw new FloodgateError(ErrorCodes.OPTION, `keyBy.header needs a header name like 'x-user-id', got ${describe(name)}.`);
      }
      const lower = name.toLowerCase();
      const fallback = options.fallback === undefined ? keyBy.ip() : options.fallback;
      if (typeof fallback !== 'function') {
        throw new FloodgateError(ErrorCodes.OPTION, `keyBy.header fallback must be a key function, got ${describe(fallback)}.`);
      }
      return tagged(function headerKey(...args: Args): string | Promise<string> {
        const value = reader.header(lower, ...args)?.trim();
        return value ? `${lower}:${value}` : fallback(...args);
      }, keyReadsClientIp(fallback));
    },
  };
  return keyBy;
}

export type KeyBy<Args extends unknown[]> = ReturnType<typeof createKeyBy<Args>>;
