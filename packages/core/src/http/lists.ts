import ipaddr from 'ipaddr.js';
import { describe, ErrorCodes, FloodgateError } from '../errors.js';
import { hostOf } from './keys.js';

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

function parseAddress(text: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  if (ipaddr.IPv4.isValidFourPartDecimal(text)) return ipaddr.IPv4.parse(text);
  if (!ipaddr.IPv6.isValid(text)) return undefined;
  const v6 = ipaddr.IPv6.parse(text);
  return v6.isIPv4MappedAddress() ? v6.toIPv4Address() : v6;
}

function parseRange(entry: unknown, where: string): Range {
  if (typeof entry === 'string') {
    const [address, bits, extra] = entry.trim().split('/');
    const parsed = address === undefined ? undefined : parseAddress(address);
    const max = parsed?.kind() === 'ipv4' ? 32 : 128;
    const prefix = bits === undefined ? max : Number(bits);
    if (parsed !== undefined && extra === undefined && Number.isInteger(prefix) && prefix >= 0 && prefix <= max && (bits === undefined || /^\d+$/.test(bits))) {
      return [parsed, prefix];
    }
  }
  throw new FloodgateError(
    ErrorCodes.OPTION,
    `${where} entries must be IP addresses or CIDR ranges like '10.0.0.0/8' or '2001:db8::/32', got ${describe(entry)}.`,
  );
}

/**
 * Compiles an allow/deny list once: a function `(clientIp, args) => Promise<boolean> | boolean`
 * that says whether the request is on the list. Arrays match the client IP
 * (IPv4-mapped IPv6 counts as IPv4); functions receive the request.
 */
export function compileAccessList<Args extends unknown[]>(
  list: unknown,
  where: string,
): ((clientIp: string | undefined, args: Args) => boolean | Promise<boolean>) | undefined {
  if (list === undefined) return undefined;
  if (typeof list === 'function') return (_ip, args) => (list as (...a: Args) => boolean | Promise<boolean>)(...args);
  if (!Array.isArray(list)) {
    throw new FloodgateError(ErrorCodes.OPTION, `${where} must be an array of IP addresses/CIDR ranges or a function of the request, got ${describe(list)}.`);
  }
  const ranges = list.map((entry) => parseRange(entry, where));
  return (clientIp) => {
    // With a port as a framework may pass it on from X-Forwarded-For (`203.0.113.9:4711`): the address is what is listed.
    const host = clientIp === undefined ? undefined : hostOf(clientIp);
    const address = host === undefined ? undefined : parseAddress(host);
    if (address === undefined) return false;
    return ranges.some(([range, bits]) => range.kind() === address.kind() && address.match(range, bits));
  };
}
