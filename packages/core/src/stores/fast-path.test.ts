/*
 * The fast path of the Redis library (lua/fast-prelude.lua, each algorithm's fast.lua) against its general path
 * (lua/calls.lua): the same consume on two keys that hold the same state must
 * get the same reply (but for the block's numbers, all 0, that the fast path
 * leaves out) and leave the same value and expiry, whatever the keys held
 * before: states of every rule of the same kind and of other kinds, blocks,
 * foreign values and types, keys without an expiry, expiries moved as time
 * would. Where the fast path declines, it must have written nothing.
 *
 * Both paths run in one FCALL of a test function added to the library, so
 * that they read one clock: a step whose FCALL saw Redis's clock move (TIME
 * at its start and end in different ms) puts the keys back and runs again.
 */
import { useRedisServer } from '@floodgate/test-support';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LIBRARY } from './redis/library.generated.js';

const redisServer = useRedisServer();

/** A test function over the whole library: args[1] says what to do to both keys. */
const TEST_FUNCTION = `
local function state(key)
  local kind = redis.call('TYPE', key).ok
  local value = kind == 'string' and redis.call('GET', key) or (kind == 'zset' and table.concat(redis.call('ZRANGE', key, 0, -1, 'WITHSCORES'), ',') or '')
  return { kind, value, redis.call('PTTL', key) }
end
local function ms_now()
  local time = redis.call('TIME')
  return time[1] * 1000 + math.floor(time[2] / 1000)
end
-- The keys as they are (value and expiry), and the ms they were read in.
local function save(keys)
  local saved = { started = ms_now() }
  for i, key in ipairs(keys) do saved[i] = { redis.call('DUMP', key), redis.call('PEXPIRETIME', key) } end
  return saved
end
-- Whether Redis's clock moved since save(): then the keys are put back as they were, to the ms of
-- their expiries, for the step to run again.
local function moved(keys, saved)
  if ms_now() == saved.started then return false end
  for i, key in ipairs(keys) do
    redis.call('DEL', key)
    if saved[i][1] then redis.call('RESTORE', key, '0', saved[i][1]) end
    if saved[i][2] > 0 then redis.call('PEXPIREAT', key, saved[i][2]) end
  end
  return true
end
redis.register_function('fg_test_both', function(keys, args)
  local a, b = keys[1], keys[2]
  local saved = save(keys)
  local out = {}
  if args[1] == 'consume' then
    local spec, cost = args[2], args[3]
    local before = state(a)
    local fast_reply = fast({ a }, cost == '1' and { spec } or { spec, cost })
    local declined = 0
    if not fast_reply then
      declined = 1
      out[#out + 1] = state(a)
      out[#out + 1] = before
      fast_reply = call({ a }, { 'consume', '', cost, '', spec }, false)
    end
    local general_reply = call({ b }, { 'consume', '', cost, '', spec }, false)
    out[#out + 1] = { declined }
    out[#out + 1] = fast_reply
    out[#out + 1] = general_reply
  elseif args[1] == 'general' then
    for _, key in ipairs(keys) do call({ key }, { 'consume', '', args[3], '', args[2] }, false) end
  elseif args[1] == 'set' then
    for _, key in ipairs(keys) do redis.call('SET', key, args[2]) end
  elseif args[1] == 'zadd' then
    for _, key in ipairs(keys) do redis.call('DEL', key) redis.call('ZADD', key, '1', args[2]) end
  elseif args[1] == 'pexpire' then
    for _, key in ipairs(keys) do redis.call('PEXPIRE', key, args[2]) end
  elseif args[1] == 'persist' then
    for _, key in ipairs(keys) do redis.call('PERSIST', key) end
  end
  out[#out + 1] = state(a)
  out[#out + 1] = state(b)
  if moved(keys, saved) then return 'moved' end
  return out
end)
`;

/**
 * The same for several rules: keys a1..an, then b1..bn; args: op, n, then the op's own.
 * consume: the n specs and the cost (fast on the a keys, general on the b keys); the
 * others act on the pair i (args[3]) as TEST_FUNCTION does on its two keys.
 */
const TEST_RULES_FUNCTION = `
redis.register_function('fg_test_rules', function(keys, args)
  local n = tonumber(args[2])
  local saved = save(keys)
  local as, bs = { unpack(keys, 1, n) }, { unpack(keys, n + 1, 2 * n) }
  local out, problem = {}, nil
  if args[1] == 'consume' then
    local specs, cost = { unpack(args, 3, 2 + n) }, args[3 + n]
    local before = {}
    for i = 1, n do before[i] = state(as[i]) end
    local fast_args = { unpack(specs) }
    if cost ~= '1' then fast_args[n + 1] = cost end
    local fast_reply = fast(as, fast_args)
    local declined = 0
    if not fast_reply then
      declined = 1
      for i = 1, n do
        local now = state(as[i])
        for j = 1, 3 do
          if now[j] ~= before[i][j] then problem = 'declined but wrote ' .. as[i] .. ': ' .. tostring(before[i][j]) .. ' -> ' .. tostring(now[j]) end
        end
      end
      fast_reply = call(as, { 'consume', '', cost, '', unpack(specs) }, false)
    end
    out[#out + 1] = { declined }
    out[#out + 1] = fast_reply
    out[#out + 1] = call(bs, { 'consume', '', cost, '', unpack(specs) }, false)
  else
    local i = tonumber(args[3])
    local pair = { as[i], bs[i] }
    for _, key in ipairs(pair) do
      if args[1] == 'general' then call({ key }, { 'consume', '', args[5], '', args[4] }, false)
      elseif args[1] == 'set' then redis.call('SET', key, args[4])
      elseif args[1] == 'pexpire' then redis.call('PEXPIRE', key, args[4])
      elseif args[1] == 'persist' then redis.call('PERSIST', key) end
    end
  end
  for i = 1, n do
    out[#out + 1] = state(as[i])
    out[#out + 1] = state(bs[i])
  end
  if moved(keys, saved) then return 'moved' end
  return problem or out
end)
`;

/** Rules of the kinds fast.lua decides, and rules it must leave to the general path. */
const FAST_SPECS = ['fw:5:60000', 'fw:3:1000', 'fw:9007199254740991:60000', 'm:5:1:1', 'm:3:4:2', 'm:4:2:1', 'sw:5:60000:1', 'sw:6:60000:3', 'sw:4:1000:2'];
const OTHER_SPECS = ['fw:5:60000|1000:0', 'fw:2:60000|500:4000', 'm:3:1:1|700:0', 'sw:5:60000:1|900:0', 'sl:4:60000', 'fw:5:60001'];

type Step =
  | { kind: 'consume'; spec: string; cost: number }
  | { kind: 'general'; spec: string; cost: number }
  | { kind: 'set'; value: string }
  | { kind: 'zadd'; member: string }
  | { kind: 'pexpire'; ms: number }
  | { kind: 'persist' };

/** Steps of a run about one rule (`home`), with now and then another rule's call, a foreign value, or time moving. */
const stepsAbout = (home: string): fc.Arbitrary<Step[]> =>
  fc.array(
    fc.oneof(
      { weight: 12, arbitrary: fc.record({ kind: fc.constant('consume' as const), spec: fc.constant(home), cost: fc.integer({ min: 1, max: 4 }) }) },
      {
        weight: 2,
        arbitrary: fc.record({ kind: fc.constant('consume' as const), spec: fc.constantFrom(...FAST_SPECS), cost: fc.integer({ min: 1, max: 7 }) }),
      },
      {
        weight: 2,
        arbitrary: fc.record({
          kind: fc.constant('general' as const),
          spec: fc.constantFrom(...OTHER_SPECS, ...FAST_SPECS),
          cost: fc.integer({ min: 1, max: 7 }),
        }),
      },
      {
        weight: 1,
        arbitrary: fc.record({
          kind: fc.constant('set' as const),
          value: fc.constantFrom(
            '0',
            '4',
            '-3',
            '1.5',
            '01',
            '9007199254740993',
            '99999999999999999999',
            'x',
            '2:1:1',
            '2:4:2',
            '60000:1:2',
            '30000:1:1:1',
            '5|fw:9:0:0:0:0',
            '',
          ),
        }),
      },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant('zadd' as const), member: fc.constantFrom('a', '!1:1:1:1') }) },
      { weight: 3, arbitrary: fc.record({ kind: fc.constant('pexpire' as const), ms: fc.integer({ min: 1, max: 130_000 }) }) },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant('persist' as const) }) },
    ),
    { minLength: 1, maxLength: 30 },
  );

function argsOf(s: Step): string[] {
  switch (s.kind) {
    case 'consume':
    case 'general':
      return [s.kind, s.spec, String(s.cost)];
    case 'set':
      return ['set', s.value];
    case 'zadd':
      return ['zadd', s.member];
    case 'pexpire':
      return ['pexpire', String(s.ms)];
    case 'persist':
      return ['persist'];
  }
}

const numbers = (reply: unknown): number[] => (reply as unknown[]).map(Number);

describe("the fast path (lua/fast-prelude.lua, the algorithms' fast.lua) decides as the general path", () => {
  it('the same replies and the same keys, from any state, in one FCALL each step', async () => {
    const redis = redisServer.client;
    await redis.call('FUNCTION', 'LOAD', 'REPLACE', `${LIBRARY.functions}\n${TEST_FUNCTION}`);
    let run = 0;
    let decided = 0;
    let denied = 0;
    let declined = 0;
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...FAST_SPECS).chain(stepsAbout), async (steps) => {
        run++;
        const a = `fast:{${run}}:a`;
        const b = `fast:{${run}}:b`;
        for (const s of steps) {
          let out: unknown;
          do out = await redis.call('FCALL', 'fg_test_both', '2', a, b, ...argsOf(s));
          while (out === 'moved');
          const parts = out as unknown[][];
          const [stateA, stateB] = parts.slice(-2);
          expect(stateA, JSON.stringify(s)).toEqual(stateB);
          if (s.kind !== 'consume') continue;
          const [flag, fastReply, generalReply] = parts.slice(-5, -2) as unknown[][];
          const general = numbers(generalReply);
          if (Number(flag?.[0]) === 1) {
            declined++;
            const [afterDecline, before] = parts.slice(0, 2);
            expect(afterDecline, `declined ${JSON.stringify(s)} but wrote`).toEqual(before);
            expect(numbers(fastReply)).toEqual(general);
          } else {
            decided++;
            if (general[0] === 0) denied++;
            // The fast reply is the general one without the block's numbers, which are 0 for a key it decides.
            expect([...numbers(fastReply), 0, 0, 0], JSON.stringify(s)).toEqual(general);
          }
        }
      }),
      { numRuns: 600 },
    );
    // The runs took both ways, often: the property is about something.
    expect(decided).toBeGreaterThan(1000);
    expect(denied).toBeGreaterThan(100);
    expect(declined).toBeGreaterThan(50);
  }, 120_000);

  it('several rules: the same replies and the same keys, all admitted or none, from any state', async () => {
    const redis = redisServer.client;
    await redis.call('FUNCTION', 'LOAD', 'REPLACE', `${LIBRARY.functions}\n${TEST_FUNCTION}\n${TEST_RULES_FUNCTION}`);
    /** The numbers of a rule's view in the fast reply: the general one's, without the block's 3. */
    const viewSize = (spec: string): number => (spec.startsWith('fw:') ? 2 : spec.startsWith('m:') ? 1 : Number(spec.split(':')[3]) + 2);
    type RulesStep =
      | { kind: 'consume'; cost: number }
      | { kind: 'general'; at: number; spec: string; cost: number }
      | { kind: 'set'; at: number; value: string }
      | { kind: 'pexpire'; at: number; ms: number }
      | { kind: 'persist'; at: number };
    const at = fc.integer({ min: 1, max: 3 });
    const steps: fc.Arbitrary<RulesStep[]> = fc.array(
      fc.oneof(
        { weight: 12, arbitrary: fc.record({ kind: fc.constant('consume' as const), cost: fc.integer({ min: 1, max: 4 }) }) },
        {
          weight: 2,
          arbitrary: fc.record({
            kind: fc.constant('general' as const),
            at,
            spec: fc.constantFrom(...OTHER_SPECS, ...FAST_SPECS),
            cost: fc.integer({ min: 1, max: 4 }),
          }),
        },
        {
          weight: 1,
          arbitrary: fc.record({ kind: fc.constant('set' as const), at, value: fc.constantFrom('2', 'x', '2:1:1', '60000:1:2', '5|fw:9:0:0:0:0') }),
        },
        { weight: 3, arbitrary: fc.record({ kind: fc.constant('pexpire' as const), at, ms: fc.integer({ min: 1, max: 130_000 }) }) },
        { weight: 1, arbitrary: fc.record({ kind: fc.constant('persist' as const), at }) },
      ),
      { minLength: 1, maxLength: 30 },
    );
    let run = 0;
    let decided = 0;
    let denied = 0;
    let declined = 0;
    await fc.assert(
      fc.asyncProperty(fc.uniqueArray(fc.constantFrom(...FAST_SPECS), { minLength: 2, maxLength: 3 }), steps, async (specs, plan) => {
        run++;
        const n = specs.length;
        const keys = [...specs.map((_, i) => `rules:{${run}}:a${i}`), ...specs.map((_, i) => `rules:{${run}}:b${i}`)];
        for (const s of plan) {
          const args =
            s.kind === 'consume'
              ? [...specs, String(s.cost)]
              : s.kind === 'general'
                ? [String(Math.min(s.at, n)), s.spec, String(s.cost)]
                : s.kind === 'set'
                  ? [String(Math.min(s.at, n)), s.value]
                  : s.kind === 'pexpire'
                    ? [String(Math.min(s.at, n)), String(s.ms)]
                    : [String(Math.min(s.at, n))];
          let out: unknown;
          do out = await redis.call('FCALL', 'fg_test_rules', String(2 * n), ...keys, s.kind, String(n), ...args);
          while (out === 'moved');
          expect(typeof out, String(out)).not.toBe('string');
          const parts = out as unknown[][];
          const states = parts.slice(-2 * n);
          for (let i = 0; i < n; i++) expect(states[2 * i], JSON.stringify(s)).toEqual(states[2 * i + 1]);
          if (s.kind !== 'consume') continue;
          const [flag, fastReply, generalReply] = parts as unknown[][];
          const general = numbers(generalReply);
          if (Number(flag?.[0]) === 1) {
            declined++;
            expect(numbers(fastReply)).toEqual(general);
            continue;
          }
          decided++;
          if (general[0] === 0) denied++;
          // The fast reply is the general one without each rule's block numbers, 0 for keys it decides.
          const fast = numbers(fastReply);
          const full = [fast[0]];
          let from = 1;
          for (const spec of specs) {
            full.push(...fast.slice(from, from + viewSize(spec)), 0, 0, 0);
            from += viewSize(spec);
          }
          expect(from, JSON.stringify(fast)).toBe(fast.length);
          expect(full, `${JSON.stringify(specs)} ${JSON.stringify(s)}`).toEqual(general);
        }
      }),
      { numRuns: 300 },
    );
    expect(decided).toBeGreaterThan(500);
    expect(denied).toBeGreaterThan(100);
    expect(declined).toBeGreaterThan(20);
  }, 120_000);

  it('declines what it cannot decide with nothing written, in script mode too', async () => {
    const redis = redisServer.client;
    const key = 'fast:{declines}';
    await redis.set(key, '5|fw:60000:0:0:0:0', 'PX', 60_000); // a plain count beside a block
    expect(await redis.evalsha((await redis.script('LOAD', LIBRARY.scripts.fast.source)) as string, 1, key, 'fw:9:60000')).toBeNull();
    expect(await redis.get(key)).toBe('5|fw:60000:0:0:0:0');
    await redis.set(key, '3', 'PX', 60_000);
    expect(await redis.evalsha(LIBRARY.scripts.fast.sha1, 1, key, 'fw:9:60000')).toEqual([1, 3, expect.any(Number)]); // a cost of 1: no argument
    expect(await redis.evalsha(LIBRARY.scripts.fast.sha1, 1, key, 'fw:9:60000', '2')).toEqual([1, 4, expect.any(Number)]);
    expect(await redis.get(key)).toBe('6');
    // A cost the rule can never admit, and specs the fast path does not know: declined.
    expect(await redis.evalsha(LIBRARY.scripts.fast.sha1, 1, key, 'fw:9:60000', '10')).toBeNull();
    expect(await redis.evalsha(LIBRARY.scripts.fast.sha1, 1, key, 'fw:9:60000', '0')).toBeNull();
    for (const spec of ['sl:9:60000', 'cc:9:60000', 'fw:9:60000|10:0', 'fw:0:60000', 'sw:9:60000:7', 'm:9:1', 'bogus']) {
      expect(await redis.evalsha(LIBRARY.scripts.fast.sha1, 1, key, spec, '1'), spec).toBeNull();
    }
    expect(await redis.get(key)).toBe('6');
  });

  it('as a function, hands what it declines to the general path in the same FCALL, a cost of 1 included', async () => {
    const redis = redisServer.client;
    await redis.call('FUNCTION', 'LOAD', 'REPLACE', LIBRARY.functions);
    const key = 'fast:{hands-over}';
    const now = Date.now();
    // A count of 5 in its window, beside a block of 1 s that has ended but is remembered (escalation) for a minute.
    await redis.set(key, `5|fw:${now + 60_000}:${now - 1000}:1000:1:${now + 60_000}`, 'PX', 60_000);
    // The general path's reply, the block's numbers included: 5 counted, admitted, no block holds, one remembered.
    expect(await redis.fcall(LIBRARY.fast, 1, key, 'fw:9:60000')).toEqual([1, 5, expect.any(Number), 0, 1000, 1]);
    expect(await redis.get(key)).toMatch(/^6\|fw:/);
    expect(await redis.fcall(LIBRARY.fast, 1, key, 'fw:9:60000', '3')).toEqual([1, 6, expect.any(Number), 0, 1000, 1]);
    expect(await redis.get(key)).toMatch(/^9\|fw:/);
  });
});
