import fc from 'fast-check';
import ipaddr from 'ipaddr.js';
import { describe, expect, it } from 'vitest';
import { createKeyBy, forwardedAddress, normalizeIp, type RequestReader } from './keys.js';

/** The plain way to the same key, with ipaddr.js alone: the oracle for normalizeIp's single parse and its memo. */
function plainKey(address: string, ipv6Subnet: number | false): string | undefined {
  const text = address.trim();
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  if (ipaddr.IPv4.isValidFourPartDecimal(text)) parsed = ipaddr.IPv4.parse(text);
  else if (ipaddr.IPv6.isValid(text)) parsed = ipaddr.IPv6.parse(text);
  else return undefined;
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const v6 = parsed as ipaddr.IPv6;
  if (ipv6Subnet === false) return ipaddr.IPv6.parse(v6.toNormalizedString().replace(/%.*$/, '')).toString(); // without the zone id
  return `${ipaddr.IPv6.networkAddressFromCIDR(`${v6.toNormalizedString()}/${ipv6Subnet}`).toString()}/${ipv6Subnet}`;
}

describe('normalizeIp', () => {
  it.each([
    ['203.0.113.9', '203.0.113.9'],
    ['::ffff:203.0.113.9', '203.0.113.9'],
    ['::FFFF:203.0.113.9', '203.0.113.9'],
    [' 203.0.113.9 ', '203.0.113.9'],
    ['2001:db8:1234:56ff::1', '2001:db8:1234:5600::/56'],
    ['2001:0db8:1234:5600:ffff:ffff:ffff:ffff', '2001:db8:1234:5600::/56'],
    ['fe80::1%eth0', 'fe80::/56'],
    ['::1', '::/56'],
  ])('%s becomes %s', (input, expected) => {
    expect(normalizeIp(input)).toBe(expected);
  });

  it('masks to the subnet asked for, or not at all', () => {
    expect(normalizeIp('2001:db8:1234:56ff::1', 64)).toBe('2001:db8:1234:56ff::/64');
    expect(normalizeIp('2001:db8:1234:56ff::1', 128)).toBe('2001:db8:1234:56ff::1/128');
    expect(normalizeIp('2001:db8:1234:56ff::1', false)).toBe('2001:db8:1234:56ff::1');
    expect(normalizeIp('fe80::1%eth0', false)).toBe('fe80::1'); // one client, one key, whatever interface it came in on
  });

  it('gives the key ipaddr.js gives, for any address and prefix, first time and from its memo', () => {
    const address = fc.oneof(
      fc.ipV4(),
      fc.ipV6(),
      fc.ipV4().map((v4) => `::ffff:${v4}`),
      fc.ipV4Extended(),
      fc.string({ maxLength: 12 }),
      fc.ipV6().map((v6) => `${v6}%eth0`),
    );
    const prefix = fc.oneof(fc.integer({ min: 1, max: 128 }), fc.constant(false as const), fc.constant(56));
    fc.assert(
      fc.property(address, prefix, (input, bits) => {
        const expected = plainKey(input, bits);
        expect(normalizeIp(input, bits)).toBe(expected);
        expect(normalizeIp(input, bits)).toBe(expected); // the memo's answer
      }),
      { numRuns: 3000 },
    );
  });

  it('keeps its memo bounded: a stream of new addresses neither grows it nor changes an answer', () => {
    for (let i = 0; i < 25_000; i++) {
      const v6 = `2001:db8:${(i >> 8).toString(16)}:${(i & 255).toString(16)}::1`;
      expect(normalizeIp(v6, 64)).toBe(plainKey(v6, 64));
    }
    expect(normalizeIp('203.0.113.9', 64)).toBe('203.0.113.9');
  });

  it('refuses what is not an address, including IPv4 shorthands that would alias another address', () => {
    for (const input of ['', 'unknown', '1.2.3', '0x7f.1', '01.2.3.4', '1.2.3.4.5', '999.1.1.1', 'localhost', undefined]) {
      expect(normalizeIp(input)).toBeUndefined();
    }
  });
});

describe('forwardedAddress', () => {
  it('counts hops from the right', () => {
    expect(forwardedAddress('198.51.100.7, 10.0.0.1, 10.0.0.2', 1)).toBe('10.0.0.2');
    expect(forwardedAddress('198.51.100.7, 10.0.0.1, 10.0.0.2', 3)).toBe('198.51.100.7');
    expect(forwardedAddress('198.51.100.7, 10.0.0.1', 3)).toBeUndefined();
    expect(forwardedAddress(undefined, 1)).toBeUndefined();
  });
});

type Fake = { ip?: string; socket?: string; headers?: Record<string, string> };
const reader: RequestReader<[Fake]> = {
  clientIp: (r) => r.ip,
  socketIp: (r) => r.socket,
  header: (name, r) => r.headers?.[name],
};
const keyBy = createKeyBy(reader);

describe('keyBy', () => {
  it('ip() uses the framework client address, normalized', () => {
    expect(keyBy.ip()({ ip: '::ffff:192.0.2.1', headers: { 'x-forwarded-for': '6.6.6.6' } })).toBe('192.0.2.1');
    expect(() => keyBy.ip()({})).toThrow(expect.objectContaining({ code: 'ERR_FG_KEY' }));
  });

  it('forwardedFor() reads the entry the proxies appended, else the socket', () => {
    const key = keyBy.forwardedFor({ hops: 2 });
    expect(key({ socket: '10.0.0.9', headers: { 'x-forwarded-for': 'spoofed, 198.51.100.7, 10.0.0.1' } })).toBe('198.51.100.7');
    expect(key({ socket: '10.0.0.9', headers: { 'x-forwarded-for': '10.0.0.1' } })).toBe('10.0.0.9');
    expect(key({ socket: '10.0.0.9', headers: { 'x-forwarded-for': 'garbage, 10.0.0.1' } })).toBe('10.0.0.9');
    expect(key({ socket: '10.0.0.9' })).toBe('10.0.0.9');
  });

  it('header() namespaces the value and falls back when the header is missing', async () => {
    const key = keyBy.header('X-User-Id');
    expect(key({ ip: '192.0.2.1', headers: { 'x-user-id': ' 42 ' } })).toBe('x-user-id:42');
    expect(key({ ip: '192.0.2.1', headers: {} })).toBe('192.0.2.1');
    expect(await keyBy.header('x-api-key', { fallback: async () => 'anonymous' })({ headers: {} })).toBe('anonymous');
  });

  it.each([
    () => keyBy.ip({ ipv6Subnet: 0 }),
    () => keyBy.ip({ ipv6Subnet: 129 }),
    () => keyBy.forwardedFor({ hops: 0 }),
    () => keyBy.header('bad header'),
    () => keyBy.header('x', { fallback: 'ip' as never }),
  ])('rejects bad options with ERR_FG_OPTION (%#)', (build) => {
    expect(build).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
  });
});
