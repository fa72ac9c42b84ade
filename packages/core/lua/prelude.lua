-- Floodgate's Redis library: the algorithms of src/algorithms on Redis. It
-- is loaded once with FUNCTION LOAD and called with FCALL (Redis 7
-- Functions: helpers are defined once, not on every call), or, where
-- Functions are unavailable, run whole with EVALSHA. scripts/build-lua.mjs
-- concatenates the files of this folder in a fixed order and adds the
-- registration (or dispatch) at the end.
--
-- One call decides every rule of a limiter call, all or nothing:
--   KEYS    one key per rule
--   ARGV    op, now ('' = Redis's own clock), cost, lease id, then one rule
--           spec per key (see RedisStore and src/stores/redis/specs.ts)
--   reply   consume and peek: { admitted (1 or 0), then each rule's view }:
--           the numbers the rule's state stands for now, from which the
--           TypeScript side works out every field of the decision with the
--           memory store's own arithmetic; the other operations: {}.
--
-- State: a key's value holds what its expiry cannot tell, and the expiry
-- (absolute, on the clock that decides) is part of the state. On Redis's own
-- clock a call reads the time from a key's TTL and writes relative expiries,
-- and needs TIME only to place a new window on the epoch's grid; on the
-- caller's clock (tests, replays) it reads and writes absolute expiries on
-- that clock. Every number is an integer below 2^53, exact in a double, as in
-- JavaScript.

local ALGORITHMS = {}
local MAX_EXACT = 9007199254740991

-- A number read from Redis, if it is an integer this library could have
-- written. Anything else was written by someone else, or is corrupt, and
-- reads as no state: a poisoned key starts over instead of failing its calls.
local function integer(text)
  local n = tonumber(text)
  if n and n >= 0 and n <= MAX_EXACT and n == math.floor(n) then return n end
  return nil
end

local function fmt(n) return string.format('%d', n) end

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
  if not clock.now then
    local time = redis.call('TIME')
    clock.now = time[1] * 1000 + math.floor(time[2] / 1000)
  end
  return clock.now
end

-- ms from now until the key's state ends, or nil when it holds no state:
-- missing, without an expiry (not ours), or ended. A key expires when its
-- state ends (the first ms it no longer matters): Redis keeps a key through
-- the ms of its expiry, and deletes one whose expiry is set to the current ms
-- at once, so no state can be set to end any sooner than the next ms.
local function ttl_of(key, clock)
  local ttl
  if clock.server then
    ttl = redis.call('PTTL', key)
  else
    local at = redis.call('PEXPIRETIME', key)
    if at < 0 then return nil end
    ttl = at - clock.now
  end
  if ttl <= 0 then return nil end
  return ttl
end

-- Forgets a key whose state has ended on the caller's clock. Redis forgets
-- keys by its own clock only, and a caller's clock that later went back would
-- find the state alive again, where the memory store has let it go. (On
-- Redis's own clock the key is gone already.)
local function forget_ended(key, clock)
  if not clock.server and redis.call('EXISTS', key) == 1 then
    local at = redis.call('PEXPIRETIME', key)
    if at >= 0 and at <= clock.now then redis.call('DEL', key) end
  end
end

-- The absolute expiry `ms` from now. On the caller's clock it must not lie
-- behind Redis's own, which would delete the key at once and lose its state.
local function deadline(clock, ms)
  local at = now_of(clock) + ms
  if not clock.server and not clock.checked then
    local time = redis.call('TIME')
    local behind = time[1] * 1000 + math.floor(time[2] / 1000) - at
    if behind > 1000 then fail('CLOCK the caller\'s clock is ' .. fmt(behind) .. ' ms behind Redis\'s') end
    clock.checked = true
  end
  return at
end

-- Stores `value`, whose state ends `ms` ms from now (at least 1).
local function store(key, value, ms, clock)
  if clock.server then
    redis.call('SET', key, value, 'PX', ms)
  else
    redis.call('SET', key, value, 'PXAT', deadline(clock, ms))
  end
end

-- Sets when a key's state ends: `ms` ms from now (at least 1).
local function keep(key, ms, clock)
  if clock.server then
    redis.call('PEXPIRE', key, ms)
  else
    redis.call('PEXPIREAT', key, deadline(clock, ms))
  end
end

-- GET that reads a key of another type (left by a rule whose algorithm
-- changed) as no state.
local function get_string(key)
  local raw = redis.pcall('GET', key)
  if type(raw) == 'string' then return raw end
  return nil
end

local function is_zset(key)
  local kind = redis.call('TYPE', key)
  return kind.ok == 'zset' or kind == 'zset'
end

-- Whether a key carries an expiry: every key this library writes does, so one
-- without was written by someone else and is not to be trusted.
local function expires(key) return redis.call('PTTL', key) >= 0 end

-- Rules arrive as spec strings ("fw:100:60000"). Each is parsed once and
-- kept while the library is loaded: turning text into a number costs about
-- as much as a Redis command. Bounded: rules are the application's, not its
-- clients', but a limiter with rules per call could bring many.
local RULES = {}
local rule_count = 0

local function rule_of(spec)
  local rule = RULES[spec]
  if rule then return rule end
  local fields = {}
  for field in string.gmatch(spec, '[^:]+') do
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
  rule = algorithm.rule(fields, spec)
  rule.algorithm = algorithm
  if rule_count >= 1000 then
    RULES = {}
    rule_count = 0
  end
  RULES[spec] = rule
  rule_count = rule_count + 1
  return rule
end
