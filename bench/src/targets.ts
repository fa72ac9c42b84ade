/*
 * The targets of the open issues (14 scopes, 15 plans and waiting, 16
 * Fastify and NestJS, 17 the edge, 18 the Redis redesign and the memory hot
 * path, 20.2 eviction, 28 the SQL stores), and those of issue 7 that still matter, checked
 * against one run. Each is a ratio measured in the same run as what it
 * compares with (or a byte count, a CPU time, a correctness count). When one
 * does not hold, `bound` says what the run measured about why: time per call
 * and where it goes, Redis's time and instructions per call, a database's
 * statements and CPU per call, round trips, or the CPU left on a two-core
 * machine.
 */
import { exactContenders } from './accuracy.js';
import type { EdgeContenderId } from './edge.js';
import { type HttpRow, serverMicrosPerRequest } from './http.js';
import type { Framework, Variant } from './http-apps.js';
import type { MemoryContenderId } from './memory-contenders.js';
import { operateTargets } from './operate.js';
import type { Profile } from './profile.js';
import type { RedisContenderId } from './redis-contenders.js';
import type { BenchResults } from './results.js';
import { type SqlScenario, sqlScenarios } from './sql.js';
import { type SqlContenderId, sqlContenderInfo } from './sql-contenders.js';
import { formatNumber, formatRatio, median, pairedRatio, ratioRange } from './stats.js';

export interface Target {
  /** The issue that set it: '18', '18.7', '20.2', '14', '15', '16', '17', '28', or '7' (kept from the first round). */
  issue: string;
  area: string;
  requirement: string;
  measured: string;
  holds: boolean;
  /** Why it does not hold, from what the run measured. */
  bound?: string;
}

function topFrames(profiles: readonly Profile[] | undefined, scenarioStart: string, count = 3): string {
  const profile = profiles?.find((p) => p.scenario.startsWith(scenarioStart));
  if (profile === undefined) return '';
  const frames = profile.topFunctions.filter((f) => !f.name.startsWith('(idle)')).slice(0, count);
  return ` Profile (${profile.file}): ${frames.map((f) => `\`${f.name}\` ${f.selfPercent}%`).join(', ')}.`;
}

function cpu(row: HttpRow): string {
  return (
    `autocannon ${formatNumber(median(row.loadGeneratorCpu))}%, server ${formatNumber(median(row.serverCpu))}%, redis-server ${formatNumber(median(row.redisCpu))}% of one core` +
    ` (server ${formatNumber(serverMicrosPerRequest(row), 1)} µs of CPU per request)`
  );
}

/** What adds up to one awaited call of an in-process limiter, from the run's own rows (main-thread CPU ns per call). */
function memoryBreakdown(results: BenchResults, scenario: 'hot' | 'random', id: MemoryContenderId, peer: MemoryContenderId): string {
  const memory = results.memory;
  if (memory === undefined) return '';
  const ns = (who: MemoryContenderId) => 1e9 / median(memory.cpuThroughput[scenario][who]);
  const clock = ns('clock');
  const own = ns(id);
  const theirs = ns(peer);
  if (!Number.isFinite(own) || !Number.isFinite(clock)) return '';
  return (
    ` Main-thread CPU per call: ${formatNumber(own)} ns for Floodgate, ${formatNumber(theirs)} ns for ${peer}, ${formatNumber(ns('map'))} ns for the Map baseline,` +
    ` and ${formatNumber(clock)} ns for an awaited \`Date.now()\` alone (the clock and the promise every contender pays): beyond those, ${peer} spends` +
    ` ${formatNumber(theirs - clock)} ns (a Map lookup, then it increments a field of the object it keeps per key and answers that same object) and Floodgate ${formatNumber(own - clock)} ns:` +
    " checking the key and cost, finding the key's slot, the algorithm's arithmetic on its state, and building the RuleDecision, its array and the Decision the contract returns for every call" +
    ` (${formatNumber(((own - clock) / own) * 100)}% of its time). Matching ${peer} would leave Floodgate ${formatNumber(Math.max(0, theirs - clock))} ns for all of that.`
  );
}

/**
 * What a Floodgate call does in redis-server, for the bound of a missed Redis
 * target: its time in the function (INFO commandstats) and instructions
 * (callgrind) against rate-limit-redis's and the floor's.
 */
function redisBound(results: BenchResults, id: RedisContenderId, mode: 'sequential' | 'concurrent'): string {
  const redis = results.redis;
  if (redis === undefined) return '';
  const micros = (who: RedisContenderId) => median(redis.redisMicrosPerCall.concurrent[who] ?? []);
  const counted = (who: RedisContenderId) => results.redisInstructions?.rows.find((row) => row.contender === who)?.instructionsPerCall;
  const own = counted(id);
  const peer = counted('rate-limit-redis');
  const floor = counted('floor');
  const commands = (who: RedisContenderId) =>
    `${formatNumber(redis.sentPerCall[who] ?? Number.NaN, 2)} sent, ${formatNumber(redis.commandsPerCall[who] ?? Number.NaN, 2)} run`;
  return (
    `Redis time per call in the script or function (INFO commandstats, 64 in flight): ${formatNumber(micros(id), 1)} µs for Floodgate, ${formatNumber(micros('rate-limit-redis'), 1)} µs for rate-limit-redis, ${formatNumber(micros('floor'), 1)} µs for the floor;` +
    ` commands per call (sent by the client; run by Redis, those its scripts call included): ${commands(id)} for Floodgate, ${commands('rate-limit-redis')} for rate-limit-redis, ${commands('floor')} for the floor.` +
    (own !== undefined && peer !== undefined && floor !== undefined
      ? ` Callgrind inside redis-server: ${formatNumber(own / 1000, 1)}k instructions per call, ${formatNumber(peer / 1000, 1)}k for rate-limit-redis, ${formatNumber(floor / 1000, 1)}k for the floor.`
      : '') +
    (mode === 'concurrent'
      ? " With 64 calls in flight Redis's one thread and the client's share the machine's two cores, so both the function's time and the client's CPU per call set the rate." +
        ` Socket writes per call: ${formatNumber(redis.writesPerCall?.[id] ?? Number.NaN, 2)} for Floodgate, ${formatNumber(redis.writesPerCall?.['rate-limit-redis'] ?? Number.NaN, 2)} for rate-limit-redis, ${formatNumber(redis.writesPerCall?.floor ?? Number.NaN, 2)} for the floor.` +
        topFrames(results.profiles, 'Floodgate RedisStore')
      : ' Awaited in turn, a call costs a round trip on loopback plus the client and server time; the differences above are what is left between the libraries.' +
        sequentialSpread(redis, id))
  );
}

/** How far apart the rounds of a sequential row were: its ratios to rate-limit-redis, and each library's to the floor. */
function sequentialSpread(redis: NonNullable<BenchResults['redis']>, id: RedisContenderId): string {
  const t = redis.throughput.sequential;
  const [low, high] = ratioRange(t[id] ?? [], t['rate-limit-redis'] ?? []);
  const toFloor = (who: RedisContenderId) => formatRatio(pairedRatio(t[who] ?? [], t.floor ?? []));
  return (
    ` Per round, Floodgate ran at ${formatNumber(low, 2)}–${formatNumber(high, 2)}× rate-limit-redis;` +
    ` against the floor, Floodgate ${toFloor(id)} and rate-limit-redis ${toFloor('rate-limit-redis')} (median of rounds).`
  );
}

/** How issue 28's targets name a scenario. */
export function sqlScenarioLabel(scenario: SqlScenario, inFlight: number): string {
  return scenario === 'sequential' ? 'sequential' : scenario === 'concurrent' ? `${inFlight} in flight, 100k keys` : `${inFlight} in flight, one hot key`;
}

/**
 * What a SQL row's rate is made of, from the run's own numbers: the time of a call against the CPU it
 * used (the database server's, from /proc, and the harness's: the library and its driver), the
 * statements it sent (each a round trip; MySQL: and those its procedure ran), its log bytes, and,
 * with calls in flight, how much CPU per call the target would leave on this machine's cores.
 */
function sqlBound(results: BenchResults, own: SqlContenderId, peer: SqlContenderId, scenario: SqlScenario, need: number): string {
  const sql = results.sql;
  if (sql === undefined) return '';
  const cores = results.machine.cores;
  const rate = (who: SqlContenderId) => median(sql.throughput[scenario][who] ?? []);
  const server = (who: SqlContenderId) => median(sql.serverMicrosPerCall[scenario][who] ?? []);
  const client = (who: SqlContenderId) => median(sql.clientMicrosPerCall[scenario][who] ?? []);
  const log = (who: SqlContenderId) => median(sql.logBytesPerCall[scenario][who] ?? []);
  const name = (who: SqlContenderId) => (who === own ? 'Floodgate' : sqlContenderInfo[who].short);
  const hasServer = Number.isFinite(server(own));
  const cpu = (who: SqlContenderId) => (hasServer ? server(who) : 0) + client(who);
  const cost = (who: SqlContenderId) => {
    const wall = 1e6 / rate(who);
    const parts = hasServer
      ? `${formatNumber(server(who))} µs of server CPU + ${formatNumber(client(who))} µs of client CPU`
      : `${formatNumber(client(who))} µs of CPU (all in-process)`;
    return scenario === 'sequential' || !hasServer
      ? // Awaited in turn (or SQLite's synchronous transactions, which take turns on the main thread), nothing overlaps:
        // what the CPU does not account for is waiting (round trips, the commit's write and flush).
        `${name(who)} ${formatNumber(wall)} µs per call = ${parts} + ${formatNumber(Math.max(0, wall - cpu(who)))} µs waiting`
      : // In flight, calls overlap: the interval between two answers, and how many cores the CPU per call kept busy.
        `${name(who)} one answer every ${formatNumber(wall)} µs, ${parts} per call: ${formatNumber((cpu(who) * rate(who)) / 1e6, 2)} of ${cores} cores busy`;
  };
  const sent = (who: SqlContenderId) => formatNumber(sql.sentPerCall[scenario][who] ?? Number.NaN, 2);
  const run = (who: SqlContenderId) => sql.runPerCall[scenario][who] ?? Number.NaN;
  const prepared = (who: SqlContenderId) => sql.preparedPerCall[scenario][who] ?? Number.NaN;
  const [low, high] = ratioRange(sql.throughput[scenario][own] ?? [], sql.throughput[scenario][peer] ?? []);
  const budget = (cores * 1e6) / (need * rate(peer));
  const database = sqlContenderInfo[own].database;
  return (
    `${cost(own)}; ${cost(peer)}.` +
    ` Statements per call${database === 'sqlite' ? '' : ' sent (each a round trip)'}: ${sent(own)} for Floodgate, ${sent(peer)} for ${name(peer)}` +
    (Number.isFinite(run(own)) ? `; run by the server, those inside procedures included: ${formatNumber(run(own), 1)} and ${formatNumber(run(peer), 1)}` : '') +
    (Number.isFinite(prepared(own)) ? `; prepared per call: ${formatNumber(prepared(own), 2)} and ${formatNumber(prepared(peer), 2)}` : '') +
    '.' +
    (Number.isFinite(log(own))
      ? ` Log bytes written per call (${database === 'postgres' ? 'WAL' : 'redo'}): ${formatNumber(log(own))} and ${formatNumber(log(peer))}.`
      : '') +
    (!hasServer
      ? ' SQLite runs each transaction synchronously on the main thread, so calls in flight take turns; waiting is time that thread was blocked or off the cores: a commit writing and syncing the WAL, or other processes running.'
      : scenario === 'sequential'
        ? " Waiting is time neither the client nor the server was on a core for the call: loopback round trips, the commit's log flush, or other processes running."
        : ` ${formatRatio(need)} ${name(peer)}'s rate on ${cores} cores leaves at most ${formatNumber(budget)} µs of CPU per call, server and client together; Floodgate used ${formatNumber(cpu(own))}.` +
          topFrames(sql.profiles, `Floodgate ${sqlContenderInfo[own].short}`, 4)) +
    ` Per round, Floodgate ran at ${formatNumber(low, 2)}–${formatNumber(high, 2)}× ${name(peer)}.`
  );
}

export function evaluateTargets(results: BenchResults): Target[] {
  const targets: Target[] = [];
  const { memory, redis, sql, edge, http, accuracy, profiles, redisInstructions } = results;
  const add = (target: Target) => targets.push(target);

  if (memory !== undefined) {
    const t = memory.throughput;
    for (const [id, name] of [
      ['floodgate-fixed-window', 'fixed-window'],
      ['floodgate-gcra', 'gcra'],
    ] as const) {
      const hot = pairedRatio(t.hot[id], t.hot['express-rate-limit']);
      add({
        issue: '18.7',
        area: 'memory',
        requirement: `${name} ≥ 1.0× express-rate-limit, hot key`,
        measured: formatRatio(hot),
        holds: hot >= 1,
        ...(hot >= 1
          ? {}
          : {
              bound: `CPU-bound in-process work per call.${memoryBreakdown(results, 'hot', id, 'express-rate-limit')}${topFrames(profiles, 'Floodgate MemoryStore gcra, one hot key')}`,
            }),
      });
      const random = pairedRatio(t.random[id], t.random['express-rate-limit']);
      add({
        issue: '7',
        area: 'memory',
        requirement: `${name} ≥ 1.1× express-rate-limit, ${memory.randomKeys / 1000}k keys`,
        measured: formatRatio(random),
        holds: random >= 1.1,
        ...(random >= 1.1
          ? {}
          : {
              bound: `CPU-bound in-process work per call.${memoryBreakdown(results, 'random', id, 'express-rate-limit')}${topFrames(profiles, 'Floodgate MemoryStore fixed-window, 100k')}`,
            }),
      });
      const heap = memory.heapBytesPerKey[id];
      add({
        issue: '18',
        area: 'memory',
        requirement: `${name} ≤ 70 heap bytes per key (${memory.heapKeys / 1e6}M keys)`,
        measured: `${formatNumber(heap, 1)} B`,
        holds: heap <= 70,
        ...(heap <= 70
          ? {}
          : {
              bound: `A key costs its Map entry, its slot of numbers (the expiry and the algorithm's state: ${name === 'gcra' ? '5' : '3'} × 8 bytes) and a byte; measured at ${memory.heapKeys.toLocaleString('en-US')} keys, where the Map's own table is not yet amortised over a million keys when the run is quick.`,
            }),
      });
    }
    const { eviction } = memory;
    const worst = Math.max(...eviction.overNs);
    const evictionRatio = worst / eviction.fillingNs;
    add({
      issue: '20.2',
      area: 'memory',
      requirement: `a new key past maxKeys (${eviction.maxKeys / 1000}k) costs ≤ 2× a new key while filling`,
      measured: `${formatNumber(worst)} ns vs ${formatNumber(eviction.fillingNs)} ns (${formatRatio(evictionRatio)})`,
      holds: evictionRatio <= 2,
      ...(evictionRatio <= 2
        ? {}
        : {
            bound: `Each new key past the bound evicts one (a Map delete, and a re-insert for each key the second-chance hand spares): ${eviction.overNs.map((ns) => formatNumber(ns)).join(', ')} ns per new key over ${eviction.overNs.length} rounds of ${eviction.maxKeys.toLocaleString('en-US')}; it does not rise with the evictions done.`,
          }),
    });
    const plansCost = 1 / pairedRatio(t.hot['floodgate-fixed-window-plans'], t.hot['floodgate-fixed-window']);
    const plansRandom = 1 / pairedRatio(t.random['floodgate-fixed-window-plans'], t.random['floodgate-fixed-window']);
    const nsOf = (scenario: 'hot' | 'random', id: MemoryContenderId) => 1e9 / median(memory.cpuThroughput[scenario][id]);
    add({
      issue: '15',
      area: 'memory',
      requirement: 'one of 3 plans per call (`{ rules }`) costs ≤ 1.1× a static limiter, hot key',
      measured: `${formatRatio(plansCost)} the cost (${memory.randomKeys / 1000}k keys: ${formatRatio(plansRandom)})`,
      holds: plansCost <= 1.1,
      ...(plansCost <= 1.1
        ? {}
        : {
            bound:
              `Main-thread CPU per call on the hot key: ${formatNumber(nsOf('hot', 'floodgate-fixed-window-plans'))} ns with a plan per call, ${formatNumber(nsOf('hot', 'floodgate-fixed-window'))} ns static.` +
              " A call with rules checks its options object's names (a for-in over it), finds the plan's compiled rule set by the array's identity, and the store finds the plan's tables (each among the last few it saw); with nothing else to do on one hot key, those are a visible share of a call. On 100k keys, where finding a key's state costs more, the same work is " +
              `${formatRatio(plansRandom)} the cost.`,
          }),
    });
    const { waiting } = memory;
    const addedPerSecond = ((waiting.waitingCpuMs - waiting.idleCpuMs) / waiting.waitMs) * 1000;
    add({
      issue: '15',
      area: 'memory',
      requirement: `\`wait()\` with ${waiting.waiters} waiters on one key adds ≤ 2 ms of CPU per second (0.2% of a core) over idle`,
      measured: `${formatNumber(addedPerSecond, 2)} ms/s (${formatNumber(waiting.waitingCpuMs, 2)} ms waiting vs ${formatNumber(waiting.idleCpuMs, 2)} ms idle over ${waiting.waitMs} ms)`,
      holds: addedPerSecond <= 2 && waiting.admittedEarly === 0,
    });
  }

  if (redis !== undefined) {
    const t = redis.throughput;
    const inFlight = `${redis.inFlight} in flight`;
    for (const [id, name] of [
      ['floodgate-fixed-window', 'fixed-window'],
      ['floodgate-gcra', 'gcra'],
      ['floodgate-sliding-window', 'sliding-window'],
    ] as const) {
      for (const mode of ['sequential', 'concurrent'] as const) {
        const ratio = pairedRatio(t[mode][id] ?? [], t[mode]['rate-limit-redis'] ?? []);
        add({
          issue: '18',
          area: 'redis',
          requirement: `${name} ≥ 1.0× rate-limit-redis, ${mode === 'sequential' ? 'sequential' : inFlight}`,
          measured: formatRatio(ratio),
          holds: ratio >= 1,
          ...(ratio >= 1 ? {} : { bound: redisBound(results, id, mode) }),
        });
      }
      const floor = pairedRatio(t.concurrent[id] ?? [], t.concurrent.floor ?? []);
      add({
        issue: '18',
        area: 'redis',
        requirement: `${name} ≥ 0.9× raw EVALSHA floor, ${inFlight}`,
        measured: formatRatio(floor),
        holds: floor >= 0.9,
        ...(floor >= 0.9 ? {} : { bound: redisBound(results, id, 'concurrent') }),
      });
      const ownRow = redisInstructions?.rows.find((row) => row.contender === id);
      const peerRow = redisInstructions?.rows.find((row) => row.contender === 'rate-limit-redis');
      if (ownRow !== undefined && peerRow !== undefined) {
        const [own, peer] = [ownRow.instructionsPerCall, peerRow.instructionsPerCall];
        const hot = `one hot key: ${formatNumber(ownRow.hotInstructionsPerCall / 1000, 1)}k vs ${formatNumber(peerRow.hotInstructionsPerCall / 1000, 1)}k`;
        add({
          issue: '18',
          area: 'redis',
          requirement: `${name}: redis-server instructions per call (callgrind) ≤ rate-limit-redis's`,
          measured: `${formatNumber(own / 1000, 1)}k vs ${formatNumber(peer / 1000, 1)}k (${hot})`,
          holds: own <= peer,
          ...(own <= peer
            ? {}
            : {
                bound:
                  `Instructions inside redis-server per call, start-up and loading cancelled out (see the callgrind table), on random keys, where most calls start a window; ${hot}. ` +
                  (id === 'floodgate-gcra'
                    ? ''
                    : "A window starts on the epoch's grid (the contract's floor(now / windowMs)), which takes Redis's TIME: about 9k instructions with its parsing (measured in a function that only calls TIME), where rate-limit-redis starts a window at its first call and needs no clock. ") +
                  redisBound(results, id, 'sequential'),
              }),
        });
      }
    }
    const plans = 1 / pairedRatio(t.concurrent['floodgate-fixed-window-plans'] ?? [], t.concurrent['floodgate-fixed-window'] ?? []);
    const plansSequential = 1 / pairedRatio(t.sequential['floodgate-fixed-window-plans'] ?? [], t.sequential['floodgate-fixed-window'] ?? []);
    add({
      issue: '15',
      area: 'redis',
      requirement: `one of 3 plans per call costs ≤ 1.1× a static limiter, ${inFlight}`,
      measured: `${formatRatio(plans)} the cost (sequential: ${formatRatio(plansSequential)})`,
      holds: plans <= 1.1,
      ...(plans <= 1.1
        ? {}
        : {
            bound: `Plans send the same one FCALL per call (${formatNumber(redis.sentPerCall['floodgate-fixed-window-plans'] ?? Number.NaN, 2)} commands sent per call); with ${redis.inFlight} in flight the client's CPU on a two-core machine shared with redis-server is part of the rate, and a call with rules does more of it (see the memory row).`,
          }),
    });
    const scopesCommands = redis.sentPerCall['floodgate-3-scopes'] ?? Number.NaN;
    const stackedCommands = redis.sentPerCall['floodgate-3-stacked'] ?? Number.NaN;
    add({
      issue: '14',
      area: 'redis',
      requirement: '3 scopes in one call: 1 round trip per call (3 stacked limiters: 3)',
      measured: `${formatNumber(scopesCommands, 2)} vs ${formatNumber(stackedCommands, 2)} commands sent per call`,
      holds: scopesCommands <= 1.0001,
    });
    for (const mode of ['sequential', 'concurrent'] as const) {
      const ratio = pairedRatio(t[mode]['floodgate-3-scopes'] ?? [], t[mode]['floodgate-3-stacked'] ?? []);
      add({
        issue: '14',
        area: 'redis',
        requirement: `3 scopes in one call ≥ 1.0× 3 stacked limiters, ${mode === 'sequential' ? 'sequential' : inFlight}`,
        measured: formatRatio(ratio),
        holds: ratio >= 1,
        ...(ratio >= 1
          ? {}
          : {
              bound: `Redis time per call: ${formatNumber(median(redis.redisMicrosPerCall[mode]['floodgate-3-scopes'] ?? []), 1)} µs for the one FCALL of 3 rules, ${formatNumber(median(redis.redisMicrosPerCall[mode]['floodgate-3-stacked'] ?? []), 1)} µs for the three of the stacked limiters.`,
            }),
      });
    }
  }

  if (sql !== undefined) {
    const t = sql.throughput;
    for (const [own, peer] of [
      ['floodgate-postgres', 'rate-limiter-flexible-postgres'],
      ['floodgate-mysql', 'rate-limiter-flexible-mysql'],
      ['floodgate-sqlite', 'rate-limiter-flexible-sqlite'],
    ] as const satisfies readonly (readonly [SqlContenderId, SqlContenderId])[]) {
      for (const scenario of sqlScenarios) {
        const ratio = pairedRatio(t[scenario][own] ?? [], t[scenario][peer] ?? []);
        add({
          issue: '28',
          area: 'sql',
          requirement: `${sqlContenderInfo[own].short} ≥ 1.0× ${sqlContenderInfo[peer].short}, ${sqlScenarioLabel(scenario, sql.inFlight)}`,
          measured: formatRatio(ratio),
          holds: ratio >= 1,
          ...(ratio >= 1 ? {} : { bound: sqlBound(results, own, peer, scenario, 1) }),
        });
      }
    }
    for (const scenario of ['concurrent', 'hot'] as const) {
      const ratio = pairedRatio(t[scenario]['floodgate-postgres'] ?? [], t[scenario]['acpr-postgres'] ?? []);
      add({
        issue: '28',
        area: 'sql',
        requirement: `PostgresStore ≥ 3× @acpr/rate-limit-postgresql, ${sqlScenarioLabel(scenario, sql.inFlight)}`,
        measured: formatRatio(ratio),
        holds: ratio >= 3,
        ...(ratio >= 3 ? {} : { bound: sqlBound(results, 'floodgate-postgres', 'acpr-postgres', scenario, 3) }),
      });
    }
  }

  if (edge !== undefined) {
    for (const [own, peer, name] of [
      ['floodgate-upstash-fixed-window', 'upstash-ratelimit-fixed-window', 'fixed window'],
      ['floodgate-upstash-sliding-window', 'upstash-ratelimit-sliding-window', 'sliding window'],
    ] as const satisfies readonly (readonly [EdgeContenderId, EdgeContenderId, string])[]) {
      for (const mode of ['sequential', 'concurrent'] as const) {
        const ratio = pairedRatio(edge.throughput[mode][own] ?? [], edge.throughput[mode][peer] ?? []);
        add({
          issue: '17',
          area: 'edge',
          requirement: `Upstash REST, ${name}: Floodgate ≥ 1.0× @upstash/ratelimit, ${mode === 'sequential' ? 'sequential' : `${edge.inFlight} in flight`}`,
          measured: formatRatio(ratio),
          holds: ratio >= 1,
          ...(ratio >= 1
            ? {}
            : {
                bound:
                  `REST requests per call: ${formatNumber(edge.requestsPerCall[own] ?? Number.NaN, 2)} for Floodgate, ${formatNumber(edge.requestsPerCall[peer] ?? Number.NaN, 2)} for @upstash/ratelimit;` +
                  ` Redis's time per call in the script or function (${edge.inFlight} in flight): ${formatNumber(median(edge.redisMicrosPerCall[own] ?? []), 1)} µs and ${formatNumber(median(edge.redisMicrosPerCall[peer] ?? []), 1)} µs.` +
                  " A request's time (HTTP, JSON and base64 on both ends, the bridge's own Node process, all on two cores) is most of a call's." +
                  ` Per round, Floodgate ran at ${ratioRange(edge.throughput[mode][own] ?? [], edge.throughput[mode][peer] ?? [])
                    .map((x) => formatNumber(x, 2))
                    .join('–')}× @upstash/ratelimit.`,
              }),
        });
      }
    }
  }

  if (http !== undefined) {
    const find = (framework: Framework, variant: Variant) => http.rows.find((r) => r.framework === framework && r.variant === variant);
    const required: Partial<Record<Framework, { memory: number; redis: number }>> = {
      express: { memory: 0.9, redis: 0.75 },
      koa: { memory: 0.9, redis: 0.6 },
      hono: { memory: 0.8, redis: 0.6 },
    };
    for (const framework of ['fastify', 'nestjs'] as const) {
      for (const store of ['memory', 'redis'] as const) {
        const row = find(framework, `floodgate-${store}`);
        const peer = find(framework, `peer-${store}`);
        if (row === undefined || peer === undefined) continue;
        const ratio = pairedRatio(row.requestsPerSecond, peer.requestsPerSecond);
        add({
          issue: '16',
          area: 'http',
          requirement: `${framework}, Floodgate ${store} ≥ 1.0× ${peer.label}`,
          measured: formatRatio(ratio),
          holds: ratio >= 1,
          ...(ratio >= 1
            ? {}
            : {
                bound: `Two cores shared by the load generator, the server${store === 'redis' ? ' and redis-server' : ''}: the peer ran with ${cpu(peer)}; Floodgate with ${cpu(row)}. Per round, Floodgate ran at ${ratioRange(
                  row.requestsPerSecond,
                  peer.requestsPerSecond,
                )
                  .map((x) => formatNumber(x, 2))
                  .join('–')}× the peer.`,
              }),
        });
      }
    }
    for (const framework of ['express', 'koa', 'hono'] as const) {
      const bare = find(framework, 'bare');
      for (const store of ['memory', 'redis'] as const) {
        const row = find(framework, `floodgate-${store}`);
        const need = required[framework]?.[store];
        if (bare === undefined || row === undefined || need === undefined) continue;
        const ratio = pairedRatio(row.requestsPerSecond, bare.requestsPerSecond);
        add({
          issue: '7',
          area: 'http',
          requirement: `${framework}, Floodgate ${store} ≥ ${need}× bare`,
          measured: formatRatio(ratio),
          holds: ratio >= need,
          ...(ratio >= need
            ? {}
            : {
                bound:
                  `Two cores shared by the load generator, the server${store === 'redis' ? ' and redis-server' : ''}: bare ran with ${cpu(bare)}; this row with ${cpu(row)}.` +
                  (store === 'memory' ? topFrames(profiles, `${framework} + Floodgate memory`) : ''),
              }),
        });
      }
    }
    const failing = http.rows.filter((r) => r.errors + r.timeouts + r.non2xx > 0);
    add({
      issue: '7',
      area: 'http',
      requirement: 'every HTTP row: 0 errors, 0 non-2xx',
      measured: failing.length === 0 ? 'all 0' : failing.map((r) => `${r.label}: ${r.errors} errors, ${r.non2xx} non-2xx`).join('; '),
      holds: failing.length === 0,
    });
  }

  if (results.operate !== undefined) targets.push(...operateTargets(results.operate));

  if (accuracy !== undefined) {
    for (const row of accuracy.rows.filter((r) => exactContenders.has(r.contender))) {
      add({
        issue: '7',
        area: 'accuracy',
        requirement: `${row.contender.slice('floodgate-'.length)} admits exactly ${accuracy.limit} of ${row.attempted} racing calls`,
        measured: `${row.admitted}${row.errors > 0 ? ` (${row.errors} errors)` : ''}`,
        holds: row.admitted === accuracy.limit && row.errors === 0,
      });
    }
  }
  return targets;
}
