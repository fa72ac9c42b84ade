/*
 * Overrides: per-key (and per-prefix) changes to a limiter's rules, kept as
 * records of the store (StoreRecords) so that every instance on the store
 * sees them. Each instance holds a copy, loaded when the limiter starts and
 * again every refreshMs (and at once in the process that changes one): a
 * call looks its keys up here, in memory, and goes to the store once, under
 * its rules with the overridden ones swapped in. So an override is applied
 * atomically with the call's other rules, and costs a call a map lookup per
 * scope.
 *
 * An override names the rules it changes: `{ name: 'per-user', limit: 5000 }`
 * replaces the fields given of the rule 'per-user' for calls whose key in
 * that rule's scope is the override's key (or starts with its prefix, for a
 * key ending in '*'). The rule keeps its name, scope and so its state: a
 * customer whose limit is raised keeps the count it has.
 */
import { checkPage, describe, ErrorCodes, FloodgateError } from './errors.js';
import { type CompiledRule, compileRule, optionsOf, type RuleOptions } from './rules.js';
import type { StoreRecords } from './stores/types.js';

/** A change to one of the limiter's rules (Limiter.RuleOverride, where it is documented). */
export type RuleOverride = Partial<Omit<RuleOptions, 'scope'>>;

/** An override as `limiter.overrides` gives it back (Limiter.Override, where it is documented). */
export interface Override {
  /** The key it applies to, or a prefix of keys when it ends in '*'. */
  key: string;
  /** The changed rules, each by name. */
  rules: RuleOverride[];
  /** When it ends, on the clock of the limiter that set it; undefined: it stays until deleted. */
  untilMs?: number;
}

/** The longest key (or prefix) an override takes. */
const MAX_KEY_LENGTH = 512;
/** The most overrides a limiter holds in memory; more are not applied (and reported). */
export const MAX_OVERRIDES = 100_000;
/** A record's life when an override has no ttlMs: 100 years. */
const FOREVER_MS = 100 * 365 * 86_400_000;
/** The longest ttlMs an override takes. */
const MAX_TTL_MS = FOREVER_MS;

/** An override held in memory: its rules by name, ready to swap in. */
export interface HeldOverride {
  /** Tells one loaded override from another (a new id when an override changes), for the rule sets made of it. */
  readonly id: number;
  readonly key: string;
  readonly byName: ReadonlyMap<string, RuleOverride>;
  readonly untilMs: number;
  readonly text: string;
  /** The rule sets made with this override alone: by the id of the rule set it changed, then by the rule's place (the limiter's cache). */
  readonly sets: Map<number, unknown[]>;
}

/** What the registry needs of its limiter. */
export interface OverrideHost {
  readonly prefix: string;
  readonly records: StoreRecords;
  /** The limiter's own rules: what an override may change. */
  rules(): readonly CompiledRule[];
  now(): number;
  /** Awaits a store call within the limiter's timeout. */
  timed<T>(value: T | Promise<T>): Promise<T>;
  /** Reports a refresh that failed or skipped overrides (the limiter's 'error' event). */
  failed(error: Error): void;
}

/** A node of the prefix trie: the override of the prefix that ends here, and the characters that go on. */
interface PrefixNode {
  next: Map<number, PrefixNode> | undefined;
  held: HeldOverride | undefined;
}

/** `held`, unless it has ended (its end read from the clock only for an override with a ttl). */
const live = (held: HeldOverride | undefined, now: () => number): HeldOverride | undefined =>
  held !== undefined && (held.untilMs === Number.POSITIVE_INFINITY || held.untilMs > now()) ? held : undefined;

const recordPrefix = (prefix: string): string => `${prefix}override:`;

/** A rule with an override's fields swapped in; throws ERR_FG_RULES when the result is no valid rule. */
export function overriddenRule(base: CompiledRule, change: RuleOverride): CompiledRule {
  if (change.algorithm !== undefined && change.algorithm !== base.algorithm) {
    throw new FloodgateError(
      ErrorCodes.RULES,
      `An override keeps its rule's algorithm, and so the state it counts in: rule '${base.name}' is ${base.algorithm}, got ${describe(change.algorithm)}.`,
    );
  }
  const options: Partial<RuleOptions> = optionsOf(base);
  // A burst left to its default (the limit) follows the new limit, as it would in the rule itself.
  if (change.limit !== undefined && change.burst === undefined && base.burst === base.limit) delete options.burst;
  return compileRule({ ...options, ...change, name: base.name, scope: base.scope }, `The override of rule '${base.name}'`);
}

function checkKey(key: unknown, where: string): string {
  if (typeof key !== 'string' || key === '' || key.length > MAX_KEY_LENGTH) {
    throw new FloodgateError(
      ErrorCodes.OPTION,
      `${where} takes a key (a prefix when it ends in '*') of 1 to ${MAX_KEY_LENGTH} characters, got ${describe(key)}.`,
    );
  }
  return key;
}

/** The overrides of one limiter: its copy of the stored registry, and the methods that change it. */
export class OverrideRegistry {
  /** By key; a prefix override under its key, '*' included. */
  private held = new Map<string, HeldOverride>();
  /** The prefix overrides in a trie of their prefixes' characters: a key walks it as far as it matches, the deepest override wins. */
  private prefixes: PrefixNode = { next: undefined, held: undefined };
  private ids = 0;
  private loading: Promise<void> | undefined;
  private queued: Promise<void> | undefined;
  /** Counts the changes this process made (set, delete): a load begun before one would undo it. */
  private changes = 0;
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly host: OverrideHost,
    refreshMs: number,
  ) {
    this.refresh().catch(() => {}); // reported by refresh()
    this.timer = setInterval(() => this.refresh().catch(() => {}), refreshMs);
    this.timer.unref?.();
  }

  /** How many overrides are held: 0 lets a call skip the lookup. */
  get size(): number {
    return this.held.size;
  }

  /** The override in force for a key: its own, else the longest prefix it starts with. */
  match(key: string, now: () => number): HeldOverride | undefined {
    const own = this.held.get(key);
    if (own !== undefined && !own.key.endsWith('*') && (own.untilMs === Number.POSITIVE_INFINITY || own.untilMs > now())) return own;
    // Walked character by character: no string is made, and a key leaves the trie at its first character no prefix has.
    let node: PrefixNode | undefined = this.prefixes;
    let found = live(node.held, now);
    for (let i = 0; i < key.length && node.next !== undefined; i++) {
      node = node.next.get(key.charCodeAt(i));
      if (node === undefined) break;
      found = live(node.held, now) ?? found;
    }
    return found;
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  async set(key: string, rules: readonly RuleOverride[] | RuleOverride, options?: { ttlMs?: number }): Promise<void> {
    checkKey(key, 'overrides.set()');
    if (options !== undefined && (typeof options !== 'object' || options === null || Array.isArray(options))) {
      throw new FloodgateError(ErrorCodes.OPTION, `overrides.set() options must be an object like { ttlMs: 86_400_000 }, got ${describe(options)}.`);
    }
    for (const name in options) {
      if (name !== 'ttlMs') throw new FloodgateError(ErrorCodes.UNKNOWN_OPTION, `overrides.set() has no option '${name}'; it takes ttlMs.`);
    }
    const ttlMs = options?.ttlMs;
    if (ttlMs !== undefined && (!Number.isSafeInteger(ttlMs) || ttlMs < 1 || ttlMs > MAX_TTL_MS)) {
      throw new FloodgateError(ErrorCodes.OPTION, `overrides.set()'s ttlMs must be a positive integer of ms of at most ${MAX_TTL_MS}, got ${describe(ttlMs)}.`);
    }
    const changes = this.checkedRules(Array.isArray(rules) ? rules : [rules as RuleOverride]);
    const untilMs = ttlMs === undefined ? undefined : this.host.now() + ttlMs;
    const override: Override = untilMs === undefined ? { key, rules: changes } : { key, rules: changes, untilMs };
    const text = JSON.stringify(override);
    await this.host.timed(this.host.records.set(recordPrefix(this.host.prefix) + key, text, ttlMs ?? FOREVER_MS));
    const held = new Map(this.held);
    this.hold(held, override, text);
    this.swap(held);
    this.changes++;
  }

  async get(key: string): Promise<Override | undefined> {
    checkKey(key, 'overrides.get()');
    const [value] = await this.host.timed(this.host.records.get([recordPrefix(this.host.prefix) + key]));
    const override = typeof value === 'string' ? this.parse(value) : undefined;
    return override !== undefined && (override.untilMs ?? Number.POSITIVE_INFINITY) > this.host.now() ? override : undefined;
  }

  async list(options?: { cursor?: string; count?: number }): Promise<{ items: Override[]; cursor: string }> {
    const { cursor, count } = checkPage('overrides.list()', options);
    const prefix = recordPrefix(this.host.prefix);
    const page = await this.host.timed(this.host.records.list(prefix, cursor === '' ? '' : prefix + cursor, count));
    const now = this.host.now();
    const items: Override[] = [];
    for (const [, value] of page.records) {
      const override = this.parse(value);
      if (override !== undefined && (override.untilMs ?? Number.POSITIVE_INFINITY) > now) items.push(override);
    }
    return { items, cursor: page.next === '' ? '' : page.next.slice(prefix.length) };
  }

  async delete(key: string): Promise<void> {
    checkKey(key, 'overrides.delete()');
    await this.host.timed(this.host.records.delete([recordPrefix(this.host.prefix) + key]));
    const held = new Map(this.held);
    held.delete(key);
    this.swap(held);
    this.changes++;
  }

  refresh(): Promise<void> {
    if (this.loading === undefined) {
      this.loading = this.load().finally(() => {
        this.loading = undefined;
      });
      return this.loading;
    }
    // A load is under way, begun maybe before what the caller wrote: one more after it, shared by every call until it starts.
    this.queued ??= this.loading
      .catch(() => {})
      .then(() => {
        this.queued = undefined;
        return this.refresh();
      });
    return this.queued;
  }

  /** Reads every override from the store, and swaps the new copy in whole. */
  private async load(): Promise<void> {
    const prefix = recordPrefix(this.host.prefix);
    const held = new Map<string, HeldOverride>();
    const changes = this.changes;
    let skipped = 0;
    try {
      let after = '';
      do {
        const page = await this.host.timed(this.host.records.list(prefix, after, 1000));
        for (const [name, value] of page.records) {
          const key = name.slice(prefix.length);
          const same = this.held.get(key);
          if (same !== undefined && same.text === value && held.size < MAX_OVERRIDES) {
            held.set(key, same); // unchanged since the last load: held as it is, not checked again
            continue;
          }
          const override = this.parse(value);
          if (override === undefined || override.key !== key) {
            // Not one this build can apply (another build's, or damaged): the copy held stays.
            if (same !== undefined) held.set(key, same);
            skipped++;
            continue;
          }
          if (held.size >= MAX_OVERRIDES) {
            skipped++;
            continue;
          }
          this.hold(held, override, value);
        }
        after = page.next;
      } while (after !== '');
    } catch (error) {
      const failed = new FloodgateError(
        ErrorCodes.STORE_UNAVAILABLE,
        `Loading the overrides failed; the ones held stay in force: ${(error as Error)?.message ?? describe(error)}`,
        { cause: error },
      );
      this.host.failed(failed);
      throw failed;
    }
    // This process changed an override while the store was read: what was read may not hold it. Read again.
    if (this.changes !== changes) return this.load();
    this.swap(held);
    if (skipped > 0) {
      this.host.failed(
        new FloodgateError(
          ErrorCodes.RULES,
          `${skipped} stored override(s) could not be applied (not valid for this limiter's rules, or past ${MAX_OVERRIDES}).`,
        ),
      );
    }
  }

  /** Puts an override into `held`, keeping the one held when its text is the same (and so its id, and the rule sets made of it). */
  private hold(held: Map<string, HeldOverride>, override: Override, text: string): void {
    const old = this.held.get(override.key);
    held.set(
      override.key,
      old !== undefined && old.text === text
        ? old
        : {
            id: ++this.ids,
            key: override.key,
            byName: new Map(override.rules.map((rule) => [rule.name as string, rule])),
            untilMs: override.untilMs ?? Number.POSITIVE_INFINITY,
            text,
            sets: new Map(),
          },
    );
  }

  /** Makes `held` the overrides in force (a call never sees half a change). */
  private swap(held: Map<string, HeldOverride>): void {
    const root: PrefixNode = { next: undefined, held: undefined };
    for (const [key, override] of held) {
      if (!key.endsWith('*')) continue;
      let node = root;
      for (let i = 0; i < key.length - 1; i++) {
        node.next ??= new Map();
        const code = key.charCodeAt(i);
        let child = node.next.get(code);
        if (child === undefined) {
          child = { next: undefined, held: undefined };
          node.next.set(code, child);
        }
        node = child;
      }
      node.held = override;
    }
    this.held = held;
    this.prefixes = root;
  }

  /** The rules of an override, each named and checked against the limiter's rules; throws ERR_FG_RULES. */
  private checkedRules(rules: readonly RuleOverride[]): RuleOverride[] {
    const own = this.host.rules();
    if (rules.length === 0) throw new FloodgateError(ErrorCodes.RULES, 'An override changes at least one rule: [{ name, limit }].');
    const seen = new Set<string>();
    return rules.map((change) => {
      if (typeof change !== 'object' || change === null || Array.isArray(change)) {
        throw new FloodgateError(ErrorCodes.RULES, `An override's rule must be an object like { name: 'per-user', limit: 5000 }, got ${describe(change)}.`);
      }
      if ('scope' in change) throw new FloodgateError(ErrorCodes.RULES, "An override keeps its rule's scope: it takes no 'scope'.");
      const name = change.name ?? (own.length === 1 ? own[0]?.name : undefined);
      const base = own.find((rule) => rule.name === name);
      if (base === undefined) {
        throw new FloodgateError(
          ErrorCodes.RULES,
          `An override's rule must name one of the limiter's rules (${own.map((r) => `'${r.name}'`).join(', ')}), got ${describe(change.name)}.`,
        );
      }
      if (seen.has(base.name)) throw new FloodgateError(ErrorCodes.RULES, `An override changes rule '${base.name}' twice.`);
      seen.add(base.name);
      if (base.scope === 'global') throw new FloodgateError(ErrorCodes.RULES, `Rule '${base.name}' is global: one count for every caller, no key to override.`);
      overriddenRule(base, change); // throws ERR_FG_RULES when the changed rule is not valid
      return { ...change, name: base.name };
    });
  }

  /** An override from its record: undefined for one this limiter cannot apply. */
  private parse(value: string): Override | undefined {
    let parsed: unknown;
    try {
      parsed = JSON.parse(value);
    } catch {
      return undefined;
    }
    const o = parsed as Partial<Override> | null;
    if (typeof o !== 'object' || o === null || typeof o.key !== 'string' || !Array.isArray(o.rules)) return undefined;
    if (o.untilMs !== undefined && !Number.isSafeInteger(o.untilMs)) return undefined;
    try {
      this.checkedRules(o.rules);
    } catch {
      return undefined;
    }
    return o as Override;
  }
}
