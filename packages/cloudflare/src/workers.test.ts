/*
 * @floodgate/cloudflare in workerd, the runtime of Cloudflare Workers: the
 * Worker of ./test-support/app.ts (Floodgate's fetch and Hono adapters on
 * the Durable Object store, and on RedisStore over @upstash/redis), with its
 * Durable Objects stored on disk, hit over HTTP on loopback. The REST bridge
 * it reaches Redis through runs here, in front of a private redis-server.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { useRedisServer, useRestBridge, useWorkerd } from '@floodgate/test-support';
import { afterAll, describe, expect, it } from 'vitest';

const redisServer = useRedisServer();
const bridge = useRestBridge(() => redisServer.server.port);
const storage = mkdtempSync(join(tmpdir(), 'floodgate-durable-objects-'));
/** How late the objects of SlowDurableObject answer. */
const SLOW_MS = 1_000;
const worker = useWorkerd(() => ({
  entry: fileURLToPath(new URL('./test-support/app.ts', import.meta.url)),
  durableObjects: { FLOODGATE: 'FloodgateDurableObject', SLOW: 'SlowDurableObject', SHORT: 'ShortLivedDurableObject' },
  storage: { dir: storage },
  vars: { BRIDGE_URL: bridge.url, BRIDGE_TOKEN: bridge.token, SLOW_MS: String(SLOW_MS) },
  loopbackOutbound: true,
}));

afterAll(() => {
  rmSync(storage, { recursive: true, force: true });
});

const get = (path: string, user?: string) => fetch(`${worker.url}${path}`, { headers: user === undefined ? {} : { 'x-user-id': user } });

/** Sends `count` requests at once; the statuses and X-RateLimit-Remaining of each. */
async function burst(count: number, path: (i: number) => string, user: (i: number) => string | undefined = () => undefined) {
  const responses = await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const res = await get(path(i), user(i));
      await res.arrayBuffer();
      return { status: res.status, remaining: res.headers.get('x-ratelimit-remaining'), user: user(i) };
    }),
  );
  return responses;
}

describe('DurableObjectStore in workerd', () => {
  for (const [adapter, path] of [
    ['@floodgate/fetch', (i: number) => `/fetch/${i}`],
    ['@floodgate/hono', (i: number) => `/hono/${i}`],
  ] as const) {
    it(`${adapter}: 500 requests at once, at a limit of 100, admit exactly 100, each seeing its own count`, async () => {
      const started = performance.now();
      const responses = await burst(500, path, () => (adapter === '@floodgate/hono' ? 'burst' : undefined));
      console.log(`[workers] ${adapter}: 500 concurrent requests in ${Math.round(performance.now() - started)} ms`);
      const admitted = responses.filter((r) => r.status === 200);
      expect(admitted).toHaveLength(100);
      expect(responses.filter((r) => r.status === 429)).toHaveLength(400);
      // One object decided them one at a time: each admitted request saw another remaining count.
      expect(new Set(admitted.map((r) => r.remaining)).size).toBe(100);
      expect(admitted.map((r) => Number(r.remaining)).sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, i) => i));
    });
  }

  it('keeps every count across a restart of the runtime (storage on disk): nothing decided is lost', async () => {
    const before = await burst(
      7,
      () => '/hono/restart',
      () => 'persisted',
    );
    expect(before.map((r) => r.status)).toEqual(Array(7).fill(200));
    await worker.restart(); // SIGKILL: no graceful shutdown
    const after = await get('/hono/restart', 'persisted');
    expect([after.status, after.headers.get('x-ratelimit-remaining')]).toEqual([200, '92']);
    // The burst of 500 before the restart still counts too.
    expect((await get('/fetch/after-restart')).status).toBe(429);
  });

  it('a login rule (5 tries a minute, blockMs 15 min, maxBlockMs 1 h): the breach blocks past the window, survives a restart, escalates, and reset lifts it', async () => {
    const start = Date.UTC(2030, 0, 1, 12, 0, 0); // on the limiter's clock (clock: 'client'): each request says when it is made
    const tryLogin = async (at: number) => {
      const res = await fetch(`${worker.url}/login?at=${at}`, { headers: { 'x-user-id': 'mallory' } });
      const body = res.status === 429 ? ((await res.json()) as { blocked: unknown }).blocked : await res.text();
      return { status: res.status, retryAfter: res.headers.get('retry-after'), remaining: res.headers.get('x-ratelimit-remaining'), body };
    };
    const blocks = async () => (await fetch(`${worker.url}/login/blocks`)).json();
    /** A try denied by a block: 429, nothing left, Retry-After in seconds, and the decision's `blocked`. */
    const blocked = (retryAfter: string, block: { blockMs: number; leftMs: number; strike: number; started: boolean }, at: number) => ({
      status: 429,
      retryAfter,
      remaining: '0',
      body: { ...block, untilMs: at + block.leftMs },
    });
    const tries = [];
    for (let i = 0; i < 5; i++) tries.push((await tryLogin(start + i * 1_000)).status);
    expect(tries).toEqual([200, 200, 200, 200, 200]);
    // The sixth try within the minute: blocked for 15 minutes, where the window alone would wait 55 s.
    const breach = start + 5_000;
    expect(await tryLogin(breach)).toEqual(blocked('900', { blockMs: 900_000, leftMs: 900_000, strike: 1, started: true }, breach));
    expect(await blocks()).toEqual([{ key: 'mallory', rule: 'default', blockMs: 900_000, until: breach + 900_000, strike: 1 }]);
    // Two minutes on, the window has reset long ago: still blocked, and the tries during the block extend nothing.
    expect(await tryLogin(start + 120_000)).toEqual(blocked('785', { blockMs: 900_000, leftMs: 785_000, strike: 1, started: false }, start + 120_000));
    // The block is in the object's storage: a kill of the runtime loses none of it.
    await worker.restart();
    expect(await tryLogin(breach + 900_000 - 1)).toEqual(blocked('1', { blockMs: 900_000, leftMs: 1, strike: 1, started: false }, breach + 900_000 - 1));
    // It ends on time: the window decides again, 5 tries...
    const ended = breach + 900_000;
    const again = [];
    for (let i = 0; i < 5; i++) again.push((await tryLogin(ended)).status);
    expect(again).toEqual([200, 200, 200, 200, 200]);
    // ... and the next breach, within an hour of the last block, is blocked twice as long: the object kept the strike.
    expect(await tryLogin(ended)).toEqual(blocked('1800', { blockMs: 1_800_000, leftMs: 1_800_000, strike: 2, started: true }, ended));
    expect(await blocks()).toEqual([{ key: 'mallory', rule: 'default', blockMs: 1_800_000, until: ended + 1_800_000, strike: 2 }]);
    // reset() lifts the block at once, with the count and the strikes: the next breach is a first one again.
    expect((await fetch(`${worker.url}/login/reset?user=mallory`)).status).toBe(200);
    expect(await tryLogin(ended + 1_000)).toEqual({ status: 200, retryAfter: null, remaining: '4', body: 'welcome' });
    const afterReset = [];
    for (let i = 0; i < 4; i++) afterReset.push((await tryLogin(ended + 1_000)).status);
    expect(afterReset).toEqual([200, 200, 200, 200]);
    expect(await tryLogin(ended + 1_000)).toEqual(blocked('900', { blockMs: 900_000, leftMs: 900_000, strike: 1, started: true }, ended + 1_000));
  });

  it('rules of two scopes in two objects: under concurrency no rule admits past its limit, and denied calls give back what they took', async () => {
    // 3 an hour per user, 10 an hour for everyone: 12 users x 5 requests at once.
    const responses = await burst(
      60,
      () => '/scoped',
      (i) => `u${i % 12}`,
    );
    const admitted = responses.filter((r) => r.status === 200);
    expect(admitted.length).toBeGreaterThan(0);
    expect(admitted.length).toBeLessThanOrEqual(10);
    for (let u = 0; u < 12; u++) expect(admitted.filter((r) => r.user === `u${u}`).length).toBeLessThanOrEqual(3);
    // Every call has returned: the global count holds exactly the calls admitted, nothing a denied call took.
    let more = 0;
    for (let u = 100; ; u++) {
      const res = await get('/scoped', `u${u}`);
      await res.arrayBuffer();
      if (res.status !== 200) break;
      more++;
    }
    expect(admitted.length + more).toBe(10);
  });

  it('expires state with an alarm: an object holds nothing once its states have ended', async () => {
    const first = await get('/short', 'alarm');
    expect(first.status).toBe(200);
    const name = 'key:fg:x-user-id:alarm'; // keyBy.header('x-user-id') keys by `x-user-id:<value>`
    const held = (await (await get(`/object?namespace=SHORT&name=${encodeURIComponent(name)}`)).json()) as { entries: number; alarm: number | null };
    expect(held.entries).toBe(1);
    expect(held.alarm).toBeGreaterThan(Date.now() - 1_000);
    // The window of 1 s ends; the alarm (at most every 200 ms in this class) drops the state.
    const deadline = Date.now() + 10_000;
    let now = held;
    while (now.entries > 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      now = (await (await get(`/object?namespace=SHORT&name=${encodeURIComponent(name)}`)).json()) as typeof held;
    }
    expect(now).toEqual({ entries: 0, alarm: null });
    expect((await get('/short', 'alarm')).status).toBe(200);
  });

  it('refuses a call it cannot read with 400 and says why; a rule it does not know is refused the same way', async () => {
    const post = (body: unknown) => fetch(`${worker.url}/object?name=raw`, { method: 'POST', body: JSON.stringify(body) });
    const bad = await post({ op: 'drop' });
    expect([bad.status, ((await bad.json()) as { error: string }).error]).toEqual([
      400,
      "Floodgate's Durable Object takes calls of DurableObjectStore: no known op",
    ]);
    const rule = await post({ op: 'consume', now: null, cost: 1, lease: '', rules: [[{ name: 'r', algorithm: 'leaky', limit: 1, windowMs: 1 }, 'e:k']] });
    expect(rule.status).toBe(400);
    expect(((await rule.json()) as { error: string }).error).toMatch(/rule\.algorithm must be one of/);
  });

  describe('when an object does not answer in time (timeoutMs 100, objects answering after 1 s)', () => {
    it("onStoreError 'allow' serves the request without rate-limit headers, after timeoutMs", async () => {
      const started = performance.now();
      const res = await get('/slow?policy=allow', 'slow-allow');
      const took = performance.now() - started;
      expect([res.status, await res.text()]).toEqual([200, 'ok']);
      expect(res.headers.get('x-ratelimit-limit')).toBeNull();
      expect(took).toBeGreaterThanOrEqual(90);
      expect(took).toBeLessThan(SLOW_MS);
    });

    it("onStoreError 'deny' answers 503 with Retry-After: 1", async () => {
      const res = await get('/slow?policy=deny', 'slow-deny');
      expect([res.status, res.headers.get('retry-after')]).toEqual([503, '1']);
    });

    it('an insurance limiter decides instead: its limit of 2 holds', async () => {
      const statuses = [];
      for (let i = 0; i < 3; i++) statuses.push((await get('/slow?policy=insurance', 'slow-insured')).status);
      expect(statuses).toEqual([200, 200, 429]);
    });

    it('localDenyCache: a denial is repeated without asking the object until it may pass', async () => {
      // timeoutMs 10 s here: the object is slow, not failing. Admitted, then denied by the object...
      expect((await get('/slow?policy=cached', 'slow-cached')).status).toBe(200);
      const denied = await get('/slow?policy=cached', 'slow-cached');
      expect(denied.status).toBe(429);
      // ... then denied again at once, with the numbers of that denial.
      const started = performance.now();
      const cached = await get('/slow?policy=cached', 'slow-cached');
      expect(performance.now() - started).toBeLessThan(SLOW_MS);
      expect([cached.status, cached.headers.get('x-ratelimit-remaining'), cached.headers.get('x-ratelimit-limit')]).toEqual([429, '0', '1']);
      // The wait of the object's denial, less the time since (fixed windows of an hour, on the hour).
      expect(Number(cached.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(Number(cached.headers.get('retry-after'))).toBeLessThanOrEqual(Number(denied.headers.get('retry-after')));
    });
  });
});

describe('RedisStore over @upstash/redis in workerd (through the REST bridge)', () => {
  it('limits per user with one request to Redis a call, state in Redis', async () => {
    bridge.requests.length = 0;
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await get('/redis', 'edge-user');
      statuses.push(res.status);
      if (res.status === 200) expect(await res.json()).toEqual({ runsAs: 'functions', user: 'edge-user' });
      else await res.arrayBuffer();
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
    // The first FCALL found the library missing: it was loaded, and the FCALL sent again; then one FCALL a request.
    const commands = bridge.requests.map((r) => r.commands.map(([name]) => name).join('+'));
    expect(commands).toEqual(['FCALL', 'FUNCTION', ...Array<string>(6).fill('FCALL')]);
    const keys = await bridge.redis.keys('fg:{x-user-id:edge-user}:*');
    expect(keys).toEqual(['fg:{x-user-id:edge-user}:default:v2']);
    expect(await bridge.redis.pttl(keys[0] as string)).toBeGreaterThan(0);
  });
});
