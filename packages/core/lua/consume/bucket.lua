-- consume/bucket.lua: a call of one token-bucket or leaky-bucket rule under
-- the server clock, the limiter's hot path, written out flat. It keeps the
-- state layout of ../token-bucket.lua and ../leaky-bucket.lua ("x:updatedAt:
-- unitsPerToken", x the tokens left or the level) and decides exactly as they
-- do (the meter of ../meter.lua); the general scripts still serve peek,
-- refund and reset. No functions and no tables but the reply: Redis builds a
-- script's whole body again on every call.
--
-- KEYS[1]  the rule's key
-- ARGV     cost, burst * unitsPerToken (the room), unitsPerToken, unitsPerMs,
--          'tokens' (token-bucket: the state counts tokens left) or 'level'
-- Reply    the level (units of debt) before the call; the call was recorded
--          when level + cost * unitsPerToken <= room. The client derives the
--          rest (decideLevel in src/algorithms/meter.ts).

local key = KEYS[1]
local cost = tonumber(ARGV[1])
local room = tonumber(ARGV[2])
local unit = tonumber(ARGV[3])
local per_ms = tonumber(ARGV[4])
local tokens = ARGV[5] == 'tokens'

local time = redis.call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)
local at = now
local level = 0

-- A key of another type (the rule's algorithm changed) or value reads as no state.
local raw = redis.pcall('GET', key)
if type(raw) == 'string' then
  local stored, updated, stored_unit = string.match(raw, '^(%d+):(%d+):(%d+)$')
  if stored then
    stored = tonumber(stored)
    updated = tonumber(updated)
    stored_unit = tonumber(stored_unit)
    -- Tokens or level in today's units, rounded so that a rule change hands out no
    -- free tokens, and at most a full bucket of either.
    if stored_unit ~= unit then
      if tokens then stored = math.floor(stored * unit / stored_unit) else stored = math.ceil(stored * unit / stored_unit) end
    end
    if stored > room then stored = room end
    level = tokens and room - stored or stored
    if updated > at then at = updated end -- the clock went back: count from the later time
    local elapsed = at - updated
    if elapsed > 0 and level > 0 then
      if elapsed >= math.ceil(level / per_ms) then level = 0 else level = level - elapsed * per_ms end
    end
  end
end

local after = level + cost * unit
if after > room then return level end
redis.call('SET', key, string.format('%d:%d:%d', tokens and room - after or after, at, unit), 'PXAT', now + math.ceil(after / per_ms))
return level
