import { createLimiter, type Limiter, RedisStore, type RuleOptions } from '@floodgate/core';
import type { Redis } from 'ioredis';
import type { GlobalOptions } from './args.js';
import { toCliError } from './errors.js';
import { connectRedis } from './redis.js';
import { readRulesFile, readStoredRules, rulesLocation } from './rules.js';

/** How often the CLI's limiter would load the overrides again: never, in practice (a day). */
const OVERRIDES_REFRESH_MS = 86_400_000;

/** What a command works with, made when it first asks: the connection, the rules, the limiter. */
export class Session {
  private redisConnection: Promise<Redis> | undefined;
  private limiterMade: Promise<{ limiter: Limiter; rules: RuleOptions[] }> | undefined;
  private limiterMadeNow: Limiter | undefined;

  constructor(readonly options: GlobalOptions) {}

  redis(): Promise<Redis> {
    this.redisConnection ??= connectRedis(this.options.redisUrl, this.options.timeoutMs);
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
      const store = new RedisStore({ client: await this.redis(), prefix: this.options.storePrefix });
      const limiter = createLimiter({
        rules,
        store,
        prefix: this.options.prefix,
        timeoutMs: this.options.timeoutMs,
        // The CLI lives for one command: the load at start is the one that counts (close() stops the timer).
        ...(options.overrides === true ? { overrides: { refreshMs: OVERRIDES_REFRESH_MS } } : {}),
      });
      // peek() answers a store failure with onStoreError's decision (and storeError set), which the
      // commands turn into exit 1; this listener only keeps the limiter from logging it too.
      limiter.on('error', () => {});
      this.limiterMadeNow = limiter;
      return { limiter, rules };
    })();
    return this.limiterMade;
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
