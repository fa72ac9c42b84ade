-- Floodgate's Redis library: the algorithms of src/algorithms on Redis. It
-- is loaded once with FUNCTION LOAD and called with FCALL (Redis 7
-- Functions: helpers are defined once, not on every call), or, where
-- Functions are unavailable, run whole with EVALSHA. scripts/build-lua.mjs
-- concatenates the files of this folder and each algorithm's Lua (its
-- folder's <name>.lua registers it in ALGORITHMS, below) in a fixed order,
-- and adds the registration (or dispatch) at the end.
--
-- One call decides every rule of a limiter call, all or nothing:
--   KEYS    one key per rule
--   ARGV    op, now ('' = Redis's own clock), cost, lease id, then one rule
--           spec per key (see src/stores/redis/views.ts)
--   reply   consume, peek and deny: { admitted (1 or 0), then each rule's
--           view }: the numbers the rule's state stands for now, from which
--           the TypeScript side works out every field of the decision with
--           the memory store's own arithmetic; the other operations: {}.
--
-- State: on Redis's own clock a key's value holds what its expiry cannot
-- tell, and the expiry is part of the state: a call reads the time from a
-- key's TTL and writes relative expiries, and needs TIME only to place a new
-- window on the epoch's grid. On the caller's clock (tests, replays, a clock
-- at any epoch), a string key always holds when its state ends, on that
-- clock, in its value (the suffix below), and a sorted set its times in its
-- scores: validity is read from the state itself, and the key's expiry, set
-- relative (as many ms as the state needs), only frees memory, so that no
-- clock, however far from Redis's, makes a key expire early. Every number is
-- an integer below 2^53, exact in a double, as in JavaScript.

local ALGORITHMS = {}

local function fail(message) error({ err = 'FG_' .. message }) end

-- The clock of one call. `server`: Redis's own, read lazily; else the
-- caller's, given as ARGV[2].
local function clock_of(arg)
  if arg == '' then return { server = true } end
  local now = integer(arg)
  if not now then fail('ARG now must be an integer of ms, got ' .. arg) end
  return { server = false, now = now }
end

local function now_of(clock)
  if not clock.now then clock.now = server_now() end
  return clock.now
end

-- ms until the key expires, or nil when it holds no state: missing, without
-- an expiry (not ours), or ended. On Redis's own clock that is when its state
-- ends (Redis keeps a key through the ms of its expiry, and deletes one whose
-- expiry is set to the current ms at once, so no state can be set to end any
-- sooner than the next ms). On the caller's clock a string key says in its
-- value when its state ends (read_string), and this is only how long Redis
-- keeps it.
local function ttl_of(key, clock)
  local ttl = redis.call('PTTL', key)
  if ttl <= 0 then return nil end
  return ttl
end

-- Stores `value`, whose state ends `ms` ms from now (at least 1). On Redis's
-- own clock, once the call has read TIME (a new window on the epoch's grid),
-- the end is absolute: PX counts from the ms the SET runs in, which may lie a
-- ms after TIME's (Redis 7.0) or before it (7.2 reads the clock once per
-- script), and would move the window's end off the grid. On the caller's
-- clock the expiry is relative, as many of Redis's ms as the state needs of
-- the caller's: when the state ends is in the value.
local function store(key, value, ms, clock)
  if clock.server and clock.now then
    redis.call('SET', key, value, 'PXAT', clock.now + ms)
  else
    redis.call('SET', key, value, 'PX', math.max(ms, 1))
  end
end

-- Sets when a key expires: `ms` ms from now (at least 1).
local function keep(key, ms, clock)
  if clock.server and clock.now then
    redis.call('PEXPIREAT', key, clock.now + ms)
  else
    redis.call('PEXPIRE', key, math.max(ms, 1))
  end
end

-- GET that reads a key of another type (left by a rule whose algorithm
-- changed) as no state.
local function get_string(key)
  local raw = redis.pcall('GET', key)
  if type(raw) == 'string' then return raw end
  return nil
end

-- A key's type: 'none' when it is missing. The sorted sets' algorithms
-- (sliding-log, concurrency) read a key of another type (a rule whose
-- algorithm changed under the same name, or someone else's) as corrupt
-- state, which their next write replaces.
local function type_of(key)
  local kind = redis.call('TYPE', key)
  return kind.ok or kind
end


-- Whether a key carries an expiry: every key this library writes does, so one
-- without was written by someone else and is not to be trusted.
local function expires(key) return redis.call('PTTL', key) >= 0 end

-- Blocks (rule options blockMs and maxBlockMs; src/algorithms/block.ts). A
-- block lives in the rule's own key, beside the algorithm's state, as
-- absolute times on the clock that decides: `ends` (its first ms without
-- it), its length, its strike, and `forget` (its first ms forgotten:
-- escalation remembers a block until then). The key's expiry covers both the
-- state and the block, so it no longer tells when the state ends:
--   a string state   "<state>|<algorithm>:<stateEnd>:<ends>:<length>:<strike>:<forget>",
--                    stateEnd being when the state ends (0: there is none);
--   a sorted set     the member "!<ends>:<length>:<strike>:<forget>", scored
--                    -inf: below every time, so out of every range of times.
-- On the caller's clock every string key has the suffix, with "0:0:0:0" for
-- no block (see store_held). A block no longer remembered is dropped the next
-- time the key's state is written.

local NO_BLOCK = '0:0:0:0'

local function block_of(text)
  local ends, length, strike, forget = string.match(text or '', '^(%d+):(%d+):(%d+):(%d+)$')
  ends, length, strike, forget = integer(ends), integer(length), integer(strike), integer(forget)
  -- strike 0: a block by hand (limiter.block).
  if not (ends and length and strike and forget) or length == 0 then return nil end
  return { ends = ends, length = length, strike = strike, forget = forget }
end

local function block_text(block)
  return fmt(block.ends) .. ':' .. fmt(block.length) .. ':' .. fmt(block.strike) .. ':' .. fmt(block.forget)
end

-- The block if it is still remembered now, else nil.
local function remembered(block, clock)
  if block and now_of(clock) < block.forget then return block end
  return nil
end

-- ms the block holds the key from now (0 once it has ended); never more than
-- its length: a clock that went back stands still at its start.
local function block_left(block, clock)
  if not block then return 0 end
  local now = now_of(clock)
  if now >= block.ends then return 0 end
  return math.min(block.ends - now, block.length)
end

-- The block a denied consume starts under `rule`, or nil: the rule has
-- blockMs, its own numbers deny (`own` false, no block holds: `left` 0), and
-- the call could pass some day. Escalation doubles the last block remembered.
local function block_started(rule, block, left, own, cost, clock)
  if rule.block_ms == 0 or own or left > 0 or cost > rule.capacity then return nil end
  local length, strike = rule.block_ms, 1
  if rule.max_block_ms > 0 and block then
    length = math.min(math.max(2 * block.length, rule.block_ms), rule.max_block_ms)
    strike = block.strike + 1
  end
  local ends = now_of(clock) + length
  return { ends = ends, length = length, strike = strike, forget = ends + rule.max_block_ms }
end

-- A string key as its algorithm `tag` reads it: the state's text (`raw`),
-- ms until the state ends (`ttl`: nil when it holds none, or it has ended),
-- and its block while remembered; nil for a missing key or one of another
-- type. `ended`: the key is over (its state has ended and its block is
-- forgotten) on the caller's clock, where Redis may still hold it.
local function read_string(key, tag, clock)
  local raw = get_string(key)
  if not raw then return nil end
  local bar = string.find(raw, '|', 1, true)
  if not bar then return { tag = tag, raw = raw, ttl = ttl_of(key, clock), key = key } end
  local held = { tag = tag, suffixed = true }
  local written_by, state_end, text = string.match(string.sub(raw, bar + 1), '^(%a+):(%d+):(.*)$')
  local block = block_of(text)
  state_end = integer(state_end)
  -- Another algorithm's key, or one that reads as nothing: no state, no block.
  if written_by ~= tag or not state_end or not (block or text == NO_BLOCK) then return held end
  held.raw, held.state_end = string.sub(raw, 1, bar - 1), state_end
  local now = now_of(clock)
  -- A key that is over: its state's text stays readable, as a plain key's
  -- does, so that a rule on another grid knows it is not its own.
  if clock.server then
    if not ttl_of(key, clock) then return held end
  elseif math.max(state_end, block and block.forget or 0) <= now then
    held.ended = true
    return held
  end
  held.block = remembered(block, clock)
  if state_end > now then held.ttl = state_end - now end
  return held
end

-- When the state read ends (absolute; perhaps already past, on a caller's
-- clock that went back), or 0 when there is none.
local function state_end_of(held, clock)
  if not (held and held.raw and held.raw ~= '') then return 0 end
  if held.suffixed then return held.state_end end
  if held.ttl then return now_of(clock) + held.ttl end
  return 0 -- on Redis's own clock an ended key is gone
end

-- Stores a string state of the algorithm `tag` that ends `ms` from now (at
-- least 1), with the key's block while it is remembered; on the caller's
-- clock, always with the suffix that says when the state ends.
local function store_held(key, tag, value, ms, held, clock)
  local block = held and held.block
  if not block then
    if clock.server then return store(key, value, ms, clock) end
    return store(key, value .. '|' .. tag .. ':' .. fmt(now_of(clock) + ms) .. ':' .. NO_BLOCK, ms, clock)
  end
  local now = now_of(clock)
  store(key, value .. '|' .. tag .. ':' .. fmt(now + ms) .. ':' .. block_text(block), math.max(ms, block.forget - now), clock)
end

-- Forgets a string key's state; the key stays for its block while remembered.
local function drop_state(key, held, clock)
  local block = held and held.block
  if not block then return redis.call('DEL', key) end
  store(key, '|' .. held.tag .. ':0:' .. block_text(block), block.forget - now_of(clock), clock)
end

-- Writes a block on a string key, its state as it was (also one that has
-- ended: a caller's clock may go back to find it, as in the memory store).
local function block_string(key, tag, held, block, clock)
  local state_end = state_end_of(held, clock)
  local raw = state_end > 0 and held.raw or ''
  local now = now_of(clock)
  store(key, raw .. '|' .. tag .. ':' .. fmt(state_end) .. ':' .. block_text(block), math.max(state_end, block.forget) - now, clock)
end

-- A refund that finds no state to give back to: forgets a key that is over
-- on the caller's clock (Redis forgets keys by its own clock only, and a
-- caller's clock that later went back would find the state alive again,
-- where the memory store has let it go), and an ended state beside a block
-- still remembered, as the memory store forgets them.
local function refund_nothing(key, held, clock)
  if held and held.block and held.raw and held.raw ~= '' then return drop_state(key, held, clock) end
  if held and held.ended then redis.call('DEL', key) end
end

-- The block member of a sorted set: its name if the set has one (remembered
-- or not), and its block while remembered.
local function zset_block(key, clock)
  local lowest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if lowest[2] ~= '-inf' or string.sub(lowest[1], 1, 1) ~= '!' then return {} end
  return { member = lowest[1], block = remembered(block_of(string.sub(lowest[1], 2)), clock) }
end

-- Writes a block on a sorted set, its members as they were.
local function block_zset(key, held, block, clock)
  if type_of(key) ~= 'zset' then redis.call('DEL', key) end
  if held and held.member then redis.call('ZREM', key, held.member) end
  redis.call('ZADD', key, '-inf', '!' .. block_text(block))
  keep(key, math.max(ttl_of(key, clock) or 0, block.forget - now_of(clock)), clock)
end

-- Rules arrive as spec strings ("fw:100:60000", then "|<blockMs>:<maxBlockMs>"
-- for a rule that blocks). Each is parsed once and kept while the library is
-- loaded: turning text into a number costs about as much as a Redis command.
-- Bounded: rules are the application's, not its clients', but a limiter with
-- rules per call could bring many.
local RULES = {}
local rule_count = 0

local function rule_of(spec)
  local rule = RULES[spec]
  if rule then return rule end
  local bar = string.find(spec, '|', 1, true)
  local shape = bar and string.sub(spec, 1, bar - 1) or spec
  local fields = {}
  for field in string.gmatch(shape, '[^:]+') do
    if #fields == 0 then
      fields[1] = field
    else
      local n = integer(field)
      if not n or n == 0 then fail('ARG bad rule spec ' .. spec) end
      fields[#fields + 1] = n
    end
  end
  local algorithm = ALGORITHMS[fields[1]]
  if not algorithm then fail('ARG unknown rule spec ' .. spec) end
  rule = algorithm.rule(fields, shape)
  rule.algorithm = algorithm
  rule.block_ms, rule.max_block_ms = 0, 0
  if bar then
    local block_ms, max_block_ms = string.match(string.sub(spec, bar + 1), '^(%d+):(%d+)$')
    block_ms, max_block_ms = integer(block_ms), integer(max_block_ms)
    if not (block_ms and max_block_ms) or block_ms == 0 or (max_block_ms > 0 and max_block_ms < block_ms) or not algorithm.block then
      fail('ARG bad rule spec ' .. spec)
    end
    rule.block_ms, rule.max_block_ms = block_ms, max_block_ms
  end
  if rule_count >= 1000 then
    RULES = {}
    rule_count = 0
  end
  RULES[spec] = rule
  rule_count = rule_count + 1
  return rule
end
