import { describe, ErrorCodes, FloodgateError } from './errors.js';
import type { Limiter } from './limiter.js';
import { compileRules, type RuleOptions } from './rules.js';
import { MAX_TIMER_MS } from './sleep.js';

/** The commands RedisRuleSource needs: an ioredis client (or Cluster) has them. */
export interface RuleSourceClient {
  get(key: string): Promise<string | null>;
  set(key: string, value: string): Promise<unknown>;
  publish(channel: string, message: string): Promise<unknown>;
  /** A second connection for SUBSCRIBE (a subscribed connection can run nothing else). */
  duplicate(): RuleSourceSubscriber;
}

export interface RuleSourceSubscriber {
  subscribe(channel: string): Promise<unknown>;
  on(event: 'message', listener: (channel: string, message: string) => void): unknown;
  disconnect(): void;
}

export interface RedisRuleSourceOptions {
  /** An ioredis client (or Cluster). */
  client: RuleSourceClient;
  /** Where the rules live, as JSON. @defaultValue 'fg:rules' */
  key?: string;
  /** Where changes are announced. @defaultValue `${key}:changed` */
  channel?: string;
  /** How often every instance re-reads the rules, in case it missed an announcement. 0 turns it off. @defaultValue 30_000 */
  pollMs?: number;
  /** Called with an ERR_FG_RULES error when the stored rules are invalid (the limiters keep their rules). @defaultValue console.warn */
  onError?: (error: FloodgateError) => void;
}

/**
 * Rules kept in Redis and pushed to every instance: `publish()` validates
 * rules, stores them and announces them on a channel; every attached limiter
 * switches to them on the announcement (pub/sub), and re-reads the key every
 * `pollMs` as a safety net. Rules that fail validation (written there by
 * another tool, say) are rejected with an ERR_FG_RULES error and the old rules
 * stay in force.
 *
 * @example
 * ```ts
 * const rules = new RedisRuleSource({ client: redis, key: 'fg:rules:api' });
 * await rules.attach(limiter);  // applies the stored rules, then follows changes
 * await rules.publish([{ name: 'default', limit: 200, windowMs: 60_000 }]); // every instance, within ms
 * ```
 */
export class RedisRuleSource {
  private readonly client: RuleSourceClient;
  private readonly key: string;
  private readonly channel: string;
  private readonly pollMs: number;
  private readonly onError: (error: FloodgateError) => void;
  private readonly limiters = new Set<Limiter>();
  private subscriber: RuleSourceSubscriber | undefined;
  private subscribing: Promise<void> | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;
  /** The JSON last applied (or rejected), so an unchanged value is not applied twice. */
  private seen: string | null = null;

  constructor(options: RedisRuleSourceOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new FloodgateError(ErrorCodes.OPTION, `RedisRuleSource takes { client, key? }, got ${describe(options)}.`);
    }
    const { client, key = 'fg:rules', pollMs = 30_000, onError } = options;
    const channel = options.channel ?? `${key}:changed`;
    const methods = ['get', 'set', 'publish', 'duplicate'] as const;
    if (typeof client !== 'object' || client === null || methods.some((m) => typeof (client as unknown as Record<string, unknown>)[m] !== 'function')) {
      throw new FloodgateError(ErrorCodes.OPTION, `RedisRuleSource client must be an ioredis client (get, set, publish, duplicate), got ${describe(client)}.`);
    }
    if (typeof key !== 'string' || key === '' || typeof channel !== 'string' || channel === '') {
      throw new FloodgateError(ErrorCodes.OPTION, 'RedisRuleSource key and channel must be non-empty strings.');
    }
    if (!Number.isSafeInteger(pollMs) || pollMs < 0 || pollMs > MAX_TIMER_MS) {
      throw new FloodgateError(
        ErrorCodes.OPTION,
        `RedisRuleSource pollMs must be a whole number of ms from 0 (no polling) to ${MAX_TIMER_MS} (the longest interval JavaScript keeps), got ${describe(pollMs)}.`,
      );
    }
    if (onError !== undefined && typeof onError !== 'function') {
      throw new FloodgateError(ErrorCodes.OPTION, `RedisRuleSource onError must be a function, got ${describe(onError)}.`);
    }
    this.client = client;
    this.key = key;
    this.channel = channel;
    this.pollMs = pollMs;
    this.onError = onError ?? ((error) => console.warn(`[floodgate] ${error.message}`));
  }

  /** Applies the stored rules to `limiter` now (when there are any), then keeps it up to date. */
  async attach(limiter: Limiter): Promise<void> {
    this.limiters.add(limiter);
    // Limiters attached at once share the one subscription the first of them opens.
    this.subscribing ??= this.subscribe().catch((error: unknown) => {
      this.subscribing = undefined;
      throw error;
    });
    await this.subscribing;
    const stored = await this.client.get(this.key);
    if (stored !== null) this.applyTo(limiter, stored);
  }

  private async subscribe(): Promise<void> {
    const subscriber = this.client.duplicate();
    this.subscriber = subscriber;
    subscriber.on('message', (channel, message) => {
      if (channel === this.channel) this.apply(message);
    });
    try {
      await subscriber.subscribe(this.channel);
    } catch (error) {
      subscriber.disconnect();
      if (this.subscriber === subscriber) this.subscriber = undefined;
      throw error;
    }
    if (this.pollMs > 0 && this.subscriber === subscriber) {
      this.timer = setInterval(() => {
        this.refresh().catch(() => {});
      }, this.pollMs);
      (this.timer as { unref?: () => void }).unref?.();
    }
  }

  /** Validates `rules` (throwing ERR_FG_* if they are invalid), stores them and announces them to every instance. */
  async publish(rules: readonly RuleOptions[] | RuleOptions): Promise<void> {
    const list = Array.isArray(rules) ? rules : [rules];
    compileRules(list); // throws before anything is stored
    const json = JSON.stringify(list);
    await this.client.set(this.key, json);
    await this.client.publish(this.channel, json);
  }

  /** Re-reads the stored rules now (what the poll does). */
  async refresh(): Promise<void> {
    const stored = await this.client.get(this.key);
    if (stored !== null) this.apply(stored);
  }

  /** Stops following changes. The limiters keep the rules they have. */
  close(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.subscriber?.disconnect();
    this.subscriber = undefined;
    this.subscribing = undefined;
    this.timer = undefined;
    this.limiters.clear();
  }

  private apply(json: string): void {
    if (json === this.seen) return;
    this.seen = json;
    for (const limiter of this.limiters) this.applyTo(limiter, json);
  }

  private applyTo(limiter: Limiter, json: string): void {
    try {
      let rules: unknown;
      try {
        rules = JSON.parse(json);
      } catch {
        throw new FloodgateError(ErrorCodes.RULES, `the value is not JSON: ${json.slice(0, 60)}`);
      }
      limiter.updateRules(rules as RuleOptions[]);
      this.seen = json;
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      this.onError(
        new FloodgateError(ErrorCodes.RULES, `Rules in Redis key '${this.key}' were rejected, the limiter keeps its rules: ${reason}`, { cause: error }),
      );
    }
  }
}
