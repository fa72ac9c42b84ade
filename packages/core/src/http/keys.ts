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
  /** A request header (names are lower case); several values joined with ', '. */
  header(name: string, ...args: Args): string | undefined;
}

/** A header as Node's IncomingMessage holds it (`req.headers[name]`), as one string: repeated values joined with ', '. */
export function joinHeader(value: string | readonly string[] | undefined): string | undefined {
  return typeof value === 'string' || value === undefined ? value : value.join(', ');
}

/** A function from a request to the key it is limited under. */
export type KeyFunction<Args extends unknown[]> = (...args: Args) => string | Promise<string>;

export interface IpKeyOptions {
  /**
   * IPv6 addresses are masked to this prefix length, so that one client
   * (who usually holds a /56 or a /64) cannot rotate through its addresses.
   * `false` keeps the full address. @defaultValue 56
   */
  ipv6Subnet?: number | false;
}

export interface ForwardedForOptions extends IpKeyOptions {
  /**
   * Which X-Forwarded-For entry is the client: counted from the right, 1 =
   * the last entry, the one your closest proxy appended. Set it to the number
   * of proxies you run. @defaultValue 1
   */
  hops?: number;
}

export interface HeaderKeyOptions<Args extends unknown[]> {
  /** Key for requests without the header. @defaultValue keyBy.ip() */
  fallback?: KeyFunction<Args>;
}

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
 * Only the four-part decimal form of IPv4 is accepted, so that `0x7f.1` and
 * friends cannot pose as another address.
 *
 * @example
 * ```ts
 * normalizeIp('::ffff:203.0.113.9'); // '203.0.113.9'
 * normalizeIp('2001:db8:1234:56ff::1'); // '2001:db8:1234:5600::/56'
 * ```
 */
export function normalizeIp(address: string | undefined, ipv6Subnet: number | false = 56): string | undefined {
  if (typeof address !== 'string') return undefined;
  const memo = memoFor(ipv6Subnet);
  const known = memo.get(address);
  if (known !== undefined) return known === null ? undefined : known;
  const key = canonicalIp(address.trim(), ipv6Subnet);
  // Cleared, not trimmed: deleting a Map's oldest entries one by one leaves it scanning their tombstones.
  if (memo.size >= MEMO_SIZE) memo.clear();
  memo.set(address, key ?? null);
  return key;
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
 * The X-Forwarded-For entry `hops` from the right, or undefined when the
 * header is absent, shorter than that, or that entry is not an address.
 */
export function forwardedAddress(header: string | undefined, hops: number): string | undefined {
  if (header === undefined || header === '') return undefined;
  const entries = header.split(',');
  const entry = entries[entries.length - hops];
  return entry === undefined ? undefined : entry.trim();
}

function missingIp(source: string): FloodgateError {
  return new FloodgateError(
    ErrorCodes.KEY,
    `keyBy.${source} found no client IP address on the request. On runtimes without a socket (Bun, Deno, Workers) pass the runtime's getConnInfo, or use keyBy.header() or a key function.`,
  );
}

/**
 * The key extractors of one framework, built from how it reads a request.
 * Adapters export the result as `keyBy`.
 */
export function createKeyBy<Args extends unknown[]>(reader: RequestReader<Args>) {
  const keyBy = {
    /**
     * The framework's own client address: Express `req.ip`, Koa `ctx.ip`, Hono
     * `getConnInfo`. It follows the framework's trust-proxy setting, so a
     * client cannot spoof it with a header while that is off.
     *
     * @example
     * ```ts
     * app.use(rateLimit({ limit: 100, windowMs: 60_000, key: keyBy.ip({ ipv6Subnet: 64 }) }));
     * ```
     */
    ip(options: IpKeyOptions = {}): KeyFunction<Args> {
      const subnet = checkSubnet(orDefault(options.ipv6Subnet, 56));
      return function ipKey(...args: Args): string {
        const key = normalizeIp(reader.clientIp(...args), subnet);
        if (key === undefined) throw missingIp('ip()');
        return key;
      };
    },

    /**
     * The address `hops` entries from the right of X-Forwarded-For — the one
     * your own proxies appended — or the socket address when there is none.
     * Use it when the framework's trust-proxy setting cannot express your
     * proxies.
     *
     * @example
     * ```ts
     * // Two proxies (CDN, then load balancer) in front of the app:
     * app.use(rateLimit({ limit: 100, windowMs: 60_000, key: keyBy.forwardedFor({ hops: 2 }) }));
     * ```
     */
    forwardedFor(options: ForwardedForOptions = {}): KeyFunction<Args> {
      const hops = orDefault(options.hops, 1);
      if (!Number.isInteger(hops) || hops < 1) {
        throw new FloodgateError(ErrorCodes.OPTION, `keyBy.forwardedFor hops must be an integer >= 1 (the number of proxies you run), got ${describe(hops)}.`);
      }
      const subnet = checkSubnet(orDefault(options.ipv6Subnet, 56));
      return function forwardedForKey(...args: Args): string {
        const forwarded = normalizeIp(forwardedAddress(reader.header('x-forwarded-for', ...args), hops), subnet);
        const key = forwarded ?? normalizeIp(reader.socketIp(...args), subnet);
        if (key === undefined) throw missingIp('forwardedFor()');
        return key;
      };
    },

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
    header(name: string, options: HeaderKeyOptions<Args> = {}): KeyFunction<Args> {
      if (typeof name !== 'string' || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) {
        throw new FloodgateError(ErrorCodes.OPTION, `keyBy.header needs a header name like 'x-user-id', got ${describe(name)}.`);
      }
      const lower = name.toLowerCase();
      const fallback = options.fallback === undefined ? keyBy.ip() : options.fallback;
      if (typeof fallback !== 'function') {
        throw new FloodgateError(ErrorCodes.OPTION, `keyBy.header fallback must be a key function, got ${describe(fallback)}.`);
      }
      return function headerKey(...args: Args): string | Promise<string> {
        const value = reader.header(lower, ...args)?.trim();
        return value ? `${lower}:${value}` : fallback(...args);
      };
    },
  };
  return keyBy;
}

export type KeyBy<Args extends unknown[]> = ReturnType<typeof createKeyBy<Args>>;
