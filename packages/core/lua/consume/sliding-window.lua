-- consume/sliding-window.lua: a call of one sliding-window rule of one
-- segment (the default: the previous window weighed, the current one counted)
-- under the server clock, the limiter's hot path, written out flat. It keeps
-- the state layout of ../sliding-window.lua ("segmentMs:segment:previous:
-- current", the key expiring when the current count leaves the window) and
-- decides exactly as it does; the general script still serves peek, refund,
-- reset and rules of several segments. No functions and no tables but the
-- reply: Redis builds a script's whole body again on every call.
--
-- KEYS[1]  the rule's key
-- ARGV     cost, limit, windowMs
-- Reply    admitted: remaining * (2 * windowMs + 1) + resetMs, one integer (a
--          table reply costs Redis about as much as a command); resetMs is at
--          most 2 * windowMs, and the rule's size bound (2 * 2 * limit *
--          windowMs at most 2^50, src/rules.ts) keeps the whole below 2^53.
--          Denied: { previous, current, phase }, the counts as seen from the
--          current window and the ms into it; the client decides from them
--          (slidingWindow.decide in src/algorithms/sliding-window.ts).

local key = KEYS[1]
local cost = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local window = tonumber(ARGV[3])

local time = redis.call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)
local segment = math.floor(now / window)
local at = now
local previous = 0
local current = 0

-- A key of another type (the rule's algorithm changed) or value reads as no state.
local raw = redis.pcall('GET', key)
if type(raw) == 'string' then
  -- A value of another shape (another algorithm's, or more segments') reads as no state, as in ../lib.lua.
  local stored_window, newest, older, newer = string.match(raw, '^(%d+):(%d+):(%d+):(%d+)$')
  if stored_window and tonumber(stored_window) == window then
    newest = tonumber(newest)
    if newest > segment then
      segment = newest -- the clock went back: stay in the later window
      at = segment * window
    end
    if newest == segment then
      previous = tonumber(older)
      current = tonumber(newer)
    elseif newest == segment - 1 then
      previous = tonumber(newer)
    end
  end
end

local phase = at - segment * window
local room = (limit - cost - current) * window - previous * (window - phase)
if room < 0 then return { previous, current, phase } end

local reset = (segment + 1) * window - at + window
redis.call('SET', key, string.format('%d:%d:%d:%d', window, segment, previous, current + cost), 'PXAT', now + reset)
return math.floor(room / window) * (2 * window + 1) + reset
