-- Mirrors src/algorithms/sliding-window.ts.
-- State: {segmentMs, newestSegment, count(newest - S), ..., count(newest)}.

local SW_COUNTS = 3 -- index of the oldest counter in the state table

local function sw_counts_at(rule, state, segment)
  local slots = rule.segments + 1
  local shift
  if state == nil or state[1] ~= rule.seg_ms then shift = slots else shift = segment - state[2] end
  local counts = {}
  for i = 0, slots - 1 do
    local from = i + shift
    if from < slots then counts[i] = state[SW_COUNTS + from] else counts[i] = 0 end
  end
  return counts
end

local function sw_ms_until_empty(rule, counts, segment, now)
  for i = rule.segments, 0, -1 do
    if counts[i] > 0 then return (segment + i + 1) * rule.seg_ms - now end
  end
  return 0
end

local function sw_ms_until_fits(rule, counts, phase, cost)
  local G = rule.seg_ms
  local S = rule.segments
  local newer = 0
  for i = 1, S do newer = newer + counts[i] end
  local elapsed = 0
  local at = phase
  for m = 0, S do
    local oldest = counts[m]
    local room = (rule.limit - cost - newer) * G
    if room >= 0 then
      if oldest == 0 then return elapsed end
      local min_phase = G - floor_div(room, oldest)
      if min_phase > at then return elapsed + min_phase - at end
      return elapsed
    end
    elapsed = elapsed + G - at
    at = 0
    newer = newer - (counts[m + 1] or 0)
  end
  return elapsed
end

local sliding_window = {
  -- Arguments per rule: limit, windowMs, segments.
  fields = 3,
  rule = function(argv, at)
    local window = tonumber(argv[at + 1])
    local segments = tonumber(argv[at + 2])
    local seg_ms = window / segments
    return { limit = tonumber(argv[at]), window = window, segments = segments, seg_ms = seg_ms, horizon = window + seg_ms, size = segments + 3 }
  end,
  read = read_vector,
  write = function(key, rule, next_state, ttl, ctx) set_state(key, join(next_state, rule.segments + 3), rule, ctx, ttl) end,
}

sliding_window.decide = function(rule, state, now, cost, out)
  local G = rule.seg_ms
  local S = rule.segments
  local segment = floor_div(now, G)
  local at = now
  if state and state[1] == G and state[2] > segment then
    segment = state[2] -- the clock went back: stay in the later segment
    at = segment * G
  end
  local phase = at - segment * G
  local counts = sw_counts_at(rule, state, segment)

  local newer = 0
  for i = 1, S do newer = newer + counts[i] end
  local estimate = counts[0] * (G - phase) + newer * G
  local room = rule.limit * G
  local after = estimate + cost * G

  out.remaining_now = estimate < room and floor_div(room - estimate, G) or 0
  out.reset_now = sw_ms_until_empty(rule, counts, segment, at)
  out.delay = 0
  if after <= room then
    out.allowed = true
    out.retry = 0
    out.remaining = floor_div(room - after, G)
    out.reset = (segment + 1) * G - at + rule.window
    out.ttl = out.reset
    local next_state = { G, segment }
    for i = 0, S - 1 do next_state[SW_COUNTS + i] = counts[i] end
    next_state[SW_COUNTS + S] = counts[S] + cost
    return next_state
  end
  out.allowed = false
  out.retry = cost > rule.limit and INFINITY or sw_ms_until_fits(rule, counts, phase, cost)
  out.remaining = out.remaining_now
  out.reset = out.reset_now
  out.ttl = 0
  return nil
end

sliding_window.refund = function(rule, state, now, cost)
  local G = rule.seg_ms
  local S = rule.segments
  local segment = floor_div(now, G)
  local at = now
  if state[1] == G and state[2] > segment then
    segment = state[2]
    at = segment * G
  end
  local counts = sw_counts_at(rule, state, segment)
  -- Give back from the newest segment first: that is where the call was most likely counted.
  local left = cost
  for i = S, 0, -1 do
    if left <= 0 then break end
    local take = math.min(left, counts[i])
    counts[i] = counts[i] - take
    left = left - take
  end
  local ttl = sw_ms_until_empty(rule, counts, segment, at)
  if ttl == 0 then return nil, 0 end
  local next_state = { G, segment }
  for i = 0, S do next_state[SW_COUNTS + i] = counts[i] end
  return next_state, ttl
end

algorithms['sliding-window'] = sliding_window
