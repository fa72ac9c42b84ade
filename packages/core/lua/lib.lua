-- Floodgate's Redis script, assembled at build time from the files in
-- packages/core/lua (lib, meter, one file per algorithm, main). Each algorithm
-- mirrors its TypeScript twin in src/algorithms line for line; the shared
-- conformance suite checks that both decide alike, field by field.
--
-- Numbers are doubles here as in JavaScript, and every quantity stays an
-- integer below 2^53, so the arithmetic is exact in both.

local INFINITY = math.huge
local algorithms = {}

local function ceil_div(a, b) return math.ceil(a / b) end
local function floor_div(a, b) return math.floor(a / b) end
local function fmt(x) return string.format('%d', x) end

-- A state string "1:2:3" as a table of numbers.
local function split(raw)
  local state = {}
  for part in string.gmatch(raw, '[^:]+') do state[#state + 1] = tonumber(part) end
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

-- Keys expire exactly when their state would read as empty. With the server
-- clock the expiry is absolute (PXAT, on the clock that decided); with the
-- caller's clock Redis cannot know that clock, so keys live for the rule's
-- whole horizon instead.
local function expire_args(rule, ctx, ttl)
  if ctx.server then return 'PXAT', ctx.now + ttl end
  return 'PX', rule.horizon
end

local function set_state(key, value, rule, ctx, ttl)
  local mode, at = expire_args(rule, ctx, ttl)
  redis.call('SET', key, value, mode, at)
end

-- Algorithms whose state is a plain vector of numbers read and write it like this.
local function vector_io(size)
  return {
    read = function(key)
      local raw = get_string(key)
      if raw then return split(raw) end
      return nil
    end,
    write = function(key, rule, next_state, ttl, ctx)
      set_state(key, join(next_state, size(rule)), rule, ctx, ttl)
    end,
  }
end
