-- Floodgate's Redis scripts, assembled at build time from the files in
-- packages/core/lua: lib, then the algorithms a script serves (one per script
-- when every rule of a limiter uses the same algorithm, all of them otherwise),
-- then main. Each algorithm mirrors its TypeScript twin in src/algorithms line
-- for line; the shared conformance suite checks that both decide alike, field
-- by field.
--
-- Numbers are doubles here as in JavaScript, and every quantity stays an
-- integer below 2^53, so the arithmetic is exact in both.
--
-- Redis runs the whole script body on every call: what is defined here is
-- built again each time, so scripts define only what their algorithms use.

local INFINITY = math.huge
local algorithms = {}

local function ceil_div(a, b) return math.ceil(a / b) end
local function floor_div(a, b) return math.floor(a / b) end
local function fmt(x) return string.format('%d', x) end

-- A state string "1:2:3" of exactly n numbers as a table, or nil: a value of
-- another shape was left by another algorithm (or number of segments) under
-- the rule's name, and reads as no state, as the memory store keeps none
-- across such a change.
local function split(raw, n)
  local state = {}
  for part in string.gmatch(raw, '[^:]+') do
    local number = tonumber(part)
    if not number then return nil end
    state[#state + 1] = number
  end
  if #state ~= n then return nil end
  return state
end

local function join(state, n)
  local parts = {}
  for i = 1, n do parts[i] = fmt(state[i]) end
  return table.concat(parts, ':')
end

-- GET that treats a key of another type (left by a rule whose algorithm changed) as no state.
local function get_string(key)
  local raw = redis.pcall('GET', key)
  if type(raw) == 'string' then return raw end
  return nil
end

-- Members per ZADD or ZREM: Lua's unpack has a stack limit.
local ZSET_BATCH = 500

-- Whether the key holds a sorted set (sliding-log and concurrency state).
local function is_zset(key)
  local kind = redis.call('TYPE', key)
  return kind.ok == 'zset' or kind == 'zset'
end

-- Keys expire exactly when their state would read as empty. With the server
-- clock the expiry is absolute (PXAT, on the clock that decided); with the
-- caller's clock Redis cannot know that clock, so keys live for the rule's
-- whole horizon instead.
local function set_state(key, value, rule, ctx, ttl)
  if ctx.server then
    redis.call('SET', key, value, 'PXAT', ctx.now + ttl)
  else
    redis.call('SET', key, value, 'PX', rule.horizon)
  end
end

-- A rule whose arguments are limit and windowMs, and whose state matters for one window.
local function window_rule(argv, at)
  local window = tonumber(argv[at + 1])
  return { limit = tonumber(argv[at]), window = window, horizon = window }
end

-- Sorted-set state (sliding-log, concurrency) is read in place: the key, or nil.
local function read_zset(key)
  if is_zset(key) then return key end
  return nil
end

-- State stored as "n1:n2:...", rule.size numbers: read as a table of numbers, or nil.
local function read_vector(key, rule)
  local raw = get_string(key)
  if raw then return split(raw, rule.size) end
  return nil
end
