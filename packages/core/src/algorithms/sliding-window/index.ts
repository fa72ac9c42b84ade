import { type AlgorithmDefinition, floorDiv, type RuleNumbers, type StateVector, type VectorAlgorithm } from '../types.js';
import { vectorCodec } from '../vector-codec.js';

/*
 * Sliding window: the window is cut into `segments` segments of G =
 * windowMs / segments ms, each with a counter. The window (now - windowMs, now]
 * covers the current segment, the S - 1 before it, and part of the oldest
 * one, which is weighed by the part still inside (assuming its calls were
 * spread evenly):
 *
 *   estimate = oldest · (G - phase) / G + sum(newer segments)
 *
 * With segments = 1 this is the classic two-counter approximation (previous
 * window weighed, current window counted). Everything below is multiplied by G
 * so that it stays an integer: E = estimate · G.
 *
 * State: [segmentMs, newestSegment, count(newest - S), ..., count(newest)].
 */

const COUNTS = 2; // offset of the oldest counter in the state vector

/** Reads the counters as seen from segment `segment`, into `counts` (oldest first). */
function countsAt(rule: RuleNumbers, state: StateVector | null, base: number, segment: number, counts: number[]): void {
  const slots = rule.segments + 1;
  const shift = state === null || state[base] !== rule.segmentMs ? slots : segment - (state[base + 1] as number);
  for (let i = 0; i < slots; i++) {
    const from = i + shift;
    counts[i] = from < slots ? ((state as StateVector)[base + COUNTS + from] as number) : 0;
  }
}

/** ms from `now` (in segment `segment`) until every counted call has left the window (0 when nothing is counted). */
function msUntilEmpty(rule: RuleNumbers, counts: number[], segment: number, now: number): number {
  for (let i = rule.segments; i >= 0; i--) {
    if ((counts[i] as number) > 0) return (segment + i + 1) * rule.segmentMs - now;
  }
  return 0;
}

/**
 * Smallest d > 0 at which a call of `cost` fits, given it does not fit now.
 * The estimate only falls as time passes: within a segment the oldest counter
 * loses weight linearly, and at a segment boundary the estimate is continuous.
 * So walk the segments and solve the linear inequality in each.
 */
function msUntilFits(rule: RuleNumbers, counts: number[], phase: number, cost: number): number {
  const G = rule.segmentMs;
  const S = rule.segments;
  let newer = 0;
  for (let i = 1; i <= S; i++) newer += counts[i] as number;
  let elapsed = 0; // ms from now to the start of the segment being looked at (after the first)
  let at = phase; // phase at which the segment being looked at is entered
  for (let m = 0; m <= S; m++) {
    const oldest = counts[m] as number;
    const room = (rule.limit - cost - newer) * G; // what oldest · (G - phase) may still weigh
    if (room >= 0) {
      if (oldest === 0) return elapsed;
      const minPhase = G - floorDiv(room, oldest);
      return elapsed + (minPhase > at ? minPhase - at : 0);
    }
    elapsed += G - at;
    at = 0;
    newer -= counts[m + 1] ?? 0;
  }
  return elapsed; // not reached for cost <= limit: once every counter is gone, the call fits
}

export const slidingWindow: VectorAlgorithm = {
  stateSize: (rule) => rule.segments + 3,

  decide(rule, state, base, now, cost, out, next) {
    const G = rule.segmentMs;
    const S = rule.segments;
    let segment = floorDiv(now, G);
    let at = now;
    if (state !== null && state[base] === G && (state[base + 1] as number) > segment) {
      segment = state[base + 1] as number; // the clock went back: stay in the later segment
      at = segment * G;
    }
    const phase = at - segment * G;
    const counts = new Array<number>(S + 1);
    countsAt(rule, state, base, segment, counts);

    let newer = 0;
    for (let i = 1; i <= S; i++) newer += counts[i] as number;
    const estimate = (counts[0] as number) * (G - phase) + newer * G;
    const room = rule.limit * G;
    const after = estimate + cost * G;

    out.remainingNow = estimate < room ? floorDiv(room - estimate, G) : 0;
    out.resetMsNow = msUntilEmpty(rule, counts, segment, at);
    out.delayMs = 0;
    if (after <= room) {
      out.allowed = true;
      out.retryAfterMs = 0;
      out.remaining = floorDiv(room - after, G);
      out.resetMs = (segment + 1) * G - at + rule.windowMs;
      out.ttlMs = out.resetMs + (at - now); // kept from now, and `at` is later than now when the clock went back
      next[0] = G;
      next[1] = segment;
      for (let i = 0; i < S; i++) next[COUNTS + i] = counts[i] as number;
      next[COUNTS + S] = (counts[S] as number) + cost;
    } else {
      out.allowed = false;
      out.retryAfterMs = cost > rule.limit ? Number.POSITIVE_INFINITY : msUntilFits(rule, counts, phase, cost);
      out.remaining = out.remainingNow;
      out.resetMs = out.resetMsNow;
      out.ttlMs = 0;
    }
  },

  refund(rule, state, base, now, cost, next) {
    const G = rule.segmentMs;
    const S = rule.segments;
    if (state[base] !== G) return -1; // counted on another grid: nothing of this rule's to give back
    let segment = floorDiv(now, G);
    if (state[base] === G && (state[base + 1] as number) > segment) segment = state[base + 1] as number;
    const counts = new Array<number>(S + 1);
    countsAt(rule, state, base, segment, counts);
    // Give back from the newest segment first: that is where the call was most likely counted.
    let left = cost;
    for (let i = S; i >= 0 && left > 0; i--) {
      const take = Math.min(left, counts[i] as number);
      counts[i] = (counts[i] as number) - take;
      left -= take;
    }
    const ttl = msUntilEmpty(rule, counts, segment, now); // kept from now, also when the clock went back
    if (ttl === 0) return 0;
    // The state is anchored at its newest segment that still counts something (as in Redis, where
    // the key's expiry tells that segment): a clock that goes back stands still there, not later.
    let newest = S;
    while ((counts[newest] as number) === 0) newest--;
    next[0] = G;
    next[1] = segment - (S - newest);
    for (let i = 0; i <= S; i++) next[COUNTS + i] = i >= S - newest ? (counts[i - (S - newest)] as number) : 0;
    return ttl;
  },
};

/**
 * Sliding window in the rest of Floodgate. Text: its state's numbers. Redis
 * (sliding-window.lua, fast.lua): "segmentMs:c0:...:cS", expiring when the
 * newest count leaves the window; the library's view is the phase (ms into
 * the current segment), then the counts as seen from it, oldest first.
 */
export const definition: AlgorithmDefinition = {
  takes: ['segments'],
  blocks: true,
  unit: 'requests',
  state: { kind: 'vector', algorithm: slidingWindow },
  // The segment length divides.
  codec: vectorCodec('sw', slidingWindow, (numbers) => numbers[0] !== 0),
  // It weighs up to segments + 1 counters of at most `limit` by the segment length.
  largest: (rule) => 2 * (rule.segments + 1) * rule.limit * rule.segmentMs,
  view: (rule) => ({
    spec: `sw:${rule.limit}:${rule.windowMs}:${rule.segments}`,
    size: rule.segments + 2, // phase, counts oldest first
    fast: true,
    verdict: (reply, at, cost, out) => {
      // The memory store's state at segment 0 ([segmentMs, 0, counts...]), decided `phase` ms into it.
      const state = [rule.segmentMs, 0, ...reply.slice(at + 1, at + rule.segments + 2)];
      slidingWindow.decide(rule, state, 0, reply[at] as number, cost, out, new Array<number>(state.length));
    },
  }),
};
