/*
 * BENCHMARKS.md from one run: the targets of the open issues first, then one table
 * per benchmark (medians over rounds, ratios as medians of per-round
 * ratios), the machine, the method, and the profiles that explain the
 * targets a run misses. Everything here is computed from the results: the
 * file is regenerated, never edited by hand.
 */

import type { EdgeContenderId } from './edge.js';
import { type HttpRow, serverMicrosPerRequest } from './http.js';
import { frameworks } from './http-apps.js';
import type { MemoryScenario } from './memory.js';
import type { MemoryContenderId } from './memory-contenders.js';
import { operateSection } from './operate.js';
import type { BenchResults } from './results.js';
import { type SqlScenario, sqlScenarios } from './sql.js';
import { floodgateOf, referenceOf, SQL_TIMEOUT_MS, type SqlContenderId, type SqlDatabase, sqlContenderInfo } from './sql-contenders.js';
import { formatNumber, formatRate, formatRatio, median, pairedRatio } from './stats.js';
import { sqlScenarioLabel, type Target } from './targets.js';

type Cell = string | number;

function table(header: Cell[], rows: Cell[][], align?: ('l' | 'r')[]): string {
  const rule = header.map((_, i) => ((align?.[i] ?? (i === 0 ? 'l' : 'r')) === 'r' ? '---:' : '---'));
  return [header, rule, ...rows].map((row) => `| ${row.map(String).join(' | ')} |`).join('\n');
}

const mark = (holds: boolean) => (holds ? '✅ holds' : '❌ does not hold');

function targetsSection(targets: readonly Target[]): string {
  const held = targets.filter((t) => t.holds).length;
  const lines = [
    '## Targets of issues 14, 15, 16, 17, 18, 20, 28 and 31 in this run',
    '',
    `${held} of ${targets.length} hold. The issue column says which issue set each target (7: a target of the first round that still matters; see Method for those dropped).`,
    '',
    table(
      ['issue', 'area', 'target', 'measured', ''],
      targets.map((t) => [`#${t.issue}`, t.area, t.requirement, t.measured, mark(t.holds)]),
      ['l', 'l', 'l', 'r', 'l'],
    ),
  ];
  const missed = targets.filter((t) => !t.holds && t.bound !== undefined);
  if (missed.length > 0) {
    lines.push('', '### What bounds the targets that do not hold', '');
    for (const t of missed) lines.push(`- **${t.requirement}** (#${t.issue}, ${t.measured}): ${t.bound}`);
  }
  return lines.join('\n');
}

function memorySection(results: BenchResults): string {
  const memory = results.memory;
  if (memory === undefined) return '';
  const t = memory.throughput;
  const keysLabel = `${memory.randomKeys / 1000}k random keys`;
  const cpuNs = (scenario: MemoryScenario, id: MemoryContenderId) => formatNumber(1e9 / median(memory.cpuThroughput[scenario][id]));
  const rows = memory.contenders.map((c) => [
    c.floodgate ? `**${c.label}**` : c.label,
    formatRate(median(t.hot[c.id])),
    formatRatio(pairedRatio(t.hot[c.id], t.hot.map)),
    cpuNs('hot', c.id),
    formatRate(median(t.random[c.id])),
    formatRatio(pairedRatio(t.random[c.id], t.random.map)),
    cpuNs('random', c.id),
    formatNumber(memory.heapBytesPerKey[c.id], 1),
  ]);
  const { eviction, waiting } = memory;
  const versus = memory.contenders
    .filter((c) => c.floodgate && !c.variant)
    .map((c) => [
      `**${c.label}**`,
      formatRatio(pairedRatio(t.hot[c.id], t.hot['express-rate-limit'])),
      formatRatio(pairedRatio(t.random[c.id], t.random['express-rate-limit'])),
      formatRatio(pairedRatio(t.hot[c.id], t.hot['rate-limiter-flexible'])),
      formatRatio(pairedRatio(t.random[c.id], t.random['rate-limiter-flexible'])),
    ]);
  const listening = (scenario: MemoryScenario) => formatRatio(pairedRatio(t[scenario]['floodgate-fixed-window-events'], t[scenario]['floodgate-fixed-window']));
  const denied = Object.entries(memory.denied).filter(([, n]) => n > 0);
  return [
    '## In-process memory store',
    '',
    `Each store's decision function called directly and awaited in turn, ${memory.ops.hot.toLocaleString('en-US')} calls per measurement on the hot key ` +
      `and ${memory.ops.random.toLocaleString('en-US')} on random keys, ${memory.contenders.length} contenders × ${memory.throughput.hot.map.length} rounds, ` +
      `every call admitted (limits out of reach). "${keysLabel}": keys drawn uniformly from ${memory.randomKeys.toLocaleString('en-US')} ` +
      `IPv4-like strings, the same pre-generated sequence for every library, all keys present before timing starts. ` +
      `Heap: bytes the store adds per key with ${memory.heapKeys.toLocaleString('en-US')} keys (the key strings exist before the first reading; JS heap + external memory). ` +
      '"CPU ns/call": the same runs timed by the CPU time of the worker\'s main thread (Linux schedstat) rather than the wall clock, median over rounds: what the other processes of a busy machine do not move.',
    '',
    table(['store', 'hot key /s', '× Map', 'CPU ns/call', `${keysLabel} /s`, '× Map', 'CPU ns/call', `heap B/key (${memory.heapKeys / 1e6}M keys)`], rows),
    '',
    'Floodgate against the peers (median of per-round ratios):',
    '',
    table(
      [
        'Floodgate',
        '× express-rate-limit, hot key',
        `× express-rate-limit, ${keysLabel}`,
        '× rate-limiter-flexible, hot key',
        `× rate-limiter-flexible, ${keysLabel}`,
      ],
      versus,
    ),
    '',
    'Plans and scopes (median of per-round ratios; hot key and random keys):',
    '',
    table(
      ['Floodgate', 'hot key', keysLabel],
      [
        [
          'one of 3 plans per call (`consume(key, { rules })`) × a static limiter',
          formatRatio(pairedRatio(t.hot['floodgate-fixed-window-plans'], t.hot['floodgate-fixed-window'])),
          formatRatio(pairedRatio(t.random['floodgate-fixed-window-plans'], t.random['floodgate-fixed-window'])),
        ],
        [
          '3 scopes in one call × 3 stacked limiters awaited in turn',
          formatRatio(pairedRatio(t.hot['floodgate-3-scopes'], t.hot['floodgate-3-stacked'])),
          formatRatio(pairedRatio(t.random['floodgate-3-scopes'], t.random['floodgate-3-stacked'])),
        ],
      ],
    ),
    '',
    "The scope rows call with `{ ip, user }` (the user a fixed string per client key, looked up in a Map in both rows), under rules 'all' (global), 'per-ip' and 'per-user'; the stacked row gives each limiter its key as is. " +
      "On random keys the one call builds the scoped store keys (`%ip:…`, `%user:…`) as new strings, which its Maps must hash, where the stacked limiters look up the pool's strings, whose hashes V8 keeps; a server's keys (`req.ip`) are new strings per request for both.",
    '',
    `Eviction (issue 20.2): a limiter on \`new MemoryStore({ maxKeys: ${eviction.maxKeys.toLocaleString('en-US')} })\`, one fixed-window rule, every call a new key. ` +
      `While it fills: ${formatNumber(eviction.fillingNs)} ns per call (main-thread CPU); past maxKeys, where each new key makes it forget one, per ${eviction.maxKeys.toLocaleString('en-US')} calls in turn: ` +
      `${eviction.overNs.map((ns) => `${formatNumber(ns)} ns`).join(', ')}. It held ${eviction.keysHeld.toLocaleString('en-US')} keys at the end.`,
    '',
    `Waiting (issue 15): ${waiting.waiters} calls to \`limiter.wait()\` on one key whose window ends an hour later; the process used ${formatNumber(waiting.waitingCpuMs, 2)} ms of CPU ` +
      `(process.cpuUsage, every thread) over ${waiting.waitMs} ms while they waited, and ${formatNumber(waiting.idleCpuMs, 2)} ms over ${waiting.waitMs} ms idle before they came; ` +
      `${waiting.admittedEarly} was admitted early (should be 0). Waiters of one key share one timer: nothing polls.`,
    '',
    `Events: with an 'allowed' and a 'limited' listener attached (each call timed and its event built), fixed-window runs at ` +
      `${listening('hot')} of its rate without listeners on the hot key and ${listening('random')} on random keys; with no listener, ` +
      'the only cost is reading one flag per call.',
    ...(denied.length > 0 ? ['', `Calls not admitted (should be none): ${denied.map(([id, n]) => `${id} ${n}`).join(', ')}.`] : []),
  ].join('\n');
}

function redisSection(results: BenchResults): string {
  const redis = results.redis;
  if (redis === undefined) return '';
  const t = redis.throughput;
  const micros = redis.redisMicrosPerCall;
  const rows = redis.contenders.map((c) => [
    c.floodgate ? `**${c.label}**` : c.label,
    formatRate(median(t.sequential[c.id] ?? [])),
    formatRatio(pairedRatio(t.sequential[c.id] ?? [], t.sequential.floor ?? [])),
    formatRate(median(t.concurrent[c.id] ?? [])),
    formatRatio(pairedRatio(t.concurrent[c.id] ?? [], t.concurrent.floor ?? [])),
    formatNumber(median(micros.concurrent[c.id] ?? []), 1),
    formatNumber(redis.sentPerCall[c.id] ?? Number.NaN, 2),
    formatNumber(redis.commandsPerCall[c.id] ?? Number.NaN, 2),
    formatNumber(redis.writesPerCall?.[c.id] ?? Number.NaN, 2),
  ]);
  const counts = [...new Set(redis.memory.map((row) => row.keys))];
  const contenders = [...new Set(redis.memory.map((row) => row.contender))];
  const memoryRows = contenders.map((id) => {
    const first = redis.memory.find((row) => row.contender === id);
    return [
      id.startsWith('floodgate-') ? `**${id}**` : id,
      `\`${first?.exampleKey ?? ''}\``,
      ...counts.map((n) => formatNumber(redis.memory.find((row) => row.contender === id && row.keys === n)?.bytesPerKey ?? Number.NaN, 1)),
    ];
  });
  const failures = Object.entries(redis.failures).filter(([, f]) => f !== undefined && f.notAdmitted + f.errors > 0);
  const counted = results.redisInstructions;
  const floor = counted?.rows.find((row) => row.contender === 'floor');
  const instructionRows = (counted?.rows ?? []).map((row) => {
    const info = redis.contenders.find((c) => c.id === row.contender);
    return [
      info?.floodgate ? `**${info.label}**` : (info?.label ?? row.contender),
      formatNumber(row.instructionsPerCall / 1000, 1),
      formatRatio(row.instructionsPerCall / (floor?.instructionsPerCall ?? Number.NaN)),
      formatNumber(row.hotInstructionsPerCall / 1000, 1),
      formatRatio(row.hotInstructionsPerCall / (floor?.hotInstructionsPerCall ?? Number.NaN)),
    ];
  });
  const instructionSection =
    counted === undefined
      ? []
      : [
          '',
          `Instructions redis-server executes per decision, counted by valgrind's callgrind (${counted.calls} and ${2 * counted.calls} sequential calls on a fresh ` +
            'server each, the difference divided by the calls: start-up and script loading cancel out), on the random keys above (most calls find no key, ' +
            'and start a window) and on one hot key (every call but the first finds its state). Unlike the rates above, these counts do not drift ' +
            'with the load on the machine.',
          '',
          table(['store', 'k instructions/call, random keys', '× floor', 'k instructions/call, one hot key', '× floor'], instructionRows),
        ];
  return [
    '## In-process Redis store',
    '',
    `One ioredis connection to a private redis-server ${redis.redisVersion} on loopback, shared by every contender; each call awaited in turn ` +
      `(${redis.sequentialOps.toLocaleString('en-US')} calls per measurement), and ${redis.inFlight} calls in flight ` +
      `(${redis.concurrentOps.toLocaleString('en-US')} calls). The floor is one EVALSHA of a 3-line INCR + PEXPIRE script on the same connection. ` +
      'Keys: the random IPv4-like sequence of the memory benchmark; the keyspace is flushed before each measurement. ' +
      '"Redis µs/call" is the time Redis itself spent in the script or function per decision (FCALL, EVALSHA and EVAL in INFO commandstats, 64 in flight): with calls in flight, Redis\'s single thread is the bottleneck. ' +
      '"sent/call": commands the client sent per decision (counted on the connection, sequential): the round trips. "run/call": commands Redis ran per decision (INFO commandstats), those the scripts and functions call included. ' +
      `"writes/call": writes to the connection's socket per decision with ${redis.inFlight} in flight, each a system call: ioredis writes each command on its own, and Floodgate sends the calls made during one turn of the event loop in one pipeline (the first at once, the others at the end of the turn). ` +
      'The plan row calls `consume(key, { rules })` with one of 3 constant plans in turn; the scope rows are those of the memory benchmark (one FCALL over 3 keys against 3 limiters, each with its own prefix, awaited in turn).',
    '',
    table(['store', 'sequential /s', '× floor', `${redis.inFlight} in flight /s`, '× floor', 'Redis µs/call', 'sent/call', 'run/call', 'writes/call'], rows),
    ...instructionSection,
    '',
    `Redis bytes per key (used_memory delta over N keys, one rule, each library's default key naming, client key \`10.x.y.z\`). At 16 384 keys Redis's main hash table is full; at 10 000 it is partly empty and each key carries a larger share of it.`,
    '',
    table(['store', 'key for client 10.0.0.1', ...counts.map((n) => `${n.toLocaleString('en-US')} keys`)], memoryRows, [
      'l',
      'l',
      ...counts.map(() => 'r' as const),
    ]),
    ...(failures.length > 0
      ? [
          '',
          `Calls not admitted or failed (should be none): ${failures.map(([id, f]) => `${id}: ${f?.notAdmitted} not admitted, ${f?.errors} errors (${f?.firstError ?? ''})`).join('; ')}.`,
        ]
      : []),
  ].join('\n');
}

const sqlDatabaseNames: Record<SqlDatabase, string> = { postgres: 'PostgreSQL', mysql: 'MySQL / MariaDB', sqlite: 'SQLite' };

function sqlSection(results: BenchResults): string {
  const sql = results.sql;
  if (sql === undefined) return '';
  const t = sql.throughput;
  const bold = (id: SqlContenderId) => (sqlContenderInfo[id].floodgate ? `**${sqlContenderInfo[id].label}**` : sqlContenderInfo[id].label);
  const databases = [...new Set(sql.contenders.map((c) => c.database))];
  const rateRows = sql.contenders.map((c) => [
    bold(c.id),
    ...sqlScenarios.flatMap((scenario) => [
      formatRate(median(t[scenario][c.id] ?? [])),
      formatRatio(pairedRatio(t[scenario][c.id] ?? [], t[scenario][referenceOf[c.database]] ?? [])),
    ]),
  ]);
  const versus = sql.contenders
    .filter((c) => !c.floodgate)
    .map((c) => {
      const own = floodgateOf[c.database];
      return [
        `${sqlContenderInfo[own].short} × ${c.short}`,
        ...sqlScenarios.map((scenario) => formatRatio(pairedRatio(t[scenario][own] ?? [], t[scenario][c.id] ?? []))),
      ];
    });
  const three = (values: (scenario: SqlScenario) => number, digits = 0) => sqlScenarios.map((scenario) => formatNumber(values(scenario), digits)).join(' / ');
  const costRows = sql.contenders.map((c) => [
    bold(c.id),
    three((scenario) => sql.sentPerCall[scenario][c.id] ?? Number.NaN, 2),
    three((scenario) => sql.runPerCall[scenario][c.id] ?? Number.NaN, 1),
    three((scenario) => median(sql.serverMicrosPerCall[scenario][c.id] ?? [])),
    three((scenario) => median(sql.clientMicrosPerCall[scenario][c.id] ?? [])),
    three((scenario) => median(sql.logBytesPerCall[scenario][c.id] ?? [])),
  ]);
  const keys = sql.storage[0]?.keys ?? 0;
  const storageRows = sql.storage.map((row) => [
    bold(row.contender),
    `\`${row.tables}\``,
    `\`${row.exampleKey}\``,
    formatNumber(row.rowsPerKey, 2),
    formatNumber(row.bytesPerKey, 1),
  ]);
  const prepared = sql.contenders
    .filter((c) => c.database === 'sqlite')
    .map((c) => `${c.short} ${three((scenario) => sql.preparedPerCall[scenario][c.id] ?? Number.NaN, 2)}`);
  const failures = Object.entries(sql.failures).filter(([, f]) => f !== undefined && f.notAdmitted + f.errors > 0);
  const scenarioNames = sqlScenarios.map((scenario) => sqlScenarioLabel(scenario, sql.inFlight));
  const callsOf = (scenario: SqlScenario) => databases.map((db) => sql.ops[db][scenario].toLocaleString('en-US')).join(' / ');
  return [
    '## SQL stores',
    '',
    `Issue 28. Every library on the same servers in one run: ${databases
      .map((db) => sql.servers[db])
      .filter((s) => s !== undefined)
      .join('; ')}. ` +
      'Each run makes a database of its own on each server and drops it at the end. ' +
      `Each library gets a pool of ${sql.poolSize} connections of its own (SQLite: a file of its own, one connection), its default table, and a fixed window ` +
      "(rate-limiter-flexible's and @acpr/rate-limit-postgresql's only kind; Floodgate's `algorithm: 'fixed-window'`) with a limit no run reaches: every call is admitted, so every call writes. " +
      `Scenarios, with the calls per measurement on ${databases.join(' / ')}: calls awaited in turn over random keys (${callsOf('sequential')}), ` +
      `${sql.inFlight} calls in flight over random keys (${callsOf('concurrent')}), and ${sql.inFlight} in flight on one hot key (${callsOf('hot')}); ` +
      'random keys are the pre-drawn sequence over 100k IPv4-like keys that the other benchmarks use. ' +
      `${sql.rounds} rounds, each running a database's libraries in a rotated order, every measurement from empty tables. ` +
      "Floodgate's SQL stores send a denied call or a peek as one statement and an admitted call as two (a read, then a conditional write), and run one transaction at a time per key in each process: calls on a key that come meanwhile share the next read and write. " +
      `Floodgate's limiters run with \`timeoutMs: ${SQL_TIMEOUT_MS}\` (the peers have no timeout; the default 200 ms would answer a call kept waiting for a pooled connection with onStoreError instead of the database's decision). ` +
      'What the peers send, from their source: RateLimiterPostgres one upsert (`INSERT … ON CONFLICT … RETURNING`, a named prepared statement); ' +
      '@acpr/rate-limit-postgresql one call of its PL/pgSQL `agg_increment()`, which starts with `LOCK TABLE rate_limit.sessions` (ACCESS EXCLUSIVE, held to the commit), so its calls run one at a time whatever the pool; ' +
      "RateLimiterMySQL `BEGIN`, an upsert, a `SELECT` and `COMMIT` on one connection; RateLimiterSQLite one upsert `… RETURNING` inside better-sqlite3's `transaction()`, preparing the statement on every call.",
    '',
    table(['store', ...scenarioNames.flatMap((name) => [`${name} /s`, '× rate-limiter-flexible'])], rateRows),
    '',
    'Floodgate against the peers on the same database (median of per-round ratios):',
    '',
    table(['', ...scenarioNames], versus),
    '',
    `What a call costs, per scenario (${scenarioNames.join(' / ')}; medians over rounds, statement counts from the last round). ` +
      '"statements sent/call": statements the library sent per decision, each a round trip, counted on its pool or connections (SQLite: statements run, the BEGIN and COMMIT of better-sqlite3\'s transaction() included). ' +
      '"run/call": statements MySQL ran per decision, those inside stored procedures included (its Queries). ' +
      "\"server CPU µs/call\": CPU time (utime + stime from /proc) per decision of what serves the run on the server: PostgreSQL's backends on the run's database, its autovacuum workers there, and the processes all databases share (WAL writer, checkpointer); mariadbd's threads but those of other clients' connections. " +
      '"client CPU µs/call": CPU time of the harness process per decision: the library, its driver and the event loop (for SQLite, all the work). ' +
      '"log B/call": bytes written to PostgreSQL\'s WAL or InnoDB\'s redo log per decision. ' +
      'Queries and the logs are server-wide counters: on a server that other clients use meanwhile, their work counts too.',
    '',
    table(['store', 'statements sent/call', 'run/call', 'server CPU µs/call', 'client CPU µs/call', 'log B/call'], costRows),
    ...(prepared.length > 0 ? ['', `Statements prepared per decision (SQLite): ${prepared.join('; ')}.`] : []),
    '',
    `Rows and bytes per key after ${keys.toLocaleString('en-US')} distinct keys (one call each, awaited in turn, from empty tables): ` +
      "PostgreSQL: pg_total_relation_size (heap, indexes, TOAST) of the library's tables; MySQL: data_length + index_length after ANALYZE TABLE (InnoDB 16 KB pages); " +
      "SQLite: pages in use × page_size of the library's file after a WAL checkpoint. Each library's default key naming, client key `10.x.y.z`.",
    '',
    table(['store', 'tables', 'key for client 10.0.0.1', 'rows/key', 'bytes/key'], storageRows, ['l', 'l', 'l', 'r', 'r']),
    ...(failures.length > 0
      ? [
          '',
          `Calls not admitted or failed (should be none): ${failures.map(([id, f]) => `${id}: ${f?.notAdmitted} not admitted, ${f?.errors} errors (${f?.firstError ?? ''})`).join('; ')}.`,
        ]
      : []),
  ].join('\n');
}

function edgeSection(results: BenchResults): string {
  const edge = results.edge;
  if (edge === undefined) return '';
  const t = edge.throughput;
  const reference: EdgeContenderId = 'floodgate-upstash-fixed-window';
  const rows = edge.contenders.map((c) => [
    c.floodgate ? `**${c.label}**` : c.label,
    formatRate(median(t.sequential[c.id] ?? [])),
    formatRate(median(t.concurrent[c.id] ?? [])),
    formatRatio(pairedRatio(t.concurrent[c.id] ?? [], t.concurrent[reference] ?? [])),
    formatNumber(edge.requestsPerCall[c.id] ?? Number.NaN, 2),
  ]);
  const failures = Object.entries(edge.failures).filter(([, f]) => f !== undefined && f.notAdmitted + f.errors > 0);
  return [
    '## On the edge: Redis over HTTP and a Durable Object',
    '',
    "Issue 17. The REST bridge of `@floodgate/test-support` speaks Upstash's documented REST protocol in front of a private redis-server, in a Node process of its own; " +
      "the real `@upstash/redis` client (one instance, Node's fetch) is shared by Floodgate's `RedisStore` and `@upstash/ratelimit` (its defaults: no analytics, an ephemeral cache of denied identifiers, which stays empty here). " +
      `Floodgate's store ran its library as ${edge.floodgateMode === 'functions' ? 'Redis Functions (FCALL)' : 'scripts (EVALSHA)'} through the bridge. ` +
      "The Durable Object row: a limiter in Node whose store is `@floodgate/cloudflare`'s DurableObjectStore running in workerd (the conformance suite's store host; each decision is one POST to a Worker, which asks the key's object). " +
      `${edge.sequentialOps.toLocaleString('en-US')} calls awaited in turn and ${edge.concurrentOps.toLocaleString('en-US')} with ${edge.inFlight} in flight per measurement, random keys, ${t.sequential[reference]?.length ?? 0} rounds in a rotated order. ` +
      '"REST requests/call": requests the bridge served per decision (sequential): the round trips.',
    '',
    table(
      ['store', 'sequential /s', `${edge.inFlight} in flight /s`, `× Floodgate over REST, fixed-window (${edge.inFlight} in flight)`, 'REST requests/call'],
      rows,
    ),
    '',
    'Floodgate against @upstash/ratelimit on the same bridge (median of per-round ratios):',
    '',
    table(
      ['algorithm', 'sequential', `${edge.inFlight} in flight`],
      (
        [
          ['fixed window', 'floodgate-upstash-fixed-window', 'upstash-ratelimit-fixed-window'],
          ['sliding window', 'floodgate-upstash-sliding-window', 'upstash-ratelimit-sliding-window'],
        ] as const
      ).map(([name, own, peer]) => [
        name,
        formatRatio(pairedRatio(t.sequential[own] ?? [], t.sequential[peer] ?? [])),
        formatRatio(pairedRatio(t.concurrent[own] ?? [], t.concurrent[peer] ?? [])),
      ]),
    ),
    ...(failures.length > 0
      ? [
          '',
          `Calls not admitted or failed (should be none): ${failures.map(([id, f]) => `${id}: ${f?.notAdmitted} not admitted, ${f?.errors} errors (${f?.firstError ?? ''})`).join('; ')}.`,
        ]
      : []),
  ].join('\n');
}

function httpSection(results: BenchResults): string {
  const http = results.http;
  if (http === undefined) return '';
  const rows: Cell[][] = [];
  for (const framework of frameworks) {
    const group = http.rows.filter((r) => r.framework === framework);
    const bare = group.find((r) => r.variant === 'bare') as HttpRow;
    for (const row of group) {
      const added = row === bare ? [] : row.requestsPerSecond.map((rps, i) => 1e6 / rps - 1e6 / (bare.requestsPerSecond[i] as number));
      rows.push([
        row.variant.startsWith('floodgate') ? `**${row.label}**` : row.label,
        formatNumber(median(row.requestsPerSecond)),
        row === bare ? '1.00×' : formatRatio(pairedRatio(row.requestsPerSecond, bare.requestsPerSecond)),
        row === bare ? '–' : formatNumber(median(added), 1),
        formatNumber(serverMicrosPerRequest(row), 1),
        formatNumber(median(row.latencyMs), 2),
        row.errors + row.timeouts,
        row.non2xx,
        `${formatNumber(median(row.loadGeneratorCpu))} / ${formatNumber(median(row.serverCpu))} / ${formatNumber(median(row.redisCpu))}`,
      ]);
    }
  }
  return [
    '## HTTP',
    '',
    `autocannon in the harness process, ${http.connections} connections, ${http.durationSeconds} s per measurement after a warm-up, ` +
      `${http.rounds} rounds in a rotated order; each server in a child process of its own, \`GET /\` answering \`ok\`. ` +
      'Every limiter keys by client IP (all requests come from 127.0.0.1: one hot key), keeps its default headers, and has a limit no run reaches. ' +
      "Floodgate runs its default algorithm (sliding-window) through each framework's adapter; its Redis rows use `new RedisStore({ client })` on an ioredis client. " +
      '"Added µs/request" is 1/req·s⁻¹ of the row minus that of the bare framework, per round: the server time the limiter adds per request at saturation. ' +
      '"server CPU µs/request": the CPU time the server process used per request it answered (its CPU over the measurement ÷ its requests, median over rounds): what the load generator\'s share of the cores does not move. ' +
      'CPU columns: % of one core used during the measurement by the load generator (autocannon), the server, and redis-server; this machine has ' +
      `${results.machine.cores} cores, so when they add up to ~${results.machine.cores * 100}% the machine, not the server, sets the rate.`,
    '',
    table(
      ['server', 'req/s', '× bare', 'added µs/request', 'server CPU µs/request', 'mean latency ms', 'errors', 'non-2xx', 'CPU % autocannon / server / redis'],
      rows,
    ),
  ].join('\n');
}

function accuracySection(results: BenchResults): string {
  const { accuracy, boundary } = results;
  const parts: string[] = ['## Accuracy'];
  if (accuracy !== undefined) {
    parts.push(
      '',
      `${accuracy.processes} processes, each with its own ioredis connection and ${accuracy.inFlight} calls in flight, make ${accuracy.callsPerProcess.toLocaleString('en-US')} calls each at once ` +
        `on one key limited to ${accuracy.limit.toLocaleString('en-US')} per day (nothing refills during the race). An exact limiter admits exactly ${accuracy.limit}.`,
      '',
      table(
        ['limiter', 'admitted', 'of', 'errors'],
        accuracy.rows.map((r) => [r.contender.startsWith('floodgate') ? `**${r.label}**` : r.label, r.admitted, r.attempted, r.errors]),
      ),
    );
  }
  if (boundary !== undefined) {
    parts.push(
      '',
      `Boundary burst: a rule of ${boundary.limit} per ${boundary.windowMs} ms on the memory store with an injected clock; a client with its full allowance ` +
        `arrives ${boundary.spanMs / 2} ms before a window edge and calls until refused, every ms, until ${boundary.spanMs / 2} ms after it. ` +
        `Admitted in those ${boundary.spanMs} ms:`,
      '',
      table(
        ['algorithm', 'before the edge', 'after the edge', `total in ${boundary.spanMs} ms`, '× limit'],
        boundary.rows.map((r) => [r.algorithm, r.beforeEdge, r.afterEdge, r.total, formatRatio(r.total / boundary.limit)]),
      ),
    );
  }
  return parts.length > 1 ? parts.join('\n') : '';
}

function profilesSection(results: BenchResults): string {
  const profiles = [...(results.profiles ?? []), ...(results.sql?.profiles ?? [])];
  if (profiles.length === 0) return '';
  const parts = [
    "## Profiles of Floodgate's hot paths",
    '',
    "V8's sampling CPU profiler (what `node --cpu-prof` runs), started and stopped around the measured loop only; self time as % of samples. " +
      'The .cpuprofile files stay in `bench/profiles/` after a run (git-ignored; open them in Chrome DevTools or speedscope). ' +
      'Function names and lines are those of the built `dist/` bundles.',
  ];
  for (const profile of profiles) {
    parts.push(
      '',
      `### ${profile.scenario}`,
      '',
      `By package: ${profile.byPackage.map((f) => `${f.name} ${f.selfPercent}%`).join(', ')}.`,
      '',
      table(
        ['function (self time)', '%'],
        profile.topFunctions.map((f) => [`\`${f.name}\``, f.selfPercent]),
      ),
    );
  }
  return parts.join('\n');
}

function machineSection(results: BenchResults): string {
  const m = results.machine;
  return [
    '## Machine and versions',
    '',
    table(
      ['', ''],
      [
        ['CPU', `${m.cpu} (${m.cores} cores)`],
        ['memory', `${m.memoryGb} GB`],
        ['OS', m.os],
        ['Node', m.node],
        ['Redis', m.redis],
        ...(results.sql === undefined
          ? []
          : (['postgres', 'mysql', 'sqlite'] as const).flatMap((db) =>
              results.sql?.servers[db] === undefined ? [] : [[sqlDatabaseNames[db], results.sql.servers[db]]],
            )),
        ['load average at start', m.loadAverage.join(', ')],
        ['Floodgate commit', m.commit],
        ...Object.entries(m.libraries).map(([name, version]) => [name, version]),
      ],
      ['l', 'l'],
    ),
  ].join('\n');
}

export function renderReport(results: BenchResults, targets: readonly Target[]): string {
  const minutes = (results.elapsedMs / 60_000).toFixed(1);
  const sections = [
    '# Benchmarks',
    '',
    `Generated by \`${results.command}\` on ${results.startedAt} (${minutes} min${results.quick ? ', quick profile: too short to quote' : ''}). ` +
      'Do not edit: run it again.',
    '',
    'Floodgate against what its users would pick instead, in one run on one machine. ' +
      'This machine is shared and has two cores: absolute numbers drift from minute to minute, so the figure of merit is the **ratio** between ' +
      'contenders measured back to back in the same round (each ratio below is the median of the per-round ratios; rates are medians over rounds).',
    '',
    '![Ratios of this run](docs/benchmarks.svg)',
    '',
    targetsSection(targets),
    '',
    memorySection(results),
    '',
    redisSection(results),
    '',
    sqlSection(results),
    '',
    operateSection(results.operate),
    '',
    edgeSection(results),
    '',
    httpSection(results),
    '',
    accuracySection(results),
    '',
    profilesSection(results),
    '',
    machineSection(results),
    '',
    '## Method',
    '',
    '- `pnpm bench` builds the packages (turbo) and runs `bench/src/main.ts` with `node --import tsx`; the bench imports the **built** packages (`dist/`), as users do.',
    "- Every in-process memory measurement runs in a fresh child process (`bench/src/memory-worker.ts`): no contender inherits another's heap, garbage or JIT type feedback. " +
      "Each round runs every contender once, starting with a different one; the calls are the libraries' own decision functions (`increment(key)`, `consume(key)`), awaited in a plain loop.",
    '- Redis servers are private (`redis-server` on a free loopback port, nothing persisted), started and killed by the harness.',
    "- SQL servers are the machine's PostgreSQL (127.0.0.1:5432) and MySQL/MariaDB (127.0.0.1:3306) when they answer, else private ones that `@floodgate/test-support` starts; each run creates a database of its own on each (`fg_bench_<pid>_<random>`) and drops it at the end, on failure too, so nothing a server held before is read or changed. " +
      'PostgreSQL gets a database rather than a schema because @acpr/rate-limit-postgresql writes to its fixed `rate_limit` schema, installs the uuid-ossp extension and keeps a `migrations` table. SQLite files live in a temporary directory, removed at the end. ' +
      "Server CPU is read from /proc (utime + stime), so it counts only where the harness runs on the same machine as the servers; it leaves out what serves other clients (PostgreSQL's backends on other databases, mariadbd's threads of other connections), though a shared server's background work (WAL writer, InnoDB's threads) for them still counts.",
    '- HTTP servers run in child processes, autocannon in the harness process; each measurement starts a fresh server, warms it up, then measures.',
    "- Child processes run TypeScript through tsx's ES-module loader only (`--import tsx/esm`): its CommonJS hook would load a second copy of an ES-module-only package that a CommonJS one requires (`@nestjs/throttler` requiring `@nestjs/core` 12), where Node's own `require()` shares it.",
    "- The NestJS app is built as `nest new` makes one, on platform-express, with its decorators applied as functions (`Reflect.decorate`, what TypeScript emits): the harness runs without a compiler's decorator metadata. Fastify and NestJS keep their default logging off and their default headers on, as the other frameworks.",
    '- `pnpm bench --quick` runs everything with fewer rounds, calls and keys and sub-second HTTP runs: a smoke test (CI), not a measurement. It never fails on timing.',
    '- Targets: this run checks the targets of issues 14 (scopes), 15 (plans, waiting), 16 (Fastify, NestJS), 17 (the edge), 18 (the Redis redesign and, 18.7, the memory hot path), 20.2 (eviction) and 28 (the SQL stores). ' +
      "Of the first round's (issue 7) it keeps those that still matter and no new one replaces: 100k random keys ≥ 1.1× express-rate-limit, the express/koa/hono rows against the bare framework, 0 HTTP errors, and exact admission under concurrency. " +
      'It drops those that issue 18 superseded: "≥ 0.95× the floor, sequential" and "≥ every peer" (now ≥ 1.0× rate-limit-redis, sequential and 64 in flight, and ≥ 0.9× the floor with 64 in flight), ' +
      '"≤ 120 heap bytes per key" (now ≤ 70), "≥ 2.0× rate-limiter-flexible" in memory (issue 18 sets the bar at express-rate-limit, the faster in-process peer; the table keeps both ratios), ' +
      'and "≤ 110 Redis bytes per key" (the key layout is the contract\'s, and the floor\'s own INCR counter costs as much: the bytes table stays).',
    '',
  ];
  return `${sections.filter((s, i, all) => !(s === '' && all[i - 1] === '')).join('\n')}\n`;
}
