import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createLimiter, type Limiter, RedisRuleSource, RedisStore, type RuleOptions } from '@floodgate/core';
import { freePort, startRedis, useRedisServer } from '@floodgate/test-support';
import { afterAll, afterEach, describe, expect, it } from 'vitest';

const BIN = fileURLToPath(new URL('../dist/bin.js', import.meta.url));
const redis = useRedisServer();
const dir = mkdtempSync(join(tmpdir(), 'floodgate-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs the built bin as a user would, against the test's Redis unless `--redis` says otherwise. */
function floodgate(...args: string[]): Promise<Ran> {
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { env: { ...process.env, FLOODGATE_REDIS_URL: `redis://127.0.0.1:${redis.server.port}` }, timeout: 20_000 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
        resolve({ code, stdout, stderr, ms: Date.now() - started });
      },
    );
  });
}

const RULES: RuleOptions[] = [
  { name: 'per-minute', algorithm: 'fixed-window', limit: 10, windowMs: 60_000 },
  { name: 'per-day', algorithm: 'sliding-window', limit: 100, windowMs: 86_400_000 },
];

let files = 0;
/** A rules file in the test's folder. */
function rulesFile(text: string, extension = 'yaml'): string {
  const path = join(dir, `rules-${++files}.${extension}`);
  writeFileSync(path, text);
  return path;
}
const rulesJson = (rules: readonly RuleOptions[]) => rulesFile(JSON.stringify(rules), 'json');

let prefixes = 0;
const limiters: Limiter[] = [];
afterEach(async () => {
  for (const limiter of limiters.splice(0)) await limiter.close();
});

/** A prefix of the test's own, and a limiter of the test process on it (the application's, in real life). */
function app(rules: readonly RuleOptions[] = RULES): { prefix: string; limiter: Limiter } {
  const prefix = `t${++prefixes}:`;
  const limiter = createLimiter({ rules: [...rules], store: new RedisStore({ client: redis.client }), prefix });
  limiters.push(limiter);
  return { prefix, limiter };
}

const json = (ran: Ran) => {
  expect(ran.stderr).toBe('');
  expect(ran.code).toBe(0);
  return JSON.parse(ran.stdout);
};

describe('inspect', () => {
  it("shows every rule's state for the key and consumes nothing", async () => {
    const { prefix, limiter } = app();
    for (let i = 0; i < 3; i++) await limiter.consume('user:42');
    const rules = rulesJson(RULES);

    const first = json(await floodgate('inspect', 'user:42', '--rules', rules, '--prefix', prefix, '--json'));
    expect(first).toMatchObject({ key: 'user:42', allowed: true, rule: 'per-minute' });
    expect(first.rules).toEqual([
      expect.objectContaining({ name: 'per-minute', scope: 'key', algorithm: 'fixed-window', limit: 10, remaining: 7, blocked: null }),
      expect.objectContaining({ name: 'per-day', scope: 'key', algorithm: 'sliding-window', limit: 100, remaining: 97, blocked: null }),
    ]);
    expect(first.rules[0].resetMs).toBeGreaterThan(0);
    expect(first.rules[0].resetMs).toBeLessThanOrEqual(60_000);

    const table = await floodgate('inspect', 'user:42', '--rules', rules, '--prefix', prefix);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^user:42: a call would be allowed \(binding rule: per-minute\)/);
    expect(table.stdout).toMatch(/RULE +SCOPE +ALGORITHM +LIMIT +REMAINING +FULL IN +BLOCKED/);
    expect(table.stdout).toMatch(/per-minute +key +fixed-window +10 +7 /);
    expect((await limiter.peek('user:42')).remaining).toBe(7);
  });

  it('takes the rules from the RedisRuleSource key --rules names, and exits 3 when nothing is stored there', async () => {
    const { prefix, limiter } = app();
    await limiter.consume('k');
    await new RedisRuleSource({ client: redis.client, key: `${prefix}rules`, pollMs: 0 }).publish(RULES);
    const seen = json(await floodgate('inspect', 'k', '--rules', `${prefix}rules`, '--prefix', prefix, '--json'));
    expect(seen.rules.map((r: { remaining: number }) => r.remaining)).toEqual([9, 99]);

    const missing = await floodgate('inspect', 'k', '--rules', `${prefix}nothing-here`, '--prefix', prefix);
    expect(missing.code).toBe(3);
    expect(missing.stdout).toBe('');
    expect(missing.stderr).toMatch(/no rules are stored in the Redis key 't\d+:nothing-here'.*\[ERR_FG_NOT_FOUND\]/);
    expect((await floodgate('rules', 'get', '--rules', `${prefix}nothing-here`)).code).toBe(3);
  });
});

describe('block, unblock, blocked', () => {
  it('blocks the key for every process sharing the store: denied with blocked.manual and the reason; unblock lets it in again', async () => {
    const { prefix, limiter } = app();
    const rules = rulesJson(RULES);
    const ran = await floodgate('block', 'user:42', '--for', '1m', '--reason', 'credential stuffing', '--rules', rules, '--prefix', prefix);
    expect(ran).toMatchObject({ code: 0, stderr: '' });
    expect(ran.stdout).toMatch(/^blocked user:42 for 1m, until \S+, under per-minute, per-day: credential stuffing/);

    const denied = await limiter.consume('user:42');
    expect(denied.allowed).toBe(false);
    expect(denied.blocked).toMatchObject({ manual: true, reason: 'credential stuffing' });
    expect(denied.retryAfterMs).toBeGreaterThan(50_000);
    expect(denied.retryAfterMs).toBeLessThanOrEqual(60_000);
    expect((await limiter.consume('user:43')).allowed).toBe(true);

    const seen = json(await floodgate('inspect', 'user:42', '--rules', rules, '--prefix', prefix, '--json'));
    expect(seen.allowed).toBe(false);
    expect(seen.rules[0].blocked).toMatchObject({ manual: true, reason: 'credential stuffing', strike: 0 });
    expect(Date.parse(seen.rules[0].blocked.until)).toBe(seen.rules[0].blocked.untilMs);
    const table = await floodgate('inspect', 'user:42', '--rules', rules, '--prefix', prefix);
    expect(table.stdout).toMatch(/by hand until \S+ \((?:1m|\d+s) left\): credential stuffing/);

    const list = json(await floodgate('blocked', '--rules', rules, '--prefix', prefix, '--json'));
    expect(list.cursor).toBe('');
    expect(list.items).toEqual([
      expect.objectContaining({ key: 'user:42', scope: 'key', rule: 'per-day', manual: true, reason: 'credential stuffing' }),
      expect.objectContaining({ key: 'user:42', scope: 'key', rule: 'per-minute', manual: true, reason: 'credential stuffing' }),
    ]);

    const unblocked = await floodgate('unblock', 'user:42', '--rules', rules, '--prefix', prefix);
    expect(unblocked).toMatchObject({ code: 0, stdout: 'unblocked user:42\n' });
    expect((await limiter.consume('user:42')).allowed).toBe(true);
    expect(json(await floodgate('blocked', '--rules', rules, '--prefix', prefix, '--json')).items).toEqual([]);
    expect((await floodgate('blocked', '--rules', rules, '--prefix', prefix)).stdout).toBe('no key is blocked\n');
  });

  it('blocks and unblocks under the one rule --rule names; another name is ERR_FG_OPTION, exit 2', async () => {
    const { prefix, limiter } = app();
    const rules = rulesJson(RULES);
    expect((await floodgate('block', 'k', '--for', '30s', '--rule', 'per-day', '--rules', rules, '--prefix', prefix)).code).toBe(0);
    const denied = await limiter.peek('k');
    expect(denied.rules.map((r) => r.allowed)).toEqual([true, false]);
    expect(denied.rule).toBe('per-day');

    const wrong = await floodgate('unblock', 'k', '--rule', 'per-week', '--rules', rules, '--prefix', prefix);
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toMatch(/rule must name one of this limiter's rules.*per-week.*\[ERR_FG_OPTION\]\n$/);
    expect((await limiter.peek('k')).allowed).toBe(false);

    expect((await floodgate('unblock', 'k', '--rule', 'per-day', '--rules', rules, '--prefix', prefix)).code).toBe(0);
    expect((await limiter.peek('k')).allowed).toBe(true);
  });

  it('blocks keys of other scopes given with --scope', async () => {
    const scoped: RuleOptions[] = [{ name: 'per-ip', scope: 'ip', limit: 5, windowMs: 10_000 }];
    const { prefix, limiter } = app(scoped);
    const ran = await floodgate('block', '--scope', 'ip=203.0.113.9', '--for', '10s', '--rules', rulesJson(scoped), '--prefix', prefix);
    expect(ran).toMatchObject({ code: 0, stderr: '' });
    expect(ran.stdout).toMatch(/^blocked ip=203.0.113.9 for 10s/);
    expect((await limiter.consume({ ip: '203.0.113.9' })).blocked?.manual).toBe(true);
    expect((await limiter.consume({ ip: '203.0.113.10' })).allowed).toBe(true);
  });

  it('lists blocked keys a page at a time with --count and --cursor', async () => {
    const { prefix } = app();
    const rules = rulesJson([{ name: 'only', limit: 1, windowMs: 1_000 }]);
    for (const key of ['a', 'b', 'c']) expect((await floodgate('block', key, '--for', '1m', '--rules', rules, '--prefix', prefix)).code).toBe(0);

    const first = json(await floodgate('blocked', '--count', '2', '--rules', rules, '--prefix', prefix, '--json'));
    expect(first.items.map((i: { key: string }) => i.key)).toEqual(['a', 'b']);
    expect(first.cursor).not.toBe('');
    const table = await floodgate('blocked', '--count', '2', '--rules', rules, '--prefix', prefix);
    expect(table.stdout).toMatch(/KEY +SCOPE +RULE +UNTIL +LEFT +BY +REASON\na +key +only /);
    expect(table.stdout).toContain('more: floodgate blocked --cursor ');

    const second = json(await floodgate('blocked', '--count', '2', '--cursor', first.cursor, '--rules', rules, '--prefix', prefix, '--json'));
    expect(second).toMatchObject({ items: [expect.objectContaining({ key: 'c' })], cursor: '' });

    const tooMany = await floodgate('blocked', '--count', '0', '--rules', rules, '--prefix', prefix);
    expect(tooMany.code).toBe(2);
    expect(tooMany.stderr).toContain('[ERR_FG_OPTION]');
  });
});

describe('top', () => {
  const ONE: RuleOptions[] = [{ name: 'per-minute', algorithm: 'fixed-window', limit: 1, windowMs: 60_000 }];
  /** An application's limiter with analytics on, on a RedisStore of its own (two in one process, as two processes). */
  const analyticsApp = (prefix: string, analytics: true | { periodMs: number } = true): Limiter => {
    const limiter = createLimiter({ rules: ONE, store: new RedisStore({ client: redis.client }), prefix, analytics });
    limiters.push(limiter);
    return limiter;
  };
  const deny = async (limiter: Limiter, key: string, times: number) => {
    for (let i = 0; i < times; i++) await limiter.consume(key);
  };

  it('adds up the denial counts every process wrote, most first; --n; the CLI writes no summary of its own', async () => {
    const prefix = `t${++prefixes}:`;
    const one = analyticsApp(prefix);
    const two = analyticsApp(prefix);
    await deny(one, 'a', 4); // 1 allowed, 3 denied
    await deny(two, 'a', 2); // 2 denied
    await deny(two, 'c', 5); // 1 allowed, 4 denied
    await deny(one, 'b', 2); // 1 allowed, 1 denied
    // top() writes the process's summary first.
    await one.top();
    await two.top();
    // RedisStore's records: names in one sorted set (see core's records).
    const records = async () => (await redis.client.zrange('{floodgate:records}:index', 0, -1)).filter((name) => name.startsWith(`${prefix}top:`)).length;
    expect(await records()).toBe(2);

    const seen = json(await floodgate('top', '--prefix', prefix, '--json'));
    expect(seen.items).toEqual([
      { key: 'a', scope: 'key', denied: 5, error: 0 },
      { key: 'c', scope: 'key', denied: 4, error: 0 },
      { key: 'b', scope: 'key', denied: 1, error: 0 },
    ]);
    expect(seen.sinceMs % 60_000).toBe(0);
    expect(Date.now() - seen.sinceMs).toBeGreaterThanOrEqual(60_000);
    expect(Date.now() - seen.sinceMs).toBeLessThan(120_000 + 5_000);
    expect(Date.parse(seen.since)).toBe(seen.sinceMs);

    expect(json(await floodgate('top', '--n', '1', '--prefix', prefix, '--json')).items).toEqual([{ key: 'a', scope: 'key', denied: 5, error: 0 }]);

    const text = await floodgate('top', '--prefix', prefix);
    expect(text).toMatchObject({ code: 0, stderr: '' });
    expect(text.stdout).toMatch(
      /^KEY +SCOPE +DENIED +±ERROR\na +key +5 +0\nc +key +4 +0\nb +key +1 +0\n\nsince \S+Z \(the period of 1m under way and the one before\)\n$/,
    );
    // The CLI's limiter denied nothing: no record of its own, on close either.
    expect(await records()).toBe(2);
  });

  it('reads the period the applications count in (--period); nothing counted is exit 0', async () => {
    const prefix = `t${++prefixes}:`;
    const app10s = analyticsApp(prefix, { periodMs: 10_000 });
    await deny(app10s, 'k', 3);
    await app10s.top();

    const other = json(await floodgate('top', '--prefix', prefix, '--json'));
    expect(other.items).toEqual([]);
    const seen = json(await floodgate('top', '--period', '10s', '--prefix', prefix, '--json'));
    expect(seen.items).toEqual([{ key: 'k', scope: 'key', denied: 2, error: 0 }]);
    expect(seen.sinceMs % 10_000).toBe(0);

    const empty = await floodgate('top', '--prefix', `t${++prefixes}:`);
    expect(empty).toMatchObject({ code: 0, stderr: '' });
    expect(empty.stdout).toMatch(/^no key was denied since \S+Z/);
  });
});

describe('reset', () => {
  it('forgets the key in every rule: a key at its limit is allowed again', async () => {
    const { prefix, limiter } = app([{ name: 'tight', algorithm: 'fixed-window', limit: 2, windowMs: 60_000 }]);
    await limiter.consume('k');
    await limiter.consume('k');
    expect((await limiter.consume('k')).allowed).toBe(false);
    const ran = await floodgate(
      'reset',
      'k',
      '--rules',
      rulesJson(limiter.rules.map((r) => ({ name: r.name, algorithm: 'fixed-window', limit: 2, windowMs: 60_000 }))),
      '--prefix',
      prefix,
    );
    expect(ran).toMatchObject({ code: 0, stdout: 'reset k under tight\n', stderr: '' });
    expect((await limiter.consume('k')).remaining).toBe(1);
  });
});

describe('rules', () => {
  it('apply validates the file and publishes it through RedisRuleSource: attached limiters decide under it', async () => {
    const { prefix, limiter } = app([{ name: 'default', limit: 100, windowMs: 60_000 }]);
    const key = `${prefix}rules`;
    const source = new RedisRuleSource({ client: redis.client, key, pollMs: 0 });
    await source.attach(limiter);
    try {
      const file = rulesFile('# one call a minute\nrules:\n  - name: default\n    algorithm: fixed-window\n    limit: 1\n    windowMs: 60000\n');
      const ran = await floodgate('rules', 'apply', file, '--rules', key, '--json');
      expect(json(ran)).toEqual({
        file,
        key,
        channel: `${key}:changed`,
        published: true,
        rules: [{ name: 'default', algorithm: 'fixed-window', limit: 1, windowMs: 60_000 }],
      });
      await expect.poll(() => limiter.rules[0]?.limit, { timeout: 2_000 }).toBe(1);
      expect((await limiter.consume('k')).allowed).toBe(true);
      expect((await limiter.consume('k')).allowed).toBe(false);

      const got = json(await floodgate('rules', 'get', '--rules', key, '--json'));
      expect(got).toEqual({ key, rules: [{ name: 'default', algorithm: 'fixed-window', limit: 1, windowMs: 60_000 }] });
      const table = await floodgate('rules', 'get', '--rules', key);
      expect(table.stdout).toMatch(/NAME +SCOPE +ALGORITHM +LIMIT +WINDOW +OPTIONS\ndefault +key +fixed-window +1 +1m/);
    } finally {
      source.close();
    }
  });

  it('refuses a file that fails validation with its code, exit 2, and pushes nothing', async () => {
    const { prefix, limiter } = app([{ name: 'default', limit: 100, windowMs: 60_000 }]);
    const key = `${prefix}rules`;
    const before = JSON.stringify([{ name: 'default', limit: 5, windowMs: 1_000 }]);
    await redis.client.set(key, before);
    const subscriber = redis.server.client();
    const announced: string[] = [];
    subscriber.on('message', (_channel: string, message: string) => announced.push(message));
    await subscriber.subscribe(`${key}:changed`);

    const cases: [string, RegExp][] = [
      [rulesFile('- name: default\n  limit: 0\n  windowMs: 1000\n'), /limit.*\[ERR_FG_LIMIT\]/],
      [
        rulesJson([
          { name: 'a', limit: 1, windowMs: 1000 },
          { name: 'a', limit: 2, windowMs: 1000 },
        ]),
        /\[ERR_FG_DUPLICATE_RULE\]/,
      ],
      [rulesFile('- name: default\n  limit: 5\n  windowMs: 1000\n  algorithm: leaky\n'), /\[ERR_FG_ALGORITHM\]/],
      [rulesFile('- name: default\n  limit: [5\n'), /is not valid YAML.*\[ERR_FG_RULES\]/s],
      [rulesFile('{"name": "default", "limit": 5,', 'json'), /is not valid JSON.*\[ERR_FG_RULES\]/s],
      [rulesFile('just words'), /must hold a list of rules.*\[ERR_FG_RULES\]/],
      [join(dir, 'no-such-file.yaml'), /cannot read the rules file .*no such file.*\[ERR_FG_FILE\]/],
    ];
    for (const [file, message] of cases) {
      const ran = await floodgate('rules', 'apply', file, '--rules', key);
      expect(ran.code, file).toBe(2);
      expect(ran.stdout).toBe('');
      expect(ran.stderr).toMatch(message);
    }
    const dryRun = await floodgate('rules', 'apply', rulesJson([{ name: 'default', limit: 7, windowMs: 1_000 }]), '--rules', key, '--dry-run');
    expect(dryRun.code).toBe(0);
    expect(dryRun.stdout).toMatch(/1 valid rule \(dry run: nothing published\)/);

    expect(await redis.client.get(key)).toBe(before);
    await new Promise((resolve) => setTimeout(resolve, 100)); // an announcement would have arrived by now
    expect(announced).toEqual([]);
    expect(limiter.rules[0]?.limit).toBe(100);
    subscriber.disconnect();
  });

  it('get reads a rules file too; apply needs a Redis key, not a file', async () => {
    const file = rulesFile('name: solo\nlimit: 3\nwindowMs: 2000\nburst: 6\nalgorithm: token-bucket\n');
    const got = json(await floodgate('rules', 'get', '--rules', file, '--json'));
    expect(got).toEqual({ file, rules: [{ name: 'solo', limit: 3, windowMs: 2000, burst: 6, algorithm: 'token-bucket' }] });
    const refused = await floodgate('rules', 'apply', file, '--rules', file);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/--rules must name its Redis key.*\[ERR_FG_USAGE\]/);
  });
});

describe('overrides', () => {
  const BASE: RuleOptions[] = [
    { name: 'per-user', algorithm: 'fixed-window', limit: 10, windowMs: 60_000 },
    { name: 'per-day', algorithm: 'sliding-window', limit: 100, windowMs: 86_400_000 },
  ];

  /** The application's limiter, with overrides on, on a prefix of the test's own. */
  function appWithOverrides(rules: readonly RuleOptions[] = BASE): { prefix: string; limiter: Limiter; flags: string[] } {
    const prefix = `t${++prefixes}:`;
    const limiter = createLimiter({ rules: [...rules], store: new RedisStore({ client: redis.client }), prefix, overrides: true });
    limiters.push(limiter);
    return { prefix, limiter, flags: ['--rules', rulesJson(rules), '--prefix', prefix] };
  }

  it("set changes a rule for the key in the application's limiter (after its refresh); get, list and inspect show it; delete restores", async () => {
    const { limiter, flags } = appWithOverrides();
    const set = await floodgate('overrides', 'set', 'acme', '--rule', 'per-user', '--limit', '5', ...flags);
    expect(set).toMatchObject({ code: 0, stderr: '', stdout: 'set the override of acme: per-user limit=5, until deleted\n' });
    expect(set.ms).toBeLessThan(5_000); // the CLI's limiter closes: its refresh timer does not hold the process

    await limiter.overrides.refresh();
    const admitted: boolean[] = [];
    for (let i = 0; i < 6; i++) admitted.push((await limiter.consume('acme')).allowed);
    expect(admitted).toEqual([true, true, true, true, true, false]);
    expect((await limiter.consume('acme')).limit).toBe(5);
    expect((await limiter.consume('bob')).remaining).toBe(9); // other keys keep the rule's limit

    expect(json(await floodgate('overrides', 'get', 'acme', ...flags, '--json'))).toEqual({
      key: 'acme',
      rules: [{ name: 'per-user', limit: 5 }],
      untilMs: null,
      until: null,
      leftMs: null,
    });
    const got = await floodgate('overrides', 'get', 'acme', ...flags);
    expect(got).toMatchObject({ code: 0, stderr: '' });
    expect(got.stdout).toMatch(/^acme: until deleted\n\nRULE +CHANGES\nper-user +limit=5\n$/);

    const seen = json(await floodgate('inspect', 'acme', ...flags, '--json'));
    expect(seen.allowed).toBe(false);
    expect(seen.rules[0]).toMatchObject({
      name: 'per-user',
      limit: 5,
      remaining: 0,
      override: { key: 'acme', change: { limit: 5 }, untilMs: null, until: null },
    });
    expect(seen.rules[1]).toMatchObject({ name: 'per-day', limit: 100, override: null });
    const table = await floodgate('inspect', 'acme', ...flags);
    expect(table.stdout).toMatch(/RULE +SCOPE +ALGORITHM +LIMIT +REMAINING +FULL IN +BLOCKED +OVERRIDE\n/);
    expect(table.stdout).toMatch(/\nper-user +key +fixed-window +5 +0 +\d+s +- +acme: limit=5\n/);
    expect(table.stdout).toMatch(/\nper-day +key +sliding-window +100 +95 +1d \d+h +- +-\n/);
    const other = await floodgate('inspect', 'bob', ...flags);
    expect(other.stdout).not.toContain('OVERRIDE');
    expect(json(await floodgate('inspect', 'bob', ...flags, '--json')).rules[0]).toMatchObject({ limit: 10, override: null });

    // Set again: it replaces the override, and says what it replaced.
    const again = json(
      await floodgate(
        'overrides',
        'set',
        'acme',
        '--rule',
        'per-user',
        '--limit',
        '7',
        '--rule',
        'per-day',
        '--limit',
        '1000',
        '--ttl',
        '1h',
        ...flags,
        '--json',
      ),
    );
    expect(again).toMatchObject({
      key: 'acme',
      rules: [
        { name: 'per-user', limit: 7 },
        { name: 'per-day', limit: 1000 },
      ],
      set: true,
      replaced: { rules: [{ name: 'per-user', limit: 5 }] },
    });
    expect(again.untilMs - Date.now()).toBeGreaterThan(3_590_000);
    expect(again.untilMs - Date.now()).toBeLessThanOrEqual(3_600_000);
    expect(Date.parse(again.until)).toBe(again.untilMs);
    await limiter.overrides.refresh();
    expect((await limiter.peek('acme')).rules.map((r) => r.limit)).toEqual([7, 1000]);

    const deleted = await floodgate('overrides', 'delete', 'acme', ...flags);
    expect(deleted).toMatchObject({ code: 0, stderr: '', stdout: 'deleted the override of acme (per-user limit=7; per-day limit=1000)\n' });
    await limiter.overrides.refresh();
    const after = await limiter.consume('acme'); // the rule's own limit again, and the count the key had
    expect(after).toMatchObject({ allowed: true, limit: 10 });
    expect(after.remaining).toBe(10 - 5 - 1); // 5 counted under the override, and this call

    const gone = await floodgate('overrides', 'get', 'acme', ...flags);
    expect(gone).toMatchObject({ code: 3, stdout: '' });
    expect(gone.stderr).toMatch(/^floodgate: no override is set for 'acme'.*\[ERR_FG_NOT_FOUND\]\n$/);
    expect(json(await floodgate('overrides', 'delete', 'acme', ...flags, '--json'))).toEqual({ key: 'acme', deleted: true, was: null });
  });

  it('list pages through the overrides in key order; inspect shows the one in force by prefix, and for other scopes', async () => {
    const rules: RuleOptions[] = [
      { name: 'per-user', scope: 'user', algorithm: 'fixed-window', limit: 10, windowMs: 60_000 },
      { name: 'per-ip', scope: 'ip', limit: 50, windowMs: 60_000 },
    ];
    const { limiter, flags } = appWithOverrides(rules);
    expect(json(await floodgate('overrides', 'list', ...flags, '--json'))).toEqual({ items: [], cursor: '' });
    expect((await floodgate('overrides', 'list', ...flags)).stdout).toBe('no override is set\n');
    for (const [key, limit] of [
      ['tenant:acme:*', '3'],
      ['tenant:*', '20'],
      ['u1', '4'],
    ] as const)
      expect((await floodgate('overrides', 'set', key, '--rule', 'per-user', '--limit', limit, ...flags)).code).toBe(0);

    const first = json(await floodgate('overrides', 'list', '--count', '2', ...flags, '--json'));
    expect(first.items).toEqual([
      { key: 'tenant:*', rules: [{ name: 'per-user', limit: 20 }], untilMs: null, until: null, leftMs: null },
      { key: 'tenant:acme:*', rules: [{ name: 'per-user', limit: 3 }], untilMs: null, until: null, leftMs: null },
    ]);
    expect(first.cursor).not.toBe('');
    const table = await floodgate('overrides', 'list', '--count', '2', ...flags);
    expect(table.stdout).toMatch(/^KEY +RULES +UNTIL +LEFT\ntenant:\* +per-user limit=20 +- +until deleted\n/);
    expect(table.stdout).toContain(`more: floodgate overrides list --cursor '${first.cursor}'`);
    const second = json(await floodgate('overrides', 'list', '--count', '2', '--cursor', first.cursor, ...flags, '--json'));
    expect(second).toMatchObject({ items: [expect.objectContaining({ key: 'u1' })], cursor: '' });

    // The key's own override first, then the longest prefix; each rule by the key of its scope.
    const byPrefix = json(await floodgate('inspect', '--scope', 'user=tenant:acme:7', '--scope', 'ip=203.0.113.9', ...flags, '--json'));
    expect(byPrefix.rules.map((r: { limit: number; override: { key: string } | null }) => [r.limit, r.override?.key ?? null])).toEqual([
      [3, 'tenant:acme:*'],
      [50, null],
    ]);
    expect(json(await floodgate('inspect', '--scope', 'user=tenant:globex', '--scope', 'ip=1', ...flags, '--json')).rules[0]).toMatchObject({
      limit: 20,
      override: { key: 'tenant:*' },
    });
    await limiter.overrides.refresh();
    expect((await limiter.peek({ user: 'tenant:acme:7', ip: '203.0.113.9' })).rules[0]?.limit).toBe(3);
    expect((await floodgate('overrides', 'get', 'tenant:acme:7', ...flags)).code).toBe(3); // get reads the key's own
  });

  it('refuses bad input with exit 2 and its code, and leaves the stored override as it was', async () => {
    const { limiter, flags } = appWithOverrides();
    expect((await floodgate('overrides', 'set', 'acme', '--rule', 'per-user', '--limit', '5', '--ttl', '1d', ...flags)).code).toBe(0);
    const { leftMs: _, ...before } = json(await floodgate('overrides', 'get', 'acme', ...flags, '--json'));
    expect(before).toMatchObject({ key: 'acme', rules: [{ name: 'per-user', limit: 5 }] });

    const cases: [string[], RegExp][] = [
      [['--rule', 'per-week', '--limit', '5'], /must name one of the limiter's rules \('per-user', 'per-day'\), got "per-week".*\[ERR_FG_RULES\]/],
      [['--rule', 'per-user', '--limit', '0'], /limit must be a positive integer.*got 0\. \[ERR_FG_LIMIT\]/],
      [['--rule', 'per-user', '--limit', 'ten'], /limit must be a positive integer.*got "ten"\. \[ERR_FG_LIMIT\]/],
      [['--rule', 'per-user', '--limit', '2.5'], /\[ERR_FG_LIMIT\]/],
      [['--rule', 'per-user', '--burst', '20'], /burst only applies to token-bucket.*\[ERR_FG_BURST\]/],
      [['--rule', 'per-user', '--window', '60'], /'60' is not a duration: it has no unit.*\[ERR_FG_DURATION\]/],
      [['--rule', 'per-user', '--limit', '5', '--ttl', 'forever'], /'forever' is not a duration.*\[ERR_FG_DURATION\]/],
      [['--rule', 'per-user', '--limit', '5', '--rule', 'per-user', '--limit', '6'], /changes rule 'per-user' twice.*\[ERR_FG_RULES\]/],
      [['--rule', 'per-user'], /--rule per-user changes nothing.*\[ERR_FG_USAGE\]/],
      [[], /overrides set needs what to change.*\[ERR_FG_USAGE\]/],
      [['--rule', 'per-user', '--limit', '5', '--limit', '6'], /--limit is given twice for rule 'per-user'.*\[ERR_FG_USAGE\]/],
      [['--limit', '5', '--rule', 'per-user', '--rule', 'per-day', '--limit', '6'], /each change goes after the --rule it is for.*\[ERR_FG_USAGE\]/],
    ];
    for (const [args, message] of cases) {
      const ran = await floodgate('overrides', 'set', 'acme', ...args, ...flags);
      expect(ran.code, args.join(' ')).toBe(2);
      expect(ran.stdout).toBe('');
      expect(ran.stderr).toMatch(message);
      expect(ran.stderr).toMatch(/^floodgate: .*\n$/);
    }
    expect(json(await floodgate('overrides', 'get', 'acme', ...flags, '--json'))).toMatchObject(before); // untilMs too
    await limiter.overrides.refresh();
    expect((await limiter.peek('acme')).limit).toBe(5);

    // With one --rule the flags may come in any order.
    const anyOrder = json(await floodgate('overrides', 'set', 'acme', '--limit', '6', '--rule', 'per-user', ...flags, '--json'));
    expect(anyOrder.rules).toEqual([{ name: 'per-user', limit: 6 }]);
  });
});

describe('dashboard', () => {
  interface Served {
    child: ChildProcess;
    /** The URL it printed, and the port it listens on. */
    url: string;
    port: number;
    exited: Promise<number | null>;
    output: () => { stdout: string; stderr: string };
  }
  const serving: ChildProcess[] = [];
  afterEach(() => {
    for (const child of serving.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });

  /** Starts the built bin's dashboard against the test's Redis and resolves once it prints where it listens. */
  function serve(args: string[], env: Record<string, string> = {}): Promise<Served> {
    const child = spawn(process.execPath, [BIN, 'dashboard', '--port', '0', ...args], {
      env: { ...process.env, FLOODGATE_DASHBOARD_TOKEN: '', FLOODGATE_REDIS_URL: `redis://127.0.0.1:${redis.server.port}`, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    serving.push(child);
    let stdout = '';
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    return new Promise((resolve, reject) => {
      child.stdout?.on('data', (chunk: Buffer) => {
        stdout += chunk.toString();
        const seen = /^listening on (http:\/\/\S+:(\d+)\/)\n/.exec(stdout);
        if (seen !== null) resolve({ child, url: seen[1] as string, port: Number(seen[2]), exited, output: () => ({ stdout, stderr }) });
      });
      void exited.then((code) => reject(new Error(`the dashboard exited ${code} before listening: ${stdout}${stderr}`)));
    });
  }

  it("serves the page and the API for the limiter on the apps' keys: lists a key the app blocked, unblocks it for the app; SIGTERM exits 0", async () => {
    const { prefix, limiter } = app();
    const key = `${prefix}rules`;
    await new RedisRuleSource({ client: redis.client, key, pollMs: 0 }).publish(RULES);
    await limiter.block('user:42', 60_000, { reason: 'credential stuffing' });
    expect((await limiter.consume('user:42')).allowed).toBe(false);

    const served = await serve(['--rules', key, '--prefix', prefix]);
    expect(served.url).toBe(`http://127.0.0.1:${served.port}/`);
    const page = await fetch(served.url);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(await page.text()).toMatch(/<html/i);

    const blocked = await fetch(`${served.url}api/blocked`);
    expect(blocked.status).toBe(200);
    expect(((await blocked.json()) as { items: unknown[] }).items).toEqual(
      expect.arrayContaining([expect.objectContaining({ key: 'user:42', rule: 'per-minute', manual: true, reason: 'credential stuffing' })]),
    );
    // The rules come from the RedisRuleSource of --rules: editable, published to the apps.
    expect(await (await fetch(`${served.url}api/rules`)).json()).toMatchObject({ editable: true, rules: [{ name: 'per-minute' }, { name: 'per-day' }] });

    const body = JSON.stringify({ key: 'user:42' });
    const headers = { 'content-type': 'application/json' };
    // The dashboard's CSRF rule: a change without a same-origin header is refused.
    expect((await fetch(`${served.url}api/unblock`, { method: 'POST', headers, body })).status).toBe(403);
    expect((await limiter.consume('user:42')).allowed).toBe(false);
    const unblocked = await fetch(`${served.url}api/unblock`, { method: 'POST', headers: { ...headers, 'sec-fetch-site': 'same-origin' }, body });
    expect(unblocked.status).toBe(204);
    expect((await limiter.consume('user:42')).allowed).toBe(true);

    const stopping = Date.now();
    served.child.kill('SIGTERM');
    expect(await served.exited).toBe(0);
    expect(Date.now() - stopping).toBeLessThan(2_000);
    expect(served.output().stderr).toBe('');
  });

  it('refuses to serve beyond loopback without a token: exit 2, ERR_FG_USAGE, before Redis is asked', async () => {
    const ran = await floodgate('dashboard', '--host', '0.0.0.0', '--redis', 'redis://127.0.0.1:1');
    expect(ran.code).toBe(2);
    expect(ran.stdout).toBe('');
    expect(ran.stderr).toMatch(/^floodgate: --host 0\.0\.0\.0 is not a loopback address.*--token.*\[ERR_FG_USAGE\]\n$/);
    for (const [args, message] of [
      [['--port', '70000'], /--port takes a port from 0 to 65535/],
      [['--json'], /dashboard takes no --json/],
      [['--host', '::', '--token', ' '], /must not be empty/],
    ] as const) {
      const bad = await floodgate('dashboard', ...args);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(message);
    }
  });

  it('with --token (or FLOODGATE_DASHBOARD_TOKEN) serves beyond loopback to requests that carry it only', async () => {
    const { prefix } = app();
    for (const [args, env] of [
      [['--token', 's3cret-token'], {}],
      [[], { FLOODGATE_DASHBOARD_TOKEN: 's3cret-token' }],
    ] as const) {
      const served = await serve(['--host', '0.0.0.0', '--rules', rulesJson(RULES), '--prefix', prefix, ...args], env);
      expect(served.url).toBe(`http://0.0.0.0:${served.port}/`);
      const url = `http://127.0.0.1:${served.port}/`;
      const refused = await fetch(`${url}api/blocked`);
      expect(refused.status).toBe(401);
      expect(refused.headers.get('www-authenticate')).toMatch(/Bearer realm="floodgate"/);
      expect((await fetch(url, { headers: { authorization: 'Bearer s3cret-tokeN' } })).status).toBe(401);
      expect((await fetch(url, { headers: { authorization: 'Bearer s3cret-token' } })).status).toBe(200);
      // What a browser sends once asked: Basic, the token as the password.
      const basic = `Basic ${Buffer.from('admin:s3cret-token').toString('base64')}`;
      expect((await fetch(`${url}api/blocked`, { headers: { authorization: basic } })).status).toBe(200);
      // The rules come from a file: shown, not editable.
      const rules = (await (await fetch(`${url}api/rules`, { headers: { authorization: 'Bearer s3cret-token' } })).json()) as { editable: boolean };
      expect(rules.editable).toBe(false);
      served.child.kill('SIGINT');
      expect(await served.exited).toBe(0);
    }
  });

  it('exits 1 when Redis is down, and 2 with ERR_FG_LISTEN when the port is taken', async () => {
    const down = await floodgate('dashboard', '--port', '0', '--redis', `redis://127.0.0.1:${await freePort()}`, '--rules', rulesJson(RULES));
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/\[ERR_FG_STORE_UNAVAILABLE\]\n$/);

    const { prefix } = app();
    const first = await serve(['--rules', rulesJson(RULES), '--prefix', prefix]);
    const taken = await floodgate('dashboard', '--port', String(first.port), '--rules', rulesJson(RULES), '--prefix', prefix);
    expect(taken.code).toBe(2);
    expect(taken.stderr).toMatch(/cannot listen on 127\.0\.0\.1:\d+: the port is in use.*\[ERR_FG_LISTEN\]\n$/);
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
  });
});

describe('usage', () => {
  it.each([
    [[], /no command given/, 'ERR_FG_USAGE'],
    [['tops'], /unknown command 'tops'; the commands are inspect, reset, block, unblock, blocked, top,/, 'ERR_FG_USAGE'],
    [['top', '--n', '0'], /top\(\)'s n must be an integer from 1 to 10000, got 0/, 'ERR_FG_OPTION'],
    [['top', '--n', 'ten'], /top\(\)'s n must be an integer from 1 to 10000/, 'ERR_FG_OPTION'],
    [['top', '--n', '10001'], /top\(\)'s n must be an integer from 1 to 10000/, 'ERR_FG_OPTION'],
    [['top', '--period', '500ms'], /analytics must be/, 'ERR_FG_OPTION'],
    [['top', '--period', '60'], /'60' is not a duration: it has no unit/, 'ERR_FG_DURATION'],
    [['top', 'k'], /top takes no argument/, 'ERR_FG_USAGE'],
    [['top', '--count', '5'], /top takes no --count/, 'ERR_FG_USAGE'],
    [['blocked', '--n', '5'], /blocked takes no --n/, 'ERR_FG_USAGE'],
    [['rules', 'delete'], /'rules' takes 'get' or 'apply <file>'/, 'ERR_FG_USAGE'],
    [['overrides'], /'overrides' takes 'set', 'get', 'list' or 'delete', got ''/, 'ERR_FG_USAGE'],
    [['overrides', 'get'], /overrides get takes the key/, 'ERR_FG_USAGE'],
    [['overrides', 'get', 'k', '--limit', '5'], /overrides get takes no --limit/, 'ERR_FG_USAGE'],
    [['overrides', 'list', '--count', 'all'], /--count takes a whole number/, 'ERR_FG_USAGE'],
    [['block', 'k', '--for', '1m', '--rule', 'a', '--rule', 'b'], /block takes one --rule/, 'ERR_FG_USAGE'],
    [['inspect'], /inspect takes the key/, 'ERR_FG_USAGE'],
    [['inspect', 'a', 'b'], /inspect takes one argument/, 'ERR_FG_USAGE'],
    [['inspect', 'k', '--fro', '1m'], /Unknown option '--fro'/, 'ERR_FG_USAGE'],
    [['unblock', 'k', '--for', '1m'], /unblock takes no --for/, 'ERR_FG_USAGE'],
    [['block', 'k'], /block needs --for <duration>/, 'ERR_FG_USAGE'],
    [['block', 'k', '--for', '15'], /'15' is not a duration: it has no unit/, 'ERR_FG_DURATION'],
    [['block', 'k', '--for', '1.5m'], /'1.5m' is not a duration/, 'ERR_FG_DURATION'],
    [['block', 'k', '--for', '30s15m'], /from the largest down/, 'ERR_FG_DURATION'],
    [['blocked', '--count', 'ten'], /--count takes a whole number/, 'ERR_FG_USAGE'],
    [['inspect', 'k', '--scope', 'ip'], /--scope takes <scope>=<key>/, 'ERR_FG_USAGE'],
    [['inspect', 'k', '--redis', 'http://127.0.0.1:6379'], /must be a redis:\/\/ or rediss:\/\/ URL/, 'ERR_FG_USAGE'],
    [['inspect', 'k', '--timeout', 'soon'], /'soon' is not a duration/, 'ERR_FG_DURATION'],
  ])('floodgate %j exits 2 and names the problem', async (args, message, code) => {
    const ran = await floodgate(...args);
    expect(ran.code).toBe(2);
    expect(ran.stdout).toBe('');
    expect(ran.stderr).toMatch(message);
    expect(ran.stderr).toMatch(new RegExp(`^floodgate: .*\\[${code}\\]\\n$`, 's'));
  });

  it('--help prints the commands, flags and exit codes', async () => {
    const ran = await floodgate('--help');
    expect(ran.code).toBe(0);
    for (const word of [
      'inspect <key>',
      'block <key> --for <duration>',
      'rules apply <file>',
      'overrides set <key> --rule <name>',
      'top [--n <n>] [--period <duration>]',
      '--redis <url>',
      'Exit codes',
    ])
      expect(ran.stdout).toContain(word);
  });

  it('refuses a bad key with core ERR_FG_KEY, exit 2', async () => {
    const ran = await floodgate('inspect', '', '--rules', rulesJson(RULES));
    expect(ran.code).toBe(2);
    expect(ran.stderr).toContain('[ERR_FG_KEY]');
  });
});

describe('when Redis is down', () => {
  it.each([
    ['inspect', 'k'],
    ['block', 'k', '--for', '1m'],
    ['unblock', 'k'],
    ['reset', 'k'],
    ['blocked'],
    ['rules', 'get'],
    ['overrides', 'set', 'k', '--rule', 'a', '--limit', '5'],
    ['overrides', 'list'],
    ['top'],
    ['top', '--n', '3', '--period', '5m', '--json'],
  ])('floodgate %s exits 1 within a few seconds on a port nobody listens on', async (...args) => {
    const port = await freePort();
    const ran = await floodgate(...args, '--redis', `redis://127.0.0.1:${port}`, '--rules', 'fg:rules');
    expect(ran.code).toBe(1);
    expect(ran.stdout).toBe('');
    expect(ran.stderr).toMatch(new RegExp(`cannot connect to Redis at redis://127.0.0.1:${port}.*ECONNREFUSED.*\\[ERR_FG_STORE_UNAVAILABLE\\]`));
    expect(ran.ms).toBeLessThan(5_000);
  });

  it('rules apply exits 1 when Redis is down, after validating the file', async () => {
    const port = await freePort();
    const ran = await floodgate('rules', 'apply', rulesJson(RULES), '--redis', `redis://127.0.0.1:${port}`);
    expect(ran.code).toBe(1);
    expect(ran.stderr).toContain('[ERR_FG_STORE_UNAVAILABLE]');
  });

  it('exits 1 at --timeout when Redis accepts the connection but never answers', async () => {
    const frozen = await startRedis();
    frozen.pause();
    try {
      const ran = await floodgate('inspect', 'k', '--redis', `redis://127.0.0.1:${frozen.port}`, '--rules', rulesJson(RULES), '--timeout', '1s');
      expect(ran.code).toBe(1);
      expect(ran.stderr).toMatch(/no answer within 1000 ms.*\[ERR_FG_STORE_TIMEOUT\]/);
      expect(ran.ms).toBeLessThan(5_000);
    } finally {
      frozen.resume();
      await frozen.stop();
    }
  });

  it('hides the password of the URL in messages', async () => {
    const port = await freePort();
    const ran = await floodgate('inspect', 'k', '--redis', `redis://:s3cret@127.0.0.1:${port}`);
    expect(ran.code).toBe(1);
    expect(ran.stderr).not.toContain('s3cret');
    expect(ran.stderr).toContain('redis://:***@127.0.0.1');
  });
});
