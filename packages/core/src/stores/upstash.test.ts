/*
 * RedisStore over HTTP: the real @upstash/redis client against a real
 * redis-server, through the REST bridge of @floodgate/test-support (the
 * Upstash REST protocol: single commands and /pipeline). The bridge counts
 * the HTTP requests and the commands each carried; ioredis only inspects and
 * disturbs the server (SCRIPT FLUSH, FUNCTION FLUSH).
 */
import { useRedisServer, useRestBridge } from '@floodgate/test-support';
import { Redis as Upstash } from '@upstash/redis';
import { afterEach, describe, expect, it } from 'vitest';
import { createLimiter } from '../limiter.js';
import type { LimiterOptions } from '../options.js';
import { compileRules } from '../rules.js';
import { LIBRARY } from './redis/library.generated.js';
import { RedisStore } from './redis-store.js';

const redisServer = useRedisServer();
const bridge = useRestBridge(() => redisServer.server.port);
let prefixes = 0;
/** Far above any round trip: a loaded machine cannot turn a decision into a store error. */
const timeoutMs = 30_000;

/** The client as an application on the edge makes it: URL and token, every default kept (auto-pipelining, base64 replies). */
const upstash = (options: { enableAutoPipelining?: boolean } = {}) =>
  new Upstash({ url: bridge.url, token: bridge.token, enableTelemetry: false, retry: false, ...options });

/** A limiter whose store errors are recorded, decided by onStoreError 'deny'. */
function strictLimiter(options: LimiterOptions) {
  const errors: Error[] = [];
  const limiter = createLimiter({ timeoutMs, onStoreError: 'deny', prefix: `upstash${prefixes++}:`, ...options });
  limiter.on('error', ({ error }) => errors.push(error));
  return { limiter, errors };
}

/** What `action` sent over HTTP: one entry per request, the command names it carried. */
async function requestsOf(action: () => Promise<unknown>): Promise<string[][]> {
  bridge.requests.length = 0;
  await action();
  return bridge.requests.map((request) => request.commands.map(([name]) => name as string));
}

afterEach(() => {
  bridge.unsupported.clear();
  bridge.hold = false;
});

describe('RedisStore with an @upstash/redis client (Redis over HTTP)', () => {
  it('takes the client as it is (types included), and decides: consume, deny, refund, peek, reset', async () => {
    const { limiter, errors } = strictLimiter({ algorithm: 'fixed-window', limit: 3, windowMs: 60_000, store: new RedisStore({ client: upstash() }) });
    expect((await limiter.consume('user:42')).remaining).toBe(2);
    expect((await limiter.consume('user:42', { cost: 2 })).remaining).toBe(0);
    const denied = await limiter.consume('user:42');
    expect(denied).toMatchObject({ allowed: false, remaining: 0, rule: 'default' });
    expect(denied.retryAfterMs).toBeGreaterThan(0);
    expect(denied.retryAfterMs).toBeLessThanOrEqual(60_000);
    expect((await limiter.consume('user:42', { cost: 4 })).retryAfterMs).toBe(Number.POSITIVE_INFINITY);
    await limiter.refund('user:42', { cost: 2 });
    expect((await limiter.peek('user:42')).remaining).toBe(2);
    await limiter.reset('user:42');
    expect((await limiter.peek('user:42')).remaining).toBe(3);
    expect(errors).toEqual([]);
  });

  it('loads the library once, then every call is one request of one FCALL, every peek one FCALL_RO, whatever the rules and scopes', async () => {
    const store = new RedisStore({ client: upstash() });
    const { limiter, errors } = strictLimiter({
      store,
      rules: [
        { name: 'burst', algorithm: 'gcra', limit: 10, windowMs: 1_000, burst: 5 },
        { name: 'hourly', algorithm: 'sliding-log', limit: 100, windowMs: 3_600_000, scope: 'user' },
        { name: 'all', algorithm: 'sliding-window', limit: 1000, windowMs: 60_000, scope: 'global', segments: 6 },
      ],
    });
    await bridge.redis.call('FUNCTION', 'FLUSH');
    // Not loaded yet: the FCALL says so, the library is loaded, and the FCALL runs again.
    expect(await requestsOf(() => limiter.consume({ key: 'k', user: 'u' }))).toEqual([['FCALL'], ['FUNCTION'], ['FCALL']]);
    expect(store.runsAs).toBe('functions');
    expect(await requestsOf(() => limiter.consume({ key: 'k', user: 'u' }, { cost: 2 }))).toEqual([['FCALL']]);
    expect(await requestsOf(() => limiter.peek({ key: 'k', user: 'u' }))).toEqual([['FCALL_RO']]);
    expect(await requestsOf(() => limiter.refund({ key: 'k', user: 'u' }))).toEqual([['FCALL']]);
    // A reset deletes the keys' block records too (what blocked() lists): sent in the same turn, the two go as one FCALL.
    expect(await requestsOf(() => limiter.reset({ key: 'k', user: 'u' }))).toEqual([['FCALL']]);
    expect(errors).toEqual([]);
  });

  it('sends the calls made in one burst of microtasks as one command: 50 consumes in flight at once are one FCALL of the library’s many, in one request', async () => {
    const { limiter, errors } = strictLimiter({ algorithm: 'token-bucket', limit: 20, windowMs: 60_000, store: new RedisStore({ client: upstash() }) });
    await limiter.peek('warm'); // the library is loaded
    await limiter.consume('warm');
    const sent = await requestsOf(async () => {
      const decisions = await Promise.all(Array.from({ length: 50 }, () => limiter.consume('k')));
      expect(decisions.filter((d) => d.allowed)).toHaveLength(20);
      expect(decisions.slice(0, 20).map((d) => d.remaining)).toEqual(Array.from({ length: 20 }, (_, i) => 19 - i));
    });
    expect(sent).toEqual([['FCALL']]);
    expect(bridge.requests[0]?.path).toBe('/pipeline');
    expect(JSON.stringify(bridge.requests[0])).toContain(LIBRARY.many);
    expect(errors).toEqual([]);
  });

  it('bounds a batch: 200 consumes in one burst are FCALLs of at most 64 calls each, still in one request', async () => {
    const { limiter, errors } = strictLimiter({ algorithm: 'fixed-window', limit: 150, windowMs: 60_000, store: new RedisStore({ client: upstash() }) });
    await limiter.peek('warm'); // the library is loaded
    const sent = await requestsOf(async () => {
      const decisions = await Promise.all(Array.from({ length: 200 }, () => limiter.consume('k')));
      expect(decisions.filter((d) => d.allowed)).toHaveLength(150);
    });
    expect(sent).toEqual([['FCALL', 'FCALL', 'FCALL', 'FCALL']]); // 64 + 64 + 64 + 8
    expect(errors).toEqual([]);
  });

  it("runs as scripts where the service has no Functions: on the first 'unknown command', for good; one EVALSHA a call", async () => {
    bridge.unsupported.add('FCALL').add('FCALL_RO').add('FUNCTION');
    const store = new RedisStore({ client: upstash({ enableAutoPipelining: false }) });
    const { limiter, errors } = strictLimiter({ algorithm: 'sliding-log', limit: 2, windowMs: 60_000, store });
    await bridge.redis.script('FLUSH');
    // The FCALL is refused; the script is not cached yet: EVALSHA says NOSCRIPT, one EVAL runs it.
    expect(await requestsOf(() => limiter.consume('k'))).toEqual([['FCALL'], ['EVALSHA'], ['EVAL']]);
    expect(store.runsAs).toBe('scripts');
    expect(await requestsOf(() => limiter.consume('k'))).toEqual([['EVALSHA']]);
    expect(await requestsOf(() => limiter.peek('k'))).toEqual([['EVALSHA_RO'], ['EVAL_RO']]);
    expect(await requestsOf(() => limiter.peek('k'))).toEqual([['EVALSHA_RO']]);
    expect((await limiter.consume('k')).allowed).toBe(false);
    expect(errors).toEqual([]);
  });

  it('as scripts, recovers from SCRIPT FLUSH (NOSCRIPT -> EVAL) without losing state, and is one EVALSHA again after', async () => {
    const { limiter, errors } = strictLimiter({
      algorithm: 'fixed-window',
      limit: 3,
      windowMs: 60_000,
      store: new RedisStore({ client: upstash(), mode: 'scripts' }),
    });
    expect((await limiter.consume('k')).remaining).toBe(2);
    await bridge.redis.script('FLUSH');
    expect(await requestsOf(() => limiter.consume('k'))).toEqual([['EVALSHA'], ['EVAL']]);
    expect(await requestsOf(() => limiter.consume('k'))).toEqual([['EVALSHA']]);
    expect((await limiter.consume('k')).allowed).toBe(false);
    // A plain rule: fast.lua alone, as a script of its own.
    expect((await bridge.redis.script('EXISTS', LIBRARY.scripts.fast.sha1, LIBRARY.scripts.write.sha1)) as number[]).toEqual([1, 0]);
    expect(errors).toEqual([]);
  });

  it('loads the library again after FUNCTION FLUSH, counts kept', async () => {
    const { limiter, errors } = strictLimiter({ algorithm: 'gcra', limit: 3, windowMs: 60_000, store: new RedisStore({ client: upstash() }) });
    expect((await limiter.consume('k')).remaining).toBe(2);
    await bridge.redis.call('FUNCTION', 'FLUSH');
    expect((await limiter.consume('k')).remaining).toBe(1);
    expect(errors).toEqual([]);
  });

  it('runs scripts from the first call with a client that has no functions API (before 1.36), and refuses mode functions for it', async () => {
    const client = upstash();
    // What an @upstash/redis before 1.36 looks like: the same client, no `functions`.
    const older = new Proxy(client, { get: (target, name) => (name === 'functions' ? undefined : Reflect.get(target, name)) });
    const store = new RedisStore({ client: older });
    expect(store.runsAs).toBe('scripts');
    const { limiter, errors } = strictLimiter({ limit: 1, windowMs: 60_000, store });
    await limiter.consume('warm');
    expect(await requestsOf(() => limiter.consume('k'))).toEqual([['EVALSHA']]);
    expect((await limiter.consume('k')).allowed).toBe(false);
    expect(errors).toEqual([]);
    expect(() => new RedisStore({ client: older, mode: 'functions' })).toThrow(expect.objectContaining({ code: 'ERR_FG_OPTION' }));
  });

  it("reports what Redis said, not the client's wrapping (which holds the whole command: the library's text)", async () => {
    const store = new RedisStore({ client: upstash(), clock: 'client' });
    // A call the library refuses: a lease whose id does not start with its cost (the limiter never makes one).
    const leases = { prefix: 'said:', rules: compileRules([{ name: 'lease', algorithm: 'concurrency', limit: 5, windowMs: 60_000 }]), now: () => 0 };
    const refused = await store.consume('k', leases, 2, 0, '1.forged').then(
      () => undefined,
      (error: unknown) => error as Error,
    );
    expect(refused?.message).toMatch(/FG_ARG a lease id starts with its cost, got 1\.forged/);
    expect(refused?.message).not.toMatch(/command was/);
    expect(refused?.message.length).toBeLessThan(400);
  });

  describe('when the service does not answer', () => {
    it('is a store error after timeoutMs: onStoreError allows, denies, or an insurance limiter decides', async () => {
      bridge.hold = true;
      const store = new RedisStore({ client: upstash() });
      const allow = createLimiter({ limit: 1, windowMs: 60_000, store, timeoutMs: 100, prefix: 'held:' });
      const started = performance.now();
      const allowed = await allow.consume('k');
      const waited = performance.now() - started;
      expect(allowed).toMatchObject({ allowed: true, storeError: expect.objectContaining({ code: 'ERR_FG_STORE_TIMEOUT' }) });
      expect(waited).toBeGreaterThanOrEqual(95);
      expect(waited).toBeLessThan(2_000);
      const deny = createLimiter({ limit: 1, windowMs: 60_000, store, timeoutMs: 100, onStoreError: 'deny', prefix: 'held:' });
      expect(await deny.consume('k')).toMatchObject({ allowed: false, storeError: expect.objectContaining({ code: 'ERR_FG_STORE_TIMEOUT' }) });
      const insured = createLimiter({
        limit: 1,
        windowMs: 60_000,
        store,
        timeoutMs: 100,
        onStoreError: createLimiter({ limit: 5, windowMs: 60_000 }),
        prefix: 'held:',
      });
      expect(await insured.consume('k')).toMatchObject({ allowed: true, limit: 5, remaining: 4 });
    });

    it('is a store error when the service is unreachable: the request fails, the call is decided at once', async () => {
      const gone = new Upstash({ url: 'http://127.0.0.1:1', token: 't', enableTelemetry: false, retry: false });
      const limiter = createLimiter({ limit: 1, windowMs: 60_000, store: new RedisStore({ client: gone }), timeoutMs: 5_000, onStoreError: 'deny' });
      const decision = await limiter.consume('k');
      expect(decision.allowed).toBe(false);
      expect(decision.storeError?.message).toMatch(/fetch failed|ECONNREFUSED/i);
    });

    it('with localDenyCache, repeats a denial without a request until it may pass', async () => {
      const { limiter, errors } = strictLimiter({
        algorithm: 'fixed-window',
        limit: 1,
        windowMs: 60_000,
        store: new RedisStore({ client: upstash() }),
        localDenyCache: true,
      });
      expect((await limiter.consume('k')).allowed).toBe(true);
      expect(await requestsOf(() => limiter.consume('k'))).toEqual([['FCALL']]);
      // Denied until the window ends: the same call is answered here, the service not asked.
      bridge.hold = true;
      const cached = await limiter.consume('k');
      expect(cached).toMatchObject({ allowed: false, remaining: 0 });
      expect(cached.storeError).toBeUndefined();
      expect(bridge.requests).toEqual([{ path: '/pipeline', commands: [expect.arrayContaining(['FCALL'])] }]);
      expect(errors).toEqual([]);
    });
  });
});
