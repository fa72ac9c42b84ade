-- consume/gcra.lua: a call of one gcra rule under the server clock, the
-- limiter's hot path, written out flat. It keeps the state layout of
-- ../gcra.lua (the key expires at ceil(TAT) - 1 and holds "0", or
-- "fraction:unitsPerMs" with the expiry at floor(TAT)) and decides exactly as
-- it does; the general script still serves peek, refund and reset. Every
-- quantity is relative to now, so a call reads no clock but the key's TTL,
-- except to write a state that lasts only the current ms. No functions and no
-- tables but the reply: Redis builds a script's whole body again on every call.
--
-- KEYS[1]  the rule's key
-- ARGV     cost, burst * unitsPerToken (the room), unitsPerToken, unitsPerMs
-- Reply    the level (units of debt) before the call; the call was recorded
--          when level + cost * unitsPerToken <= room. The client derives the
--          rest (decideLevel in src/algorithms/meter.ts).

local key = KEYS[1]
local cost = tonumber(ARGV[1])
local room = tonumber(ARGV[2])
local unit = tonumber(ARGV[3])
local per_ms = tonumber(ARGV[4])

local level = 0
local plain = false -- the key holds "0"
local raw = redis.pcall('GET', key)
if type(raw) == 'string' then
  local ttl = redis.call('PTTL', key)
  if ttl >= 0 then
    if raw == '0' then
      level = (ttl + 1) * per_ms -- TAT is the expiry + 1: ttl + 1 ms from now
      plain = true
    else
      local fraction, stored = string.match(raw, '^(%d+):(%d+)$')
      fraction = tonumber(fraction)
      stored = tonumber(stored)
      if fraction then
        if stored ~= per_ms and fraction > 0 then fraction = math.ceil(fraction * per_ms / stored) end
        level = ttl * per_ms + fraction -- TAT is the expiry + fraction / unitsPerMs
      end
    end
  end
end

local after = level + cost * unit
if after > room then return level end

local whole = math.floor(after / per_ms)
local fraction = after - whole * per_ms
if after == 0 then
  redis.call('DEL', key) -- a call of cost 0 on an empty bucket leaves no state
elseif fraction == 0 and whole >= 2 then
  -- Expires at TAT - 1, whole - 1 ms from now.
  if plain then
    redis.call('PEXPIRE', key, whole - 1)
  else
    redis.call('SET', key, '0', 'PX', string.format('%d', whole - 1))
  end
elseif fraction ~= 0 and whole >= 1 then
  redis.call('SET', key, string.format('%d:%d', fraction, per_ms), 'PX', string.format('%d', whole))
else
  -- A state that matters for the rest of this ms only (a rule of more than
  -- one token per ms): a relative expiry cannot say so, the clock can.
  local time = redis.call('TIME')
  local now = time[1] * 1000 + math.floor(time[2] / 1000)
  redis.call('SET', key, fraction == 0 and '0' or string.format('%d:%d', fraction, per_ms), 'PXAT', now)
end
return level
