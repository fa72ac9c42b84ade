/** Everything one run measured: what report.ts, targets.ts and chart.ts read. */
import type { AccuracyResults } from './accuracy.js';
import type { BoundaryResults } from './boundary.js';
import type { EdgeResults } from './edge.js';
import type { HttpResults } from './http.js';
import type { Machine } from './machine.js';
import type { MemoryResults } from './memory.js';
import type { OperateResults } from './operate.js';
import type { Profile } from './profile.js';
import type { RedisResults } from './redis.js';
import type { RedisInstructions } from './redis-instructions.js';
import type { SqlResults } from './sql.js';

export interface BenchResults {
  /** The command that produced the run, as typed. */
  command: string;
  quick: boolean;
  startedAt: string;
  elapsedMs: number;
  machine: Machine;
  memory?: MemoryResults;
  redis?: RedisResults;
  /** Instructions per call inside redis-server (callgrind); full runs on machines with valgrind. */
  redisInstructions?: RedisInstructions;
  /** PostgreSQL, MySQL/MariaDB and SQLite stores (issue 28). */
  sql?: SqlResults;
  /** Overrides and analytics (issue 31). */
  operate?: OperateResults;
  edge?: EdgeResults;
  http?: HttpResults;
  accuracy?: AccuracyResults;
  boundary?: BoundaryResults;
  profiles?: Profile[];
}
