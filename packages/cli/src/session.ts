import { createLimiter, type Limiter, type LimiterOptions, RedisStore, type RuleOptions } from '@floodgate/core';
import type { Redis } from 'ioredis';
import type { GlobalOptions } from './args.js';
import { toCliError } from './errors.js';
import { connectRedis } from './redis.js';
import { readRulesFile, readStoredRules, rulesLocation } from './rules.js';

/** How often the CLI's limiter would load the overrides again: never, in practice (a day). */
const OVERRIDES_REFRESH_MS = 86_400_000;

/** The rule of the limiter `top` reads with: never asked (any rule would do; a limiter needs one). */
const TOP_RULE: RuleOptions = { name: 'floodgate-cli-top', limit: 1, windowMs: 60_000 };

/** What a command works with, made when it first asks: the connection, the rules, the limiter. */
export class Session {
  private redisConnection: Promise<Redis> | undefined;
  private limiterMade: Promise<{ limiter: Limiter; rules: RuleOptions[] }> | undefined;
  private limiterMadeNow: Limiter | undefined;

  /** `reconnect`: a session that serves (the dashboard) connects to Redis again after losing it. */
  constructor(
    readonly options: GlobalOptions,
    private readonly connection: { reconnect?: boolean } = {},
  ) {}

  redis(): Promise<Redis> {
    this.redisConnection ??= connectRedis(this.options.redisUrl, this.options.timeoutMs, this.connection);
    return this.redisConnection;
  }

  /** The rules --rules names: a file's, or those stored in a RedisRuleSource's key. */
  async rules(): Promise<RuleOptions[]> {
    const location = rulesLocation(this.options.rules);
    return location.kind === 'file' ? readRulesFile(location.path) : readStoredRules(await this.redis(), location.key);
  }

  /**
   * A limiter with those rules on the same Redis keys as the application's: its RedisStore
   * (--store-prefix) and prefix (--prefix). A store failure is an error here, never a decision.
   * With `overrides`, it applies the overrides stored for the limiter (and `limiter.overrides`
   * works): it loads them when it is made, which the commands that need none are spared. The
   * first call decides.
   */
  limiter(options: { overrides?: boolean } = {}): Promise<{ limiter: Limiter; rules: RuleOptions[] }> {
    this.limiterMade ??= (async () => {
      const rules = await this.rules();
      return this.made(rules, options.overrides === true ? { overrides: { refreshMs: OVERRIDES_REFRESH_MS } } : {});
    })();
    return this.limiterMade;
  }

  /**
   * A limiter that reads the denial counts of the application's limiters, `limiter.top()`: on the
   * same Redis keys, with their analytics period (record names hold it). It needs no rules (--rules
   * is not read): its one rule is never asked, so it denies nothing, counts nothing, and writes no
   * summary of its own (core writes one only for denials counted).
   */
  topLimiter(periodMs: number): Promise<Limiter> {
    this.limiterMade ??= this.made([TOP_RULE], { analytics: { periodMs } });
    return this.limiterMade.then(({ limiter }) => limiter);
  }

  /**
   * The limiter the dashboard operates: the rules --rules names, on the application's keys, applying
   * and listing the overrides (loaded again every `refreshMs`, as the applications do), and reading
   * the denial counts of the applications' analytics (`periodMs`, as `top`).
   */
  dashboardLimiter(refreshMs: number, periodMs: number): Promise<{ limiter: Limiter; rules: RuleOptions[] }> {
    this.limiterMade ??= (async () => this.made(await this.rules(), { overrides: { refreshMs }, analytics: { periodMs } }))();
    return this.limiterMade;
  }

  /** The limiter on the application's Redis keys: its RedisStore (--store-prefix) and prefix (--prefix). */
  private async made(rules: RuleOptions[], extra: Pick<LimiterOptions, 'overrides' | 'analytics'>): Promise<{ limiter: Limiter; rules: RuleOptions[] }> {
    const store = new RedisStore({ client: await this.redis(), prefix: this.options.storePrefix });
    // overrides: the CLI lives for one command, the load at start is the one that counts (close() stops the timer).
    const limiter = createLimiter({ rules, store, prefix: this.options.prefix, timeoutMs: this.options.timeoutMs, ...extra });
    // peek() answers a store failure with onStoreError's decision (and storeError set), which the
    // commands turn into exit 1; this listener only keeps the limiter from logging it too.
    limiter.on('error', () => {});
    this.limiterMadeNow = limiter;
    return { limiter, rules };
  }

  /** Lets the process end: the limiter and the connection are closed. */
  async close(): Promise<void> {
    await this.limiterMadeNow?.close().catch(() => {});
    const redis = await this.redisConnection?.catch(() => undefined);
    redis?.disconnect();
  }
}

/** A peek's storeError as the error the CLI exits with. */
export function failIfUnmeasured(decision: { storeError?: Error }): void {
  if (decision.storeError !== undefined) throw toCliError(decision.storeError);
}
