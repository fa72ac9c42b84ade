-- The fast path of sliding-window (lua/fast-prelude.lua says what the fast path is): it
-- comes before the library's prelude, and its helpers serve the general path
-- of sliding-window too.

-- Sliding-window counts as seen from now (sliding-window.lua): the counts
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

-- sliding-window: "segmentMs:c0:...:cS" (sliding-window.lua) on this rule's grid.
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
