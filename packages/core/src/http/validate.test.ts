import { captureWarnings } from '@floodgate/test-support';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createKeyBy, type RequestReader } from './keys.js';
import type { ProxyTrust } from './proxy-trust.js';
import { createValidations, emitWarning, FloodgateWarning, SINGLE_KEY_WINDOW } from './validate.js';

type Fake = { ip?: string; socket?: string; headers?: Record<string, string>; trust?: ProxyTrust['level'] };
const reader: RequestReader<[Fake]> = {
  clientIp: (r) => r.ip,
  socketIp: (r) => r.socket,
  header: (name, r) => r.headers?.[name],
};
const keyBy = createKeyBy(reader);
const setting = (level: ProxyTrust['level']): ProxyTrust => ({
  level,
  setting: `Test trusts ${level} proxies (test.proxies = '${level}')`,
  fix: 'set test.proxies = 1',
});
const levels = { none: setting('none'), some: setting('some'), all: setting('all') };
const facts = { header: reader.header, trust: (r: Fake) => (r.trust === undefined ? undefined : levels[r.trust]) };

let warnings: ReturnType<typeof captureWarnings>;
beforeEach(() => {
  warnings = captureWarnings();
});
afterEach(() => warnings.stop());

/** Runs the validations on each request (keyed by its key function) and returns the codes emitted. */
async function codesFor(validate: unknown, key: (r: Fake) => string | Promise<string>, requests: Fake[]): Promise<string[]> {
  const check = createValidations<[Fake]>(validate, key, facts);
  for (const request of requests) check?.([request], await key(request));
  return warnings.codes();
}

const proxied = (trust: ProxyTrust['level']): Fake => ({ ip: '10.0.0.1', socket: '10.0.0.1', headers: { 'x-forwarded-for': '198.51.100.7' }, trust });

describe('validate', () => {
  it('warns once about X-Forwarded-For when no proxy is trusted, only for keys that read the client address', async () => {
    expect(await codesFor(undefined, keyBy.ip(), [proxied('none'), proxied('none'), proxied('none')])).toEqual(['WRN_FG_X_FORWARDED_FOR']);
    expect(await codesFor(undefined, keyBy.header('x-user-id'), [proxied('none')])).toEqual(['WRN_FG_X_FORWARDED_FOR']);
    expect(await codesFor(undefined, keyBy.forwardedFor(), [proxied('none')])).toEqual([]);
    expect(await codesFor(undefined, () => 'user', [proxied('none')])).toEqual([]);
    expect(await codesFor(undefined, keyBy.ip(), [proxied('some'), { ip: '10.0.0.1', trust: 'none' }])).toEqual([]);
  });

  it('warns once when every proxy is trusted and X-Forwarded-For arrives, unless the key is an extractor that ignores the client address', async () => {
    expect(await codesFor(undefined, keyBy.ip(), [{ ip: '198.51.100.1', trust: 'all' }])).toEqual([]);
    expect(await codesFor(undefined, keyBy.ip(), [proxied('all'), proxied('all')])).toEqual(['WRN_FG_TRUST_PROXY']);
    expect(await codesFor(undefined, (r) => r.ip ?? '', [proxied('all')])).toEqual(['WRN_FG_TRUST_PROXY']);
    expect(await codesFor(undefined, keyBy.cloudflare(), [{ ip: '1.1.1.1', headers: { 'cf-connecting-ip': '198.51.100.1' }, trust: 'all' }])).toEqual([]);
  });

  it('names the setting and the fix in each warning, and how to turn it off', async () => {
    const check = createValidations<[Fake]>(undefined, keyBy.ip(), facts);
    check?.([proxied('none')], '10.0.0.1');
    check?.([proxied('all')], '198.51.100.7');
    expect((await warnings.taken()).map((w) => w.message)).toEqual([
      "A request carries X-Forwarded-For, but Test trusts none proxies (test.proxies = 'none'): the limiter keys it by the address of the proxy that sent it, so every client behind that proxy shares one bucket. If the app is behind proxies, set test.proxies = 1 (see docs/behind-a-proxy.md). If it is not, the client sent the header itself: turn this check off with validate: { xForwardedFor: false }.",
      "Test trusts all proxies (test.proxies = 'all'): the client address is the left-most X-Forwarded-For entry, which the client writes, so a client picks its own key and escapes the limit by changing it. Trust only your own proxies: set test.proxies = 1 (see docs/behind-a-proxy.md). To keep this setting, turn this check off with validate: { trustProxy: false }.",
    ]);
  });

  it(`warns once when one key makes at least half of a window of ${SINGLE_KEY_WINDOW} requests: always at three quarters, never below half`, async () => {
    const single = createValidations<[Fake]>(undefined, () => 'k', {});
    const run = (keys: (i: number) => string, windows: number) => {
      for (let i = 0; i < windows * SINGLE_KEY_WINDOW; i++) single?.([{}], keys(i));
    };
    run(() => 'proxy', 1);
    const taken = await warnings.taken();
    expect(taken.map((w) => w.code)).toEqual(['WRN_FG_SINGLE_KEY']);
    expect(taken[0]?.message).toMatch(/^One key, "proxy", made most of the last 1000 requests.*validate: \{ singleKey: false \}/);
    run(() => 'proxy', 3);
    expect(await warnings.codes()).toEqual([]); // once

    const threeQuarters = createValidations<[Fake]>(undefined, () => 'k', {});
    for (let i = 0; i < SINGLE_KEY_WINDOW; i++) threeQuarters?.([{}], i % 4 === 3 ? `client-${i}` : 'anonymous');
    expect(await warnings.codes()).toEqual(['WRN_FG_SINGLE_KEY']);

    const underHalf = createValidations<[Fake]>(undefined, () => 'k', {});
    // The worst order for the vote: the frequent key first, then all the others.
    for (let w = 0; w < 5; w++) for (let i = 0; i < SINGLE_KEY_WINDOW; i++) underHalf?.([{}], i < 499 ? 'anonymous' : `client-${w}-${i}`);
    const spread = createValidations<[Fake]>(undefined, () => 'k', {});
    for (let i = 0; i < 5 * SINGLE_KEY_WINDOW; i++) spread?.([{}], `client-${i % 50}`);
    expect(await warnings.codes()).toEqual([]);
  });

  it('warns once about an address an extractor could not read', async () => {
    const requests = [0, 1].map((): Fake => ({ socket: '10.0.0.1', headers: { 'x-forwarded-for': 'unknown' } }));
    expect(await codesFor(undefined, keyBy.forwardedFor(), requests)).toEqual(['WRN_FG_FORWARDED_ADDRESS']);
  });

  it('is silenced as a whole by validate: false, and check by check', async () => {
    const everything: Fake[] = [proxied('none'), proxied('all'), { ip: '_hidden', socket: '10.0.0.1' }];
    expect(createValidations(false, keyBy.ip(), facts)).toBeUndefined();
    expect(await codesFor({ xForwardedFor: false, trustProxy: false, forwardedAddress: false }, keyBy.ip(), everything)).toEqual([]);
    expect(await codesFor({ xForwardedFor: false }, keyBy.ip(), everything)).toEqual(['WRN_FG_TRUST_PROXY', 'WRN_FG_FORWARDED_ADDRESS']);
    expect(await codesFor({ singleKey: true }, keyBy.ip(), everything)).toEqual(['WRN_FG_X_FORWARDED_FOR', 'WRN_FG_TRUST_PROXY', 'WRN_FG_FORWARDED_ADDRESS']);
  });

  it.each([
    [
      { trustproxy: false },
      'ERR_FG_UNKNOWN_OPTION',
      "validate has no check 'trustproxy'. Known checks: xForwardedFor, trustProxy, singleKey, forwardedAddress.",
    ],
    [{ constructor: false }, 'ERR_FG_UNKNOWN_OPTION', "validate has no check 'constructor'"],
    [{ singleKey: 'no' }, 'ERR_FG_OPTION', 'validate.singleKey must be true or false, got "no".'],
    ['off', 'ERR_FG_OPTION', 'validate must be true, false or an object like { singleKey: false }'],
    [null, 'ERR_FG_OPTION', 'validate must be true, false or an object'],
  ])('rejects validate: %o with %s', (validate, code, message) => {
    expect(() => createValidations(validate, keyBy.ip(), facts)).toThrow(expect.objectContaining({ code, message: expect.stringContaining(message) }));
  });
});

describe('emitWarning', () => {
  it('goes through process.emitWarning, with the code', async () => {
    emitWarning(new FloodgateWarning('WRN_FG_SINGLE_KEY', 'one key'));
    expect(await warnings.taken()).toEqual([{ code: 'WRN_FG_SINGLE_KEY', message: 'one key' }]);
  });

  it('falls back to console.warn where there is no process.emitWarning (workerd, browsers)', () => {
    const emit = process.emitWarning;
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      (process as { emitWarning?: unknown }).emitWarning = undefined;
      emitWarning(new FloodgateWarning('WRN_FG_TRUST_PROXY', 'trusts all'));
      expect(warn).toHaveBeenCalledWith('[WRN_FG_TRUST_PROXY] FloodgateWarning: trusts all');
    } finally {
      process.emitWarning = emit;
      warn.mockRestore();
    }
  });
});
