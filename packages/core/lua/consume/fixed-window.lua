-- consume/fixed-window.lua: a call of one fixed-window rule under the server
-- clock, the limiter's hot path, written out flat. It keeps the state layout
-- of ../fixed-window.lua (the count as the value, the expiry at the last ms of
-- its window) and decides exactly as it does; the general script still serves
-- peek, refund and reset. No functions and no tables but the reply: Redis
-- builds a script's whole body again on every call.
--
-- KEYS[1]  the rule's key
-- ARGV     cost, limit, windowMs
-- Reply    the count before the call and the ms to the end of its window, as
--          count * (windowMs + 1) + ms: one integer, as a table reply costs
--          Redis about as much as a command. { count, ms } when that would not
--          be exact below 2^53, or ms exceeds windowMs (the clock went back).
--          The call was recorded when count + cost <= limit; the client derives
--          the rest (countInWindow in src/algorithms/fixed-window.ts).

local key = KEYS[1]
local cost = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local window = tonumber(ARGV[3])

-- A key of another type (the rule's algorithm changed) or value reads as no state.
local raw = redis.pcall('GET', key)
local count = type(raw) == 'string' and tonumber(raw)
if count then
  local last = redis.call('PEXPIRETIME', key)
  local ttl = redis.call('PTTL', key)
  if ttl >= 0 then
    -- The expiry tells the window back: it ends at last + 1. A key written
    -- under another windowMs counts only while its window is not older than
    -- ours, as in ../fixed-window.lua (a later one means the clock went back).
    local now = last - ttl
    if last + 1 - window >= now - now % window then
      if count + cost <= limit then redis.call('INCRBY', key, cost) end
      local ms_to_end = ttl + 1
      local packed = count * (window + 1) + ms_to_end
      if ms_to_end <= window and packed <= 9007199254740991 then return packed end
      return { count, ms_to_end }
    end
  end
end

local time = redis.call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)
local ms_to_end = window - now % window
if cost <= limit then redis.call('SET', key, ARGV[1], 'PXAT', now + ms_to_end - 1) end
return ms_to_end -- count 0
