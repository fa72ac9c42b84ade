// CI check: every level of the example over real HTTP, each denial checked for
// the level and rule that bound it. Clients are told apart by X-Forwarded-For
// (the example trusts its loopback proxy). The example's clock (Date.now) stands
// still (frozen-clock.mjs), so no bucket refills and no window ends while the
// requests run, however slow the machine.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { listeningUrl } from '../example-test.mjs';

const frozenClock = new URL('../frozen-clock.mjs', import.meta.url).href;

/** Starts index.js on a free port; resolves once it listens. @param {Record<string, string>} env */
async function start(env = {}) {
  const child = spawn(process.execPath, ['--import', frozenClock, 'index.js'], {
    cwd: import.meta.dirname,
    env: { ...process.env, PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await listeningUrl(child, 15_000);
  let admitted = 0;
  /** GET /api/search as the client at `ip`, signed in as `user` if given. @param {string} ip @param {string} [user] */
  const search = async (ip, user) => {
    /** @type {Record<string, string>} */
    const headers = { 'x-forwarded-for': ip };
    if (user !== undefined) headers['x-user-id'] = user;
    const res = await fetch(new URL('/api/search', url), { headers });
    const text = await res.text();
    if (res.status === 200) admitted++;
    return { status: res.status, headers: res.headers, body: res.headers.get('content-type')?.includes('json') ? JSON.parse(text) : text };
  };
  return { search, admitted: () => admitted, stop: () => child.kill() };
}

describe('multi-level: per IP, per user, global rate, allow and deny lists', () => {
  /** @type {Awaited<ReturnType<typeof start>>} */
  let app;
  before(async () => {
    app = await start();
  });
  after(() => app?.stop());

  it('answers a deny-listed network 403 without asking any limiter', async () => {
    for (let i = 0; i < 5; i++) {
      const res = await app.search('203.0.113.9');
      assert.equal(res.status, 403);
      assert.equal(res.body, 'Forbidden');
      assert.equal(res.headers.get('x-ratelimit-limit'), null);
    }
  });

  it('per IP: admits a burst of 3, then the 4th gets 429 from the per-ip rule', async () => {
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await app.search('198.51.100.1')).status);
    assert.deepEqual(statuses, [200, 200, 200]);
    const denied = await app.search('198.51.100.1');
    assert.equal(denied.status, 429);
    assert.deepEqual([denied.body.level, denied.body.rule], ['ip', 'per-ip']);
    assert.equal(denied.headers.get('x-ratelimit-limit'), '1');
    assert.ok(Number(denied.headers.get('retry-after')) >= 1);
    // Another address is its own client.
    assert.equal((await app.search('198.51.100.2')).status, 200);
  });

  it('per user: 20 requests a minute from any address, then 429 from the per-minute rule', async () => {
    for (let i = 1; i <= 20; i++) {
      const res = await app.search(`192.0.2.${i}`, 'ada');
      assert.equal(res.status, 200, `request ${i}`);
    }
    const denied = await app.search('192.0.2.21', 'ada');
    assert.equal(denied.status, 429);
    assert.deepEqual([denied.body.level, denied.body.rule], ['user', 'per-minute']);
    assert.equal(denied.headers.get('x-ratelimit-limit'), '20');
    assert.ok(Number(denied.headers.get('retry-after')) >= 1);
    // Another user from an address ada used is not limited by ada's count.
    assert.equal((await app.search('192.0.2.1', 'bob')).status, 200);
  });

  it('allow list: internal addresses skip the per-IP and per-user levels', async () => {
    for (let i = 0; i < 5; i++) {
      const res = await app.search('10.0.0.7', 'ada'); // ada is over her per-user limit, and 5 > the per-IP burst
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-ratelimit-limit'), null, 'neither per-IP nor per-user headers');
      assert.ok(['global-rate', 'in-flight'].includes(res.body.decision.rule), res.body.decision.rule);
    }
  });

  it('global: after 1000 admitted requests from anyone, 429 from the global-rate rule for everyone', async () => {
    let denied;
    while (app.admitted() <= 1_000) {
      const res = await app.search('10.0.0.8'); // internal: only the global level counts it
      if (res.status !== 200) {
        denied = res;
        break;
      }
    }
    assert.ok(denied, 'denied within 1001 admitted requests');
    assert.equal(denied.status, 429);
    assert.equal(app.admitted(), 1_000, 'every request admitted in this run counted against the global budget');
    assert.deepEqual([denied.body.level, denied.body.rule], ['global', 'global-rate']);
    const outsider = await app.search('198.51.100.77', 'carol');
    assert.equal(outsider.status, 429);
    assert.deepEqual([outsider.body.level, outsider.body.rule], ['global', 'global-rate']);
  });
});

describe('multi-level: searches in flight', () => {
  /** @type {Awaited<ReturnType<typeof start>>} */
  let app;
  before(async () => {
    // Each search holds its lease for 2 s: 60 sent at once overlap.
    app = await start({ SEARCH_LATENCY_MS: '2000' });
  });
  after(() => app?.stop());

  it('admits 50 at once; the others get 429 from the in-flight rule; leases end with the responses', async () => {
    const results = await Promise.all(Array.from({ length: 60 }, () => app.search('10.0.0.9')));
    const denied = results.filter((r) => r.status === 429);
    assert.equal(results.filter((r) => r.status === 200).length, 50);
    assert.equal(denied.length, 10);
    for (const res of denied) assert.deepEqual([res.body.level, res.body.rule], ['global', 'in-flight']);
    // All 50 responses are sent: their leases are released, so the next search passes.
    assert.equal((await app.search('10.0.0.9')).status, 200);
  });
});
