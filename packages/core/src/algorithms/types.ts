/**
 * The numbers of a rule the algorithms read: a compiled rule (rules.ts) has
 * them all, validated, with every default filled in.
 */
export interface RuleNumbers {
  /** Units admitted per window (buckets: refilled or drained per window; concurrency: in flight at once). */
  readonly limit: number;
  readonly windowMs: number;
  /** Buckets: capacity (limit for the others). */
  readonly burst: number;
  /** sliding-window: segments of the window (1 for the others). */
  readonly segments: number;
  /** leaky-bucket: 'police' or 'shape' ('police' for the others). */
  readonly mode: 'police' | 'shape';
  /** Largest cost a single call can ever be admitted with. */
  readonly capacity: number;
  /** Buckets: one token is this many internal units. */
  readonly unitsPerToken: number;
  /** Buckets: internal units drained (leaky, gcra) or refilled (token) per millisecond. */
  readonly unitsPerMs: number;
  /** sliding-window: length of one segment in ms. */
  readonly segmentMs: number;
}

/**
 * What one rule says about one call. Algorithms fill a caller-owned Verdict
 * instead of returning a fresh object, so the memory store decides without
 * allocating.
 */
export interface Verdict {
  /** Whether this rule admits the call. */
  allowed: boolean;
  /** 0 when allowed; else ms until the same call would be admitted; Infinity when the cost exceeds the capacity. */
  retryAfterMs: number;
  /** Shaping only: ms the admitted call waits before it is served. */
  delayMs: number;
  /** Units left once the call is admitted (equals remainingNow when denied). */
  remaining: number;
  /** ms until full capacity once the call is admitted (equals resetMsNow when denied). */
  resetMs: number;
  /** Units available before the call. */
  remainingNow: number;
  /** ms until full capacity before the call. */
  resetMsNow: number;
  /** ms the state after admitting must be kept; after that it equals no state at all. */
  ttlMs: number;
  /** ms left of the block that holds the key (see algorithms/block.ts); 0 when none does. */
  blockLeftMs: number;
  /** The length of that block, or of the last block still remembered (escalation); 0 when none. */
  blockMs: number;
  /** That block's strike: 1 for a first block, 2 for one that followed it within maxBlockMs, ...; 0 when none. */
  strike: number;
  /** Whether this call starts the block. */
  blockStarted: boolean;
}

export function createVerdict(): Verdict {
  return {
    allowed: false,
    retryAfterMs: 0,
    delayMs: 0,
    remaining: 0,
    resetMs: 0,
    remainingNow: 0,
    resetMsNow: 0,
    ttlMs: 0,
    blockLeftMs: 0,
    blockMs: 0,
    strike: 0,
    blockStarted: false,
  };
}

/** Numbers indexable like an array: a number[] or a Float64Array. */
export interface StateVector {
  [index: number]: number;
  readonly length: number;
}

/**
 * An algorithm whose state per key is a fixed number of numbers (all but
 * sliding-log). Functions are pure: they read `state[base..base+size)` (or
 * `null` for a key without state) and write their results into `out` and `next`.
 */
export interface VectorAlgorithm {
  /** How many numbers of state a key needs under this rule. */
  stateSize(rule: RuleNumbers): number;
  /**
   * Decides a call of `cost` units at `now`. Fills `out`; when `out.allowed`,
   * writes the state after admitting into `next[0..size)`.
   */
  decide(rule: RuleNumbers, state: StateVector | null, base: number, now: number, cost: number, out: Verdict, next: StateVector): void;
  /**
   * Gives `cost` units back. Writes the new state into `next` and returns how
   * many ms it must be kept, or 0 when the key has nothing left to keep (its
   * state has expired or is back to full capacity), or -1 when the state is
   * not one this rule reads (another rule's, under the same name): it is left
   * as it is.
   */
  refund(rule: RuleNumbers, state: StateVector, base: number, now: number, cost: number, next: StateVector): number;
}

export const ceilDiv = (a: number, b: number): number => Math.ceil(a / b);
export const floorDiv = (a: number, b: number): number => Math.floor(a / b);

/** How the Redis library and the store speak about one rule (see stores/redis/views.ts). */
export interface RuleView {
  /** The rule as the library takes it (see `rule` in the algorithm's .lua). */
  readonly spec: string;
  /** Numbers in the rule's view. */
  readonly size: number;
  /** Whether the library's fast path can decide a consume of this rule alone (a plain rule, no blockMs). */
  readonly fast: boolean;
  /** Fills `out` for a call of `cost` from the view in `reply[at..at + size)` (numbers, already checked). */
  verdict(reply: readonly number[], at: number, cost: number, out: Verdict): void;
}

/** One algorithm's state as text (codec.ts): a tag, and the state's own part of an entry. */
export interface StateCodec<S> {
  /** Two letters that name the algorithm in an entry's text. */
  readonly tag: string;
  encode(state: S): string;
  /** The state from its text, or undefined when the text is not one this rule reads. */
  decode(rule: RuleNumbers, text: string): S | undefined;
}

/**
 * How an algorithm keeps its state per key: a fixed-size vector of numbers
 * (decided in place, as the memory store keeps it), or a log of calls, or
 * leases (sliding-log and concurrency, whose state grows with the calls).
 */
export type StateKind = { readonly kind: 'vector'; readonly algorithm: VectorAlgorithm } | { readonly kind: 'log' } | { readonly kind: 'leases' };

/**
 * One algorithm, as the rest of Floodgate sees it: what its rules take, how
 * its state is kept and written as text, how the Redis library speaks about
 * it, and what the headers say of it. Each algorithm's folder exports one;
 * registry.ts lists them.
 */
export interface AlgorithmDefinition {
  /** The options besides limit and windowMs that its rules take. */
  readonly takes: readonly ('burst' | 'segments' | 'mode')[];
  /** Whether its rules may take blockMs: its denials are breaches (concurrency's end when a request ends: they are not). */
  readonly blocks: boolean;
  /** What its quota counts, for the IETF headers: requests per window, or requests in flight (no window). */
  readonly unit: 'requests' | 'concurrent-requests';
  readonly state: StateKind;
  // biome-ignore lint/suspicious/noExplicitAny: each algorithm's codec takes its own state's shape
  readonly codec: StateCodec<any>;
  /** How the Redis library speaks about a rule of it (its block's numbers are added by the store). */
  view(rule: RuleNumbers): RuleView;
  /** The largest number its arithmetic reaches for a rule (it must stay below 2^50 to be exact): absent, the rule's own numbers. */
  largest?(rule: RuleNumbers): number;
  /**
   * ms until a rule that has `remaining` units has one more (draft-10's `t`), at most `resetMs`.
   * Absent: units come back all at once, at resetMs, or as single calls leave (then resetMs is an upper bound).
   */
  nextUnitMs?(rule: RuleNumbers, remaining: number, resetMs: number): number;
}
