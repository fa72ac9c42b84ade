-- Mirrors index.ts (sliding window). The key holds
-- "segmentMs:c0:...:cS", the counts of the newest counted segment and the S
-- before it (oldest first), and expires when the newest count leaves the
-- window: at that segment's end + windowMs. Its TTL tells where that segment
-- lies from now (or, on a key that also holds a block, the state's end).
-- View: the phase (ms into the current segment), then c0..cS as seen from it
-- (sw_seen, in fast.lua).

local sliding_window = {
  -- sw:<limit>:<windowMs>:<segments>
  rule = function(f)
    local seg_ms = f[3] / f[4]
    return { limit = f[2], window = f[3], segments = f[4], seg_ms = seg_ms, tag = fmt(seg_ms), capacity = f[2] }
  end,

  -- The state, and the key as read_string holds it (for its block); and
  -- whether the key counts on another grid (another segment length).
  read = function(key, rule, clock)
    local held = read_string(key, 'sw', clock)
    if not (held and held.raw) then return nil, held end
    local counts = {}
    local n = -1 -- counts[0..S]; the first field is the segment length
    for field in string.gmatch(held.raw, '[^:]+') do
      if n == -1 then
        if field ~= rule.tag then return nil, held, true end -- another segment length: another grid
      else
        local count = integer(field)
        if not count then return nil, held end
        counts[n] = count
      end
      n = n + 1
    end
    if n ~= rule.segments + 1 or not held.ttl then return nil, held end
    local seen, phase, ends_in = sw_seen(rule, counts, held.ttl)
    return { counts = seen, phase = phase, ends_in = ends_in }, held
  end,

  admits = function(rule, state, cost)
    if not state then return cost <= rule.limit end
    local G, counts = rule.seg_ms, state.counts
    local newer = 0
    for i = 1, rule.segments do newer = newer + counts[i] end
    return counts[0] * (G - state.phase) + (newer + cost) * G <= rule.limit * G
  end,

  view = function(rule, state, cost, clock, reply)
    if state then
      reply[#reply + 1] = state.phase
      for i = 0, rule.segments do reply[#reply + 1] = state.counts[i] end
    else
      reply[#reply + 1] = now_of(clock) % rule.seg_ms
      for _ = 0, rule.segments do reply[#reply + 1] = 0 end
    end
  end,
}

-- Stores counts whose newest (counts[S]) is the segment ending `ends_in` ms
-- from now. A plain key whose newest segment stays keeps its expiry: set again
-- from the TTL read, it would move a ms later whenever the ms turns between
-- PTTL and SET (Redis 7.0), and the key's segments would drift off the grid.
local function sw_store(key, rule, counts, ends_in, held, clock)
  local fields = { rule.tag }
  for i = 0, rule.segments do fields[i + 2] = fmt(counts[i]) end
  local text = table.concat(fields, ':')
  if held and not held.suffixed and held.ttl == ends_in + rule.window then return redis.call('SET', key, text, 'KEEPTTL') end
  store_held(key, 'sw', text, ends_in + rule.window, held, clock)
end

sliding_window.write = function(key, rule, state, cost, clock, lease, held)
  local counts, ends_in
  if state then
    counts, ends_in = state.counts, state.ends_in
  else
    counts, ends_in = {}, rule.seg_ms - now_of(clock) % rule.seg_ms
    for i = 0, rule.segments do counts[i] = 0 end
  end
  counts[rule.segments] = counts[rule.segments] + cost
  sw_store(key, rule, counts, ends_in, held, clock)
end

-- Gives units back from the newest segment first, where the call was most
-- likely counted. The state is then anchored at its newest segment that
-- still counts something, which sets when it expires.
sliding_window.refund = function(key, rule, clock, cost)
  local state, held, foreign = sliding_window.read(key, rule, clock)
  if foreign then return end -- nothing of this rule's to give back, and nothing to forget: as the memory store
  if not state then return refund_nothing(key, held, clock) end
  local S, counts = rule.segments, state.counts
  local left = cost
  for i = S, 0, -1 do
    local take = math.min(left, counts[i])
    counts[i] = counts[i] - take
    left = left - take
  end
  local newest = -1
  for i = S, 0, -1 do
    if counts[i] > 0 then
      newest = i
      break
    end
  end
  if newest < 0 then return drop_state(key, held, clock) end
  local anchored = {}
  for i = 0, S do anchored[i] = counts[i - (S - newest)] or 0 end
  sw_store(key, rule, anchored, state.ends_in - (S - newest) * rule.seg_ms, held, clock)
end

sliding_window.block = function(key, held, block, clock) block_string(key, 'sw', held, block, clock) end

ALGORITHMS.sw = sliding_window
