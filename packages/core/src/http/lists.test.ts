import { describe, expect, it } from 'vitest';
import { compileAccessList } from './lists.js';

describe('compileAccessList', () => {
  const list = compileAccessList(['10.0.0.0/8', '203.0.113.7', '2001:db8:abcd::/48', '::1'], 'allowList') as (ip: string | undefined, args: []) => boolean;

  it.each([
    ['10.1.2.3', true],
    ['11.0.0.1', false],
    ['203.0.113.7', true],
    ['203.0.113.8', false],
    ['::ffff:10.9.9.9', true],
    ['2001:db8:abcd:12::1', true],
    ['2001:db8:abce::1', false],
    ['::1', true],
    ['10.1.2.3:4711', true],
    ['[::1]:80', true],
    ['[2001:db8:abce::1]:80', false],
    ['garbage', false],
    [undefined, false],
  ])('%s on the list: %s', (ip, expected) => {
    expect(list(ip, [])).toBe(expected);
  });

  it('calls a function with the request', async () => {
    const byHeader = compileAccessList<[{ banned: boolean }]>((req: { banned: boolean }) => req.banned, 'denyList');
    expect(await byHeader?.('1.2.3.4', [{ banned: true }])).toBe(true);
    expect(await byHeader?.('1.2.3.4', [{ banned: false }])).toBe(false);
  });

  it.each([['10.0.0.0/33'], ['10.0.0.0/-1'], ['10.0.0/8'], ['::1/129'], ['1.2.3.4/8/1'], [''], ['localhost']])('rejects %s with ERR_FG_OPTION', (entry) => {
    expect(() => compileAccessList([entry], 'allowList')).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
  });
});
