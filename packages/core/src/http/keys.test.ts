import fc from 'fast-check';
import ipaddr from 'ipaddr.js';
import { describe, expect, it } from 'vitest';
import { createKeyBy, forwardedAddress, forwardedFor, hostOf, keyReadsClientIp, normalizeIp, type RequestReader, unreadAddressOf } from './keys.js';

/** The plain way to the same key, with ipaddr.js alone: the oracle for normalizeIp's single parse and its memo. */
function plainKey(address: string, ipv6Subnet: number | false): string | undefined {
  // A port after IPv4 or bracketed IPv6 is dropped; brackets alone too.
  const text = address.trim().replace(/^\[([^\]]*)\](?::\d{1,5})?$|^([\d.]+):\d{1,5}$/, (_, v6, v4) => v6 ?? v4);
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
      fc.tuple(fc.ipV4(), fc.integer({ min: 0, max: 65_535 })).map(([v4, port]) => `${v4}:${port}`),
      fc.tuple(fc.ipV6(), fc.integer({ min: 0, max: 65_535 })).map(([v6, port]) => `[${v6}]:${port}`),
      fc.ipV6().map((v6) => `[${v6}]`),
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
    // One expect at the end: 25,000 of them take seconds on a busy machine.
    const wrong: string[] = [];
    for (let i = 0; i < 25_000; i++) {
      const v6 = `2001:db8:${(i >> 8).toString(16)}:${(i & 255).toString(16)}::1`;
      if (normalizeIp(v6, 64) !== plainKey(v6, 64)) wrong.push(v6);
    }
    expect(wrong).toEqual([]);
    expect(normalizeIp('203.0.113.9', 64)).toBe('203.0.113.9');
  }, 30_000);

  it('drops a port: 1.2.3.4:80 and [2001:db8::1]:80 are the addresses, a bare IPv6 keeps its last group', () => {
    expect(normalizeIp('203.0.113.9:4711')).toBe('203.0.113.9');
    expect(normalizeIp('[2001:db8::1]:4711', false)).toBe('2001:db8::1');
    expect(normalizeIp('[::ffff:203.0.113.9]:80')).toBe('203.0.113.9');
    expect(normalizeIp('[2001:db8::1]', false)).toBe('2001:db8::1');
    expect(normalizeIp('2001:db8::1:80', false)).toBe('2001:db8::1:80');
  });

  it('refuses what is not an address, including IPv4 shorthands that would alias another address', () => {
    const notAddresses = ['', 'unknown', '_hidden', '1.2.3', '0x7f.1', '01.2.3.4', '1.2.3.4.5', '999.1.1.1', 'localhost', 'localhost:80'];
    const badPorts = ['1.2.3.4:', '1.2.3.4:65536', '1.2.3.4:8o', '[2001:db8::1]:', '[2001:db8::1', '[2001:db8::1]80', '[garbage]:80'];
    for (const input of [...notAddresses, ...badPorts, undefined]) {
      expect(normalizeIp(input)).toBeUndefined();
    }
  });
});

describe('hostOf', () => {
  it.each([
    ['203.0.113.9:4711', '203.0.113.9'],
    [' 203.0.113.9:80 ', '203.0.113.9'],
    ['[2001:db8::1]:4711', '2001:db8::1'],
    ['[2001:db8::1]', '2001:db8::1'],
    ['[2001:db8::1]:_port', '2001:db8::1'],
    ['203.0.113.9:_obf', '203.0.113.9'],
    ['2001:db8::1:80', '2001:db8::1:80'],
    ['::1', '::1'],
    ['unknown', 'unknown'],
    ['1.2.3.4:99999', undefined],
    ['1.2.3.4:', undefined],
    ['[::1', undefined],
    ['[::1]x', undefined],
  ])('%s gives %s', (entry, host) => {
    expect(hostOf(entry)).toBe(host);
  });
});

describe('forwardedFor (RFC 7239)', () => {
  it("gives the for= value of the element hops from the right, unquoted, '' without one, undefined when too short", () => {
    const header = 'for=192.0.2.43, for="[2001:db8:cafe::17]:4711";proto=https, proto=http;by=10.0.0.1';
    expect(forwardedFor(header, 3)).toBe('192.0.2.43');
    expect(forwardedFor(header, 2)).toBe('[2001:db8:cafe::17]:4711');
    expect(forwardedFor(header, 1)).toBe('');
    expect(forwardedFor(header, 4)).toBeUndefined();
    expect(forwardedFor(undefined, 1)).toBeUndefined();
    expect(forwardedFor(' ', 1)).toBeUndefined();
  });

  it('reads names in any case, quoted strings with commas, semicolons and escapes, and whitespace around elements', () => {
    expect(forwardedFor('FOR=198.51.100.1', 1)).toBe('198.51.100.1');
    expect(forwardedFor('by="a,b;c";for="198.51.100.\\2" ,  for=unknown', 2)).toBe('198.51.100.2');
    expect(forwardedFor('for=_hidden', 1)).toBe('_hidden');
    expect(forwardedFor('for="unterminated', 1)).toBe('');
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

  it('ip() drops a port; an address that is none gives the socket address, noted on the request for the limiter', () => {
    expect(keyBy.ip()({ ip: '198.51.100.7:4711', socket: '10.0.0.9' })).toBe('198.51.100.7');
    const request = { ip: 'unknown', socket: '10.0.0.9' };
    expect(keyBy.ip()(request)).toBe('10.0.0.9');
    expect(unreadAddressOf(request)).toEqual({ extractor: 'keyBy.ip()', source: "the framework's client address", value: 'unknown' });
    expect(() => keyBy.ip()({ ip: 'unknown' })).toThrow(expect.objectContaining({ code: 'ERR_FG_KEY' }));
  });

  it('forwardedFor() notes an entry that is no address; a missing or short header is no problem', () => {
    const key = keyBy.forwardedFor({ hops: 2 });
    const unreadable = { socket: '10.0.0.9', headers: { 'x-forwarded-for': 'spoof, _hidden, 10.0.0.1' } };
    expect(key(unreadable)).toBe('10.0.0.9');
    expect(unreadAddressOf(unreadable)).toEqual({ extractor: 'keyBy.forwardedFor()', source: 'X-Forwarded-For', value: '_hidden' });
    const short = { socket: '10.0.0.9', headers: { 'x-forwarded-for': '10.0.0.1' } };
    expect(key(short)).toBe('10.0.0.9');
    expect(unreadAddressOf(short)).toBeUndefined();
  });

  it('forwarded() reads the for= address hops from the right, else the socket', () => {
    const key = keyBy.forwarded({ hops: 2, ipv6Subnet: 64 });
    const at = (forwarded?: string) => key({ socket: '10.0.0.9', headers: forwarded === undefined ? {} : { forwarded } });
    expect(at('for=spoof, for="[2001:db8:cafe:17::1]:4711", for=10.0.0.1')).toBe('2001:db8:cafe:17::/64');
    expect(at('for=198.51.100.7;proto=https, for=10.0.0.1')).toBe('198.51.100.7');
    expect(at('for=10.0.0.1')).toBe('10.0.0.9');
    expect(at()).toBe('10.0.0.9');
    expect(at('for=unknown, for=10.0.0.1')).toBe('10.0.0.9');
  });

  it('platform presets read their header, normalized, and refuse a request without it (ERR_FG_KEY naming the header)', () => {
    const at = (headers: Record<string, string>) => ({ ip: '10.0.0.9', socket: '10.0.0.9', headers });
    expect(keyBy.cloudflare()(at({ 'cf-connecting-ip': '::ffff:203.0.113.7' }))).toBe('203.0.113.7');
    expect(keyBy.fly({ ipv6Subnet: false })(at({ 'fly-client-ip': '2001:db8::1' }))).toBe('2001:db8::1');
    expect(keyBy.vercel()(at({ 'x-vercel-forwarded-for': '198.51.100.1', 'x-real-ip': '198.51.100.2' }))).toBe('198.51.100.1');
    expect(keyBy.vercel()(at({ 'x-real-ip': '198.51.100.2' }))).toBe('198.51.100.2');
    expect(keyBy.cloudfront()(at({ 'cloudfront-viewer-address': '198.51.100.10:46532' }))).toBe('198.51.100.10');
    expect(keyBy.cloudfront({ ipv6Subnet: false })(at({ 'cloudfront-viewer-address': '2001:db8::1:46532' }))).toBe('2001:db8::1');
    expect(() => keyBy.cloudflare()(at({}))).toThrow(
      expect.objectContaining({ code: 'ERR_FG_KEY', message: expect.stringContaining('no cf-connecting-ip header') }),
    );
    expect(() => keyBy.vercel()(at({ 'x-forwarded-for': '198.51.100.1' }))).toThrow(
      expect.objectContaining({ message: expect.stringContaining('no x-vercel-forwarded-for or x-real-ip header') }),
    );
    expect(() => keyBy.fly()(at({ 'fly-client-ip': 'unknown' }))).toThrow(
      expect.objectContaining({ message: expect.stringContaining('no IP address in fly-client-ip ("unknown")') }),
    );
  });

  it('knows which extractors read the framework client address', () => {
    expect(keyReadsClientIp(keyBy.ip())).toBe(true);
    expect(keyReadsClientIp(keyBy.header('x-user-id'))).toBe(true);
    expect(keyReadsClientIp(keyBy.header('x-user-id', { fallback: keyBy.cloudflare() }))).toBe(false);
    expect(keyReadsClientIp(keyBy.header('x-user-id', { fallback: () => 'anonymous' }))).toBeUndefined();
    for (const key of [keyBy.forwardedFor(), keyBy.forwarded(), keyBy.cloudflare(), keyBy.fly(), keyBy.vercel(), keyBy.cloudfront()]) {
      expect(keyReadsClientIp(key)).toBe(false);
    }
    expect(keyReadsClientIp(() => 'k')).toBeUndefined();
    expect(keyReadsClientIp({ ip: keyBy.ip(), user: keyBy.header('x-user-id') })).toBe(true);
    expect(keyReadsClientIp({ ip: keyBy.cloudflare(), user: () => 'u' })).toBeUndefined();
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
    () => keyBy.forwarded({ hops: 1.5 }),
    () => keyBy.cloudflare({ ipv6Subnet: 0 }),
    () => keyBy.header('bad header'),
    () => keyBy.header('x', { fallback: 'ip' as never }),
  ])('rejects bad options with ERR_FG_OPTION (%#)', (build) => {
    expect(build).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
  });
});
