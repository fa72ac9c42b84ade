-- Mirrors src/algorithms/leaky-bucket.ts. State: {level, updatedAt, unitsPerToken}.

local leaky_bucket = {
  fields = METER_FIELDS,
  rule = meter_rule,
  read = read_vector,
  write = meter_write,
}

leaky_bucket.decide = function(rule, state, now, cost, out)
  local level = 0
  local at = now
  if state then
    local stored = state[2]
    at = math.max(stored, at) -- the clock went back: count from the later time
    level = meter_drain(meter_rescale_level(rule, state[1], state[3]), at - stored, rule.per_ms)
  end
  local after = meter_decide(rule, level, cost, out)
  if out.allowed then return { after, at, rule.unit } end
  return nil
end

leaky_bucket.refund = function(rule, state, now, cost)
  local stored = state[2]
  local at = math.max(stored, now)
  local level = meter_refund(rule, meter_drain(meter_rescale_level(rule, state[1], state[3]), at - stored, rule.per_ms), cost)
  if level == 0 then return nil, 0 end
  return { level, at, rule.unit }, ceil_div(level, rule.per_ms)
end

algorithms['leaky-bucket'] = leaky_bucket
