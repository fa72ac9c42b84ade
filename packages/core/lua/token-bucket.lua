-- Mirrors src/algorithms/token-bucket.ts. State: {tokens, updatedAt, unitsPerToken}.

local function tb_stored_tokens(rule, state, room)
  local stored_unit = state[3]
  local tokens = state[1]
  if stored_unit ~= rule.unit then tokens = floor_div(tokens * rule.unit, stored_unit) end
  return math.min(tokens, room)
end

local token_bucket = {
  fields = METER_FIELDS,
  rule = meter_rule,
  read = read_vector,
  write = meter_write,
}

token_bucket.decide = function(rule, state, now, cost, out)
  local room = rule.burst * rule.unit
  local level = 0
  local at = now
  if state then
    local stored = state[2]
    at = math.max(stored, at) -- the clock went back: count from the later time
    level = meter_drain(room - tb_stored_tokens(rule, state, room), at - stored, rule.per_ms)
  end
  local after = meter_decide(rule, level, cost, out)
  if out.allowed then return { room - after, at, rule.unit } end
  return nil
end

token_bucket.refund = function(rule, state, now, cost)
  local room = rule.burst * rule.unit
  local stored = state[2]
  local at = math.max(stored, now)
  local level = meter_refund(rule, meter_drain(room - tb_stored_tokens(rule, state, room), at - stored, rule.per_ms), cost)
  if level == 0 then return nil, 0 end
  return { room - level, at, rule.unit }, ceil_div(level, rule.per_ms)
end

algorithms['token-bucket'] = token_bucket
