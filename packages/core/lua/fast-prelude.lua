-- The fast path: a consume on Redis's own clock, by rules without blocks, of
-- the algorithms whose state is one plain string (fixed-window,
-- sliding-window and the meter). It takes one key per rule, the rules' specs
-- and the cost (none when 1), and answers as `call` would (see calls.lua) but
-- for each rule's three block numbers, all 0 here, without the general path's
-- tables and clock object: on one key, those cost as much as the commands.
-- Several rules are all read, then all written if all admit. It decides only
-- keys that are missing or hold the plain state the general path writes for
-- their rule; anything else (a block, another algorithm's or another rule's
-- state, a cost a rule can never admit) returns nil before anything is
-- written, and the caller takes the general path. The conformance suite and a
-- differential test hold the two paths to the same decisions and the same
-- keys.
--
-- This file comes first; then each algorithm's fast.lua (in its folder,
-- src/algorithms/<name>/) adds its FAST entry, and fast-call.lua decides with
-- them. Those files use nothing after them: the script mode runs them alone.
-- Their helpers serve the rest of the library too.

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

local function server_now()
  local time = redis.call('TIME')
  return time[1] * 1000 + math.floor(time[2] / 1000)
end

local FAST = {}

-- The time of a call over several rules (`at`), read once, when a new window
-- needs it; a call over one rule reads it where it needs it (`at` nil).
local function time_of(at)
  if not at then return server_now() end
  if not at.now then at.now = server_now() end
  return at.now
end
