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
-- This file comes first and uses nothing after it: the script mode runs it
-- alone. Its helpers serve the rest of the library too.

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

-- Sliding-window counts as seen from now (lua/sliding-window.lua): the counts
-- c0..cS of the newest counted segment and the S before it, whose key's TTL
-- is `ttl`; and the phase (ms into the current segment), and ms to that
-- segment's end.
local function sw_seen(rule, counts, ttl)
  local G, S = rule.seg_ms, rule.segments
  local ends_in = ttl - rule.window -- ms until the newest counted segment ends
  local shift, phase = 0, 0
  if ends_in > G then
    -- That segment is later than now's: the clock went back, and time stands
    -- still for the key at the start of its newest segment.
    return counts, 0, ends_in
  elseif ends_in > 0 then
    phase = G - ends_in
  else
    shift = math.floor(-ends_in / G) + 1
    phase = -ends_in % G
  end
  local seen = {}
  for i = 0, S do
    seen[i] = counts[i + shift] or 0
  end
  return seen, phase, G - phase
end

-- A meter's level (lua/meter.lua) `stored` units when written, at `per_ms`
-- units a ms, seen from now, its key's TTL being `ttl`: drained for the time
-- since, without overflowing on long idle times; and `ahead`, ms the state's
-- time lies after now (a clock that went back: time stands still for it).
local function meter_now(stored, per_ms, ttl)
  local full = math.ceil(stored / per_ms)
  local elapsed = full - ttl
  if elapsed <= 0 then return stored, -elapsed end
  if elapsed < full then return stored - elapsed * per_ms, 0 end
  return 0, 0
end

local FAST = {}

-- The time of a call over several rules (`at`), read once, when a new window
-- needs it; a call over one rule reads it where it needs it (`at` nil).
local function time_of(at)
  if not at then return server_now() end
  if not at.now then at.now = server_now() end
  return at.now
end

-- fixed-window: PTTL and INCRBY on a key in its window, which is what keeps
-- the rule's state; INCRBY fails on any other state, and a denied call takes
-- its units back.
FAST.fw = {
  -- fw:<limit>:<windowMs>
  rule = function(a, b, c)
    if c then return nil end
    return { limit = a, window = b, capacity = a }
  end,
  consume = function(key, rule, cost, text_cost)
    local ttl = redis.call('PTTL', key)
    if ttl > 0 then
      local after = redis.pcall('INCRBY', key, text_cost)
      if type(after) ~= 'number' then return nil end
      local count = after - cost
      if count >= 0 and count <= MAX_EXACT then
        if after <= rule.limit then return { 1, count, ttl } end
        redis.call('DECRBY', key, text_cost)
        return { 0, count, ttl }
      end
    end
    -- No state: the call opens a window on the epoch's grid, ending exactly on it (see store in prelude.lua).
    local now = server_now()
    local ends = now - now % rule.window + rule.window
    redis.call('SET', key, text_cost, 'PXAT', fmt(ends))
    return { 1, 0, ends - now }
  end,
  -- One rule of several (see fast): the count and ms to the window's end, and the end of a
  -- window the call opens.
  read = function(key, rule, cost, at, reply)
    local ttl = redis.call('PTTL', key)
    local count, ends = 0, nil
    if ttl <= 0 then
      local now = time_of(at)
      ends = now - now % rule.window + rule.window
      ttl = ends - now
    else
      local raw = redis.pcall('GET', key)
      count = integer(raw)
      if not count or fmt(count) ~= raw then return nil end -- the text INCRBY takes (see lua/fixed-window.lua)
    end
    local n = #reply
    reply[n + 1], reply[n + 2] = count, ttl
    return count + cost <= rule.limit, ends
  end,
  write = function(key, rule, text_cost, cost, ends)
    if ends then
      redis.call('SET', key, text_cost, 'PXAT', fmt(ends))
    else
      redis.call('INCRBY', key, text_cost)
    end
  end,
}

-- The meter: "level:unitsPerToken:unitsPerMs" (lua/meter.lua) under this
-- rule's own numbers, drained for the time since it was written.
FAST.m = {
  -- m:<burst>:<unitsPerToken>:<unitsPerMs>
  rule = function(a, b, c)
    if not c then return nil end
    return { unit = b, per_ms = c, room = a * b, tag = fmt(b) .. ':' .. fmt(c), capacity = a }
  end,
  read = function(key, rule, cost, at, reply)
    local raw = redis.pcall('GET', key)
    local level, ahead = 0, 0
    if type(raw) == 'string' then
      local stored, tag = string.match(raw, '^(%d+):(.*)$')
      stored = tonumber(stored) -- digits: an integer, if not too large
      if not stored or stored > MAX_EXACT or tag ~= rule.tag then return nil end
      local ttl = redis.call('PTTL', key)
      if ttl > 0 then
        level, ahead = meter_now(stored, rule.per_ms, ttl)
        level = math.min(level, rule.room)
      end
    end
    local after = level + cost * rule.unit
    reply[#reply + 1] = level
    return after <= rule.room, ahead, after
  end,
  write = function(key, rule, text_cost, cost, ahead, after)
    redis.call('SET', key, string.format('%d:%s', after, rule.tag), 'PX', fmt(ahead + math.ceil(after / rule.per_ms)))
  end,
}

-- sliding-window: "segmentMs:c0:...:cS" (lua/sliding-window.lua) on this rule's grid.
FAST.sw = {
  -- sw:<limit>:<windowMs>:<segments>
  rule = function(a, b, c)
    if not c or b % c ~= 0 then return nil end
    local tag = fmt(b / c)
    -- The state's text, to read with one match and write with one format.
    local pattern, format = '^' .. tag .. string.rep(':(%d+)', c + 1) .. '$', tag .. string.rep(':%d', c + 1)
    return { limit = a, window = b, segments = c, seg_ms = b / c, pattern = pattern, format = format, capacity = a }
  end,
  read = function(key, rule, cost, at, reply)
    local S, G = rule.segments, rule.seg_ms
    local raw = redis.pcall('GET', key)
    local counts, phase, ends_in, ttl, now
    if type(raw) == 'string' then
      local fields, stored = { string.match(raw, rule.pattern) }, {}
      if #fields == 0 then return nil end
      for i = 0, S do
        stored[i] = tonumber(fields[i + 1]) -- digits: an integer, if not too large
        if stored[i] > MAX_EXACT then return nil end
      end
      ttl = redis.call('PTTL', key)
      if ttl > 0 then counts, phase, ends_in = sw_seen(rule, stored, ttl) end
    end
    if not counts then
      now = time_of(at)
      phase = now % G
      counts, ends_in = {}, G - phase
      for i = 0, S do counts[i] = 0 end
    end
    local n, newer = #reply, cost
    reply[n + 1] = phase
    for i = 0, S do
      reply[n + 2 + i] = counts[i]
      if i > 0 then newer = newer + counts[i] end
    end
    return counts[0] * (G - phase) + newer * G <= rule.limit * G, counts, ends_in, ttl, now
  end,
  write = function(key, rule, text_cost, cost, counts, ends_in, ttl, now)
    local S = rule.segments
    counts[S] = counts[S] + cost
    local text = string.format(rule.format, unpack(counts, 0, S))
    if now then
      redis.call('SET', key, text, 'PXAT', fmt(now + ends_in + rule.window)) -- on the grid (see fw)
    elseif ends_in + rule.window == ttl then
      -- The newest segment is the current one: the expiry stays. Set again from the TTL read, it
      -- would move a ms later whenever the ms turns between PTTL and SET (Redis 7.0).
      redis.call('SET', key, text, 'KEEPTTL')
    else
      redis.call('SET', key, text, 'PX', fmt(ends_in + rule.window))
    end
  end,
}

-- Parsed specs, kept while the library is loaded (bounded, as in rule_of).
local FAST_RULES, fast_rules = {}, 0

local function fast_rule(spec)
  local rule = FAST_RULES[spec]
  if rule then return rule end
  local kind, a, b, c = string.match(spec, '^(%a+):(%d+):(%d+):?(%d*)$')
  local algorithm = FAST[kind]
  a, b, c = integer(a), integer(b), integer(c)
  if not (algorithm and a and b) or a == 0 or b == 0 or c == 0 then return nil end
  rule = algorithm.rule(a, b, c)
  if not rule then return nil end
  rule.consume, rule.read, rule.write = algorithm.consume, algorithm.read, algorithm.write
  if fast_rules >= 1000 then FAST_RULES, fast_rules = {}, 0 end
  FAST_RULES[spec], fast_rules = rule, fast_rules + 1
  return rule
end

-- keys: one per rule; args: the rules' specs, then the cost unless it is 1.
-- A rule's read adds its numbers to the reply and answers whether it admits
-- the call (nil: it cannot decide), then the numbers its write takes.
local function fast(keys, args)
  local n = #keys
  -- A cost of 1, the most common, comes as no argument: one fewer to send,
  -- and no text to turn into a number (as dear as a Redis command).
  local text_cost = args[n + 1] or '1'
  local cost = text_cost == '1' and 1 or integer(text_cost)
  if n == 0 or not cost or cost < 1 or #args > n + 1 then return nil end
  if n == 1 then
    -- One rule: no table but the reply (each costs as much as a command).
    local rule, key = fast_rule(args[1]), keys[1]
    if not rule or cost > rule.capacity then return nil end
    if rule.consume then return rule.consume(key, rule, cost, text_cost) end
    local reply = { 0 }
    local ok, a, b, c, d = rule.read(key, rule, cost, nil, reply)
    if ok == nil then return nil end
    if ok then
      reply[1] = 1
      rule.write(key, rule, text_cost, cost, a, b, c, d)
    end
    return reply
  end
  -- Several: all read, then all written if all admit.
  local rules, states, reply, at = {}, {}, { 1 }, {}
  for i = 1, n do
    local rule = fast_rule(args[i])
    if not rule or cost > rule.capacity then return nil end
    rules[i] = rule
  end
  for i = 1, n do
    local state = { rules[i].read(keys[i], rules[i], cost, at, reply) }
    if state[1] == nil then return nil end
    if not state[1] then reply[1] = 0 end
    states[i] = state
  end
  if reply[1] == 1 then
    for i = 1, n do rules[i].write(keys[i], rules[i], text_cost, cost, unpack(states[i], 2, 5)) end
  end
  return reply
end
