/*
 * RedisStore on a real Redis Cluster: three masters (and, for the failover,
 * a replica each), started with redis-cli --cluster create on free ports.
 */

import { type RedisClusterServers, startCluster } from '@floodgate/test-support';
import keySlot from 'cluster-key-slot';
import type { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLimiter, type Limiter } from '../limiter.js';
import type { LimiterOptions } from '../options.js';
import type { RuleOptions } from '../rules.js';
import { LIBRARY } from './redis/library.generated.js';
import { RedisStore } from './redis-store.js';

/** Far above any round trip: a slow moment of a loaded machine must not turn a decision into a store error. */
const timeoutMs = 30_000;
/** The limiter's clock with clock: 'client': it stands still, ahead of Redis's own. */
const frozen = () => Date.UTC(2100, 0, 1);

function strictLimiter(options: LimiterOptions): { limiter: Limiter; errors: Error[] } {
  const errors: Error[] = [];
  const limiter = createLimiter({ timeoutMs, onStoreError: 'deny', ...options });
  limiter.on('error', ({ error }) => errors.push(error));
  return { limiter, errors };
}

/** Which master serves a key's slot, by port. */
async function portOfSlot(client: Cluster, slot: number): Promise<number> {
  const ranges = await client.cluster('SLOTS');
  const range = ranges.find(([from, to]) => slot >= from && slot <= to);
  if (range === undefined) throw new Error(`no node serves slot ${slot}`);
  return Number(range[2]?.[1]);
}

describe('RedisStore on a 3-master Redis Cluster', () => {
  let cluster: RedisClusterServers;
  let client: Cluster;

  beforeAll(async () => {
    cluster = await startCluster();
    client = cluster.client();
  }, 90_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  it('runs multi-rule limiters over keys in every slot, one call each, all or nothing', async () => {
    const store = new RedisStore({ client, clock: 'client' });
    const { limiter, errors } = strictLimiter({
      // The limiter's clock stands still: 'per-second' denies the 4th call however long the calls take.
      store,
      now: frozen,
      prefix: 'cluster:',
      rules: [
        { name: 'per-second', algorithm: 'gcra', limit: 3, windowMs: 1000, burst: 3 },
        { name: 'per-minute', algorithm: 'fixed-window', limit: 5, windowMs: 60_000 },
        { name: 'log', algorithm: 'sliding-log', limit: 10, windowMs: 60_000 },
        { name: 'window', algorithm: 'sliding-window', limit: 10, windowMs: 60_000, segments: 4 },
        { name: 'flight', algorithm: 'concurrency', limit: 10, windowMs: 60_000 },
      ],
    });
    const users = Array.from({ length: 30 }, (_, i) => `user:${i}`).concat(['}', '{}', 'x{y}z']);
    for (const user of users) {
      for (let i = 0; i < 3; i++) expect((await limiter.consume(user)).allowed, user).toBe(true);
      const keys = store.keysOf(
        user.replace(/[{}]/g, (c) => (c === '{' ? '%7B' : '%7D')),
        { prefix: 'cluster:', rules: limiter.rules, now: frozen },
      );
      const before = await Promise.all(keys.map((key) => client.dumpBuffer(key)));
      const denied = await limiter.consume(user);
      expect(denied).toMatchObject({ allowed: false, rule: 'per-second' });
      const after = await Promise.all(keys.map((key) => client.dumpBuffer(key)));
      expect(after.map((b) => b?.toString('hex'))).toEqual(before.map((b) => b?.toString('hex')));
    }
    const perNode = await Promise.all(cluster.nodes.map((node) => node.client().dbsize()));
    expect(perNode.every((n) => n > 0)).toBe(true); // the users' keys are spread over the three masters
    expect(errors).toEqual([]);
  });

  it('never admits past any limit with a global rule and per-user rules in other slots, and once every call is back, units used equal calls admitted', async () => {
    // 40 users in many slots, 400 calls at once: per user at most 4 a day, for everyone at most 60.
    const store = new RedisStore({ client });
    const prefix = 'scoped:';
    const rules = [
      { name: 'everyone', scope: 'global', algorithm: 'fixed-window', limit: 60, windowMs: 1_000_000_000_000 },
      { name: 'per-user', scope: 'user', algorithm: 'gcra', limit: 4, windowMs: 1_000_000_000_000 },
      { name: 'per-ip', scope: 'ip', algorithm: 'sliding-log', limit: 7, windowMs: 1_000_000_000_000 },
    ] as const;
    const { limiter, errors } = strictLimiter({ store, prefix, rules: [...rules] });
    const users = Array.from({ length: 40 }, (_, i) => `u${i}`);
    const slots = new Set(users.map((user) => keySlot(`%user:${user}`)));
    expect(slots.size).toBeGreaterThan(30);
    const calls = Array.from({ length: 400 }, (_, i) => ({ user: users[(i * 7) % users.length] as string, ip: `10.0.0.${i % 9}` }));
    const decisions = await Promise.all(calls.map((keys) => limiter.consume(keys)));
    expect(errors).toEqual([]);
    const admitted = calls.filter((_, i) => decisions[i]?.allowed);
    expect(admitted.length).toBeGreaterThan(0);
    expect(admitted.length).toBeLessThanOrEqual(60);
    const count = (values: string[]) => values.reduce((m, v) => m.set(v, (m.get(v) ?? 0) + 1), new Map<string, number>());
    const byUser = count(admitted.map((c) => c.user));
    const byIp = count(admitted.map((c) => c.ip));
    for (const n of byUser.values()) expect(n).toBeLessThanOrEqual(4);
    for (const n of byIp.values()) expect(n).toBeLessThanOrEqual(7);
    // What every rule holds now is exactly what the admitted calls took: denied calls gave back what they took.
    const everyone = await limiter.peek({ user: 'nobody', ip: 'nowhere' });
    expect(everyone.rules[0]?.remaining).toBe(60 - admitted.length);
    for (const user of users) expect((await limiter.peek({ user, ip: 'nowhere' })).rules[1]?.remaining, user).toBe(4 - (byUser.get(user) ?? 0));
    for (let i = 0; i < 9; i++) {
      const ip = `10.0.0.${i}`;
      expect((await limiter.peek({ user: 'nobody', ip })).rules[2]?.remaining, ip).toBe(7 - (byIp.get(ip) ?? 0));
    }
  });

  it('blocks a user across slots: the breach writes only the per-user block, in the user’s slot, whichever slot denied first; as one node would', async () => {
    const prefix = 'blocked:';
    const store = new RedisStore({ client, clock: 'client' });
    const rules = [
      { name: 'per-ip', scope: 'ip', algorithm: 'fixed-window', limit: 3, windowMs: 60_000 },
      { name: 'per-user', scope: 'user', algorithm: 'sliding-log', limit: 2, windowMs: 60_000, blockMs: 900_000 },
      { name: 'everyone', scope: 'global', algorithm: 'gcra', limit: 1_000, windowMs: 60_000 },
    ] satisfies RuleOptions[];
    const { limiter, errors } = strictLimiter({ store, now: frozen, prefix, rules });
    // The same calls on one memory store: the decisions a single node makes.
    const memory = createLimiter({ rules, now: frozen });
    const call = async (keys: { ip: string; user: string }) => {
      const [onCluster, inMemory] = await Promise.all([limiter.consume(keys), memory.consume(keys)]);
      expect(onCluster).toEqual(inMemory);
      return onCluster;
    };
    const u1 = { ip: '10.0.0.1', user: 'u1' };
    const slots = new Set([keySlot('%ip:10.0.0.1'), keySlot('%user:u1'), keySlot('%ip:10.0.0.2'), keySlot('%global')]);
    expect(slots.size).toBe(4); // every key of these calls in a slot of its own
    const redisKeys = (ip: string) => store.keysOf([`%ip:${ip}`, '%user:u1', '%global'], { prefix, rules: limiter.rules, now: frozen });
    const dumps = (ip: string) => Promise.all(redisKeys(ip).map(async (key) => (await client.dumpBuffer(key))?.toString('hex')));
    expect((await call(u1)).allowed).toBe(true);
    expect((await call(u1)).allowed).toBe(true);
    // The third call breaches per-user (the second slot asked): the first slot gives back what it took, the third is not consumed.
    const before = await dumps('10.0.0.1');
    const breach = await call(u1);
    expect(breach).toMatchObject({ allowed: false, rule: 'per-user', retryAfterMs: 900_000 });
    expect(breach.rules[1]?.blocked).toMatchObject({ blockMs: 900_000, leftMs: 900_000, strike: 1, started: true });
    const after = await dumps('10.0.0.1');
    expect(after.map((dump, i) => dump === before[i])).toEqual([true, false, true]);
    // From another address the user is still blocked; the address, and everyone's count, are not charged.
    const u1elsewhere = { ip: '10.0.0.2', user: 'u1' };
    const elsewhere = await dumps('10.0.0.2');
    expect(await call(u1elsewhere)).toMatchObject({ allowed: false, retryAfterMs: 900_000, blocked: { started: false } });
    expect(await dumps('10.0.0.2')).toEqual(elsewhere);
    // Where the first slot asked (per-ip) denies, the user's slot is told the call was denied, and starts the user's block all the same.
    await limiter.reset(u1);
    await memory.reset(u1);
    for (let i = 0; i < 3; i++) await call({ ip: '10.0.0.3', user: `other${i}` }); // 10.0.0.3 is full
    expect((await call({ ip: '10.0.0.3', user: 'u1' })).rules.map((r) => r.allowed)).toEqual([false, true, true]);
    expect((await call(u1)).allowed).toBe(true);
    expect((await call(u1)).allowed).toBe(true);
    const denied = await call({ ip: '10.0.0.3', user: 'u1' });
    expect(denied.rules.map((r) => [r.allowed, r.blocked?.started])).toEqual([
      [false, undefined],
      [false, true],
      [true, undefined],
    ]);
    expect(errors).toEqual([]);
  });

  it('loads the library on every master again when one lost it (FUNCTION FLUSH), and on a master new to the cluster', async () => {
    const store = new RedisStore({ client });
    const { limiter, errors } = strictLimiter({ algorithm: 'fixed-window', limit: 3, windowMs: 1_000_000_000_000, store, prefix: 'reload:' });
    const users = Array.from({ length: 20 }, (_, i) => `r${i}`);
    for (const user of users) expect((await limiter.consume(user)).allowed).toBe(true);
    // One master loses its functions: the call that finds them missing loads them on every master, and is made again.
    const first = cluster.nodes[0]?.client();
    await first?.call('FUNCTION', 'FLUSH');
    for (const user of users) expect((await limiter.consume(user)).remaining, user).toBe(1);
    // A new master takes slots (and keys) from the others: it never had the library.
    const added = await cluster.addMaster();
    await cluster.moveSlotsTo(added, 200);
    let onNew = 0;
    for (const user of users) {
      if ((await portOfSlot(client, keySlot(user))) !== added.port) continue;
      onNew++;
      expect((await limiter.consume(user)).remaining, user).toBe(0); // its count moved with its key
    }
    let fresh = 0;
    for (let i = 0; fresh < 3 && i < 5_000; i++) {
      if ((await portOfSlot(client, keySlot(`n${i}`))) !== added.port) continue;
      fresh++;
      expect((await limiter.consume(`n${i}`)).remaining).toBe(2);
    }
    expect(onNew + fresh).toBeGreaterThan(0);
    const listed = (await added.client().call('FUNCTION', 'LIST', 'LIBRARYNAME', LIBRARY.name)) as unknown[];
    expect(listed).toHaveLength(1);
    expect(errors).toEqual([]);
  }, 120_000);
});

describe('RedisStore on a Redis Cluster with replicas', () => {
  let cluster: RedisClusterServers;

  beforeAll(async () => {
    cluster = await startCluster({ replicas: 1 });
  }, 90_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  it('decides again once a replica took over a dead master: the library came to it with the data', async () => {
    const client = cluster.client();
    const store = new RedisStore({ client });
    const limiter = createLimiter({ algorithm: 'fixed-window', limit: 5, windowMs: 1_000_000_000_000, store, prefix: 'failover:', timeoutMs: 1000 });
    limiter.on('error', () => {});
    const key = 'survivor';
    for (let i = 0; i < 3; i++) expect((await limiter.consume(key)).storeError).toBeUndefined();
    const port = await portOfSlot(client, keySlot(key));
    const master = cluster.nodes.find((node) => node.port === port);
    // WAIT on the key's own master: its replica holds the count before the master dies.
    expect(await master?.client().wait(1, 10_000)).toBe(1);
    await master?.stop('SIGKILL');
    let decision = await limiter.consume(key);
    const deadline = Date.now() + 30_000;
    while (decision.storeError !== undefined && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      decision = await limiter.consume(key);
    }
    expect(decision.storeError).toBeUndefined();
    // The promoted replica had the 3 counted: at most 1 left (fewer when a call sent during the failover
    // ran late on the new master, which only counts against the key), not the 4 of a fresh key.
    expect(decision.remaining).toBeLessThanOrEqual(1);
    // The node asked may not have heard of the new master yet (it answers with none, or with the dead one):
    // ask until one has.
    let served: number | undefined;
    while ((served === undefined || served === port) && Date.now() < deadline + 10_000) {
      served = await portOfSlot(client, keySlot(key)).catch(() => undefined);
      if (served === undefined || served === port) await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(served).toBeDefined();
    expect(served).not.toBe(port);
  }, 90_000);
});
