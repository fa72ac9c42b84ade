/*
 * How much work each benchmark does. `pnpm bench` runs the full profile (the
 * one BENCHMARKS.md is written from, ~20 minutes); `pnpm bench --quick` is a
 * smoke run for CI (under 2 minutes) whose numbers are too short to quote.
 */

export type Section = 'memory' | 'redis' | 'edge' | 'http' | 'accuracy' | 'sql' | 'operate';
export const sections: readonly Section[] = ['memory', 'redis', 'edge', 'http', 'accuracy', 'sql', 'operate'];

/** Calls per measurement in each scenario of the SQL benchmark. */
export interface SqlOps {
  /** Each call awaited in turn, random keys. */
  sequential: number;
  /** `inFlight` calls at a time, random keys. */
  concurrent: number;
  /** `inFlight` calls at a time, one hot key. */
  hot: number;
}

export interface BenchConfig {
  quick: boolean;
  /** Sections to run (`--only=memory,redis`); all by default. */
  only: ReadonlySet<Section>;
  /** Whether to write BENCHMARKS.md and docs/benchmarks.svg (full runs of every section only, unless --write). */
  write: boolean;
  memory: {
    /** Measured rounds; each round runs every contender once, in a rotated order. */
    rounds: number;
    /** Decisions per measurement on the hot key (after a warm-up of a quarter as many). */
    hotOps: number;
    /** Decisions per measurement on random keys (after one call per key and a warm-up). */
    randomOps: number;
    /** Distinct keys in the "random keys" scenario. */
    randomKeys: number;
    /** Keys held when the heap is measured. */
    heapKeys: number;
    /** maxKeys of the eviction row (issue 20.2), and how many times as many new keys follow past it. */
    evictionKeys: number;
    evictionChunks: number;
    /** Calls waiting on one key (issue 15), and how long their CPU is measured. */
    waiters: number;
    waitMs: number;
  };
  redis: {
    rounds: number;
    sequentialOps: number;
    concurrentOps: number;
    /** Calls in flight in the concurrent scenario. */
    inFlight: number;
    /** Key counts at which Redis bytes per key are measured. */
    memoryKeys: number[];
  };
  /** Issue 17: Redis over HTTP (Upstash REST) and a Durable Object. */
  edge: {
    rounds: number;
    sequentialOps: number;
    concurrentOps: number;
    inFlight: number;
  };
  http: {
    /** Frameworks to run (`--frameworks=fastify`); all by default. */
    frameworks?: readonly string[];
    rounds: number;
    connections: number;
    warmupSeconds: number;
    durationSeconds: number;
  };
  /** Issue 28: PostgreSQL, MySQL/MariaDB and SQLite stores. */
  sql: {
    rounds: number;
    inFlight: number;
    /** Per database: SQLite answers in-process, 10 to 50 times as fast as a server, so its measurements make more calls. */
    ops: Record<'postgres' | 'mysql' | 'sqlite', SqlOps>;
    /** Distinct keys after which rows and bytes per key are measured. */
    storageKeys: number;
  };
  /** Issue 31: overrides and analytics (operate.ts). */
  operate: {
    rounds: number;
    /** Calls per measurement: memory store; Redis awaited in turn; Redis `inFlight` at a time. */
    memoryOps: number;
    redisSequentialOps: number;
    redisConcurrentOps: number;
    inFlight: number;
    randomKeys: number;
    /** Distinct keys each denied once, after which analytics' heap is measured; the memory store holds at most storeKeys. */
    deniedKeys: number;
    storeKeys: number;
  };
  accuracy: {
    processes: number;
    callsPerProcess: number;
    limit: number;
    /** Calls each process keeps in flight. */
    inFlight: number;
  };
  /** Hard stop for the whole run: the benchmark never hangs CI. */
  deadlineMs: number;
}

const full: Omit<BenchConfig, 'quick' | 'only' | 'write'> = {
  memory: {
    rounds: 5,
    hotOps: 5_000_000,
    randomOps: 1_000_000,
    randomKeys: 100_000,
    heapKeys: 1_000_000,
    evictionKeys: 100_000,
    evictionChunks: 4,
    waiters: 100,
    waitMs: 2_000,
  },
  redis: { rounds: 5, sequentialOps: 10_000, concurrentOps: 40_000, inFlight: 64, memoryKeys: [16_384, 10_000] },
  edge: { rounds: 7, sequentialOps: 1_500, concurrentOps: 6_000, inFlight: 32 },
  http: { rounds: 4, connections: 50, warmupSeconds: 1.5, durationSeconds: 3 },
  sql: {
    rounds: 5,
    inFlight: 64,
    ops: {
      postgres: { sequential: 1_000, concurrent: 4_000, hot: 4_000 },
      mysql: { sequential: 1_000, concurrent: 4_000, hot: 4_000 },
      sqlite: { sequential: 10_000, concurrent: 20_000, hot: 40_000 },
    },
    storageKeys: 10_000,
  },
  operate: {
    rounds: 5,
    memoryOps: 1_000_000,
    redisSequentialOps: 10_000,
    redisConcurrentOps: 40_000,
    inFlight: 64,
    randomKeys: 100_000,
    deniedKeys: 1_000_000,
    storeKeys: 10_000,
  },
  accuracy: { processes: 4, callsPerProcess: 3_000, limit: 1_000, inFlight: 32 },
  deadlineMs: 40 * 60_000,
};

const quick: Omit<BenchConfig, 'quick' | 'only' | 'write'> = {
  memory: {
    rounds: 1,
    hotOps: 300_000,
    randomOps: 200_000,
    randomKeys: 100_000,
    heapKeys: 100_000,
    evictionKeys: 100_000,
    evictionChunks: 2,
    waiters: 100,
    waitMs: 500,
  },
  redis: { rounds: 1, sequentialOps: 1_000, concurrentOps: 4_000, inFlight: 64, memoryKeys: [16_384, 10_000] },
  edge: { rounds: 1, sequentialOps: 200, concurrentOps: 400, inFlight: 32 },
  http: { rounds: 1, connections: 50, warmupSeconds: 0.3, durationSeconds: 0.7 },
  sql: {
    rounds: 1,
    inFlight: 64,
    ops: {
      postgres: { sequential: 200, concurrent: 800, hot: 800 },
      mysql: { sequential: 200, concurrent: 800, hot: 800 },
      sqlite: { sequential: 2_000, concurrent: 4_000, hot: 8_000 },
    },
    storageKeys: 1_000,
  },
  // One worker for every measurement (operate.ts): a few seconds.
  operate: {
    rounds: 1,
    memoryOps: 20_000,
    redisSequentialOps: 500,
    redisConcurrentOps: 2_000,
    inFlight: 64,
    randomKeys: 10_000,
    deniedKeys: 20_000,
    storeKeys: 1_000,
  },
  accuracy: { processes: 4, callsPerProcess: 3_000, limit: 1_000, inFlight: 32 },
  deadlineMs: 5 * 60_000,
};

/** The HTTP frameworks of a quick run, unless `--frameworks` names others. */
const QUICK_FRAMEWORKS = ['express', 'hono'];

/** `--quick`, `--only=a,b`, `--frameworks=a,b` (HTTP rows of those frameworks only), `--write` / `--no-write`. */
export function parseArgs(argv: readonly string[]): BenchConfig {
  let isQuick = false;
  let only: Set<Section> = new Set(sections);
  let write: boolean | undefined;
  let httpFrameworks: string[] | undefined;
  for (const arg of argv) {
    if (arg === '--') continue;
    if (arg === '--quick') isQuick = true;
    else if (arg === '--write') write = true;
    else if (arg === '--no-write') write = false;
    else if (arg.startsWith('--only=')) {
      const names = arg.slice('--only='.length).split(',');
      for (const name of names) if (!sections.includes(name as Section)) throw new Error(`--only: unknown section '${name}' (${sections.join(', ')})`);
      only = new Set(names as Section[]);
    } else if (arg.startsWith('--frameworks=')) httpFrameworks = arg.slice('--frameworks='.length).split(',');
    else {
      throw new Error(`Unknown argument '${arg}'. Usage: pnpm bench [--quick] [--only=${sections.join(',')}] [--frameworks=fastify,...] [--write|--no-write]`);
    }
  }
  const profile = isQuick ? quick : full;
  // A report is only worth writing from a full run of every section.
  const complete = !isQuick && only.size === sections.length && httpFrameworks === undefined;
  // A quick run (what CI runs) measures the HTTP rows of two frameworks, one of each kind (Node's req/res, fetch's
  // Request/Response): each row starts a server process of its own, and all six took 80 of its 150 s.
  const frameworks = httpFrameworks ?? (isQuick ? QUICK_FRAMEWORKS : undefined);
  return { ...profile, http: { ...profile.http, frameworks }, quick: isQuick, only, write: write ?? complete };
}
