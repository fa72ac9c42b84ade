-- Mirrors src/algorithms/meter.ts: the arithmetic token-bucket, leaky-bucket
-- and gcra share. A level of units drains at rule.per_ms units per ms; one
-- token is rule.unit units.

-- Arguments per rule: burst, unitsPerToken, unitsPerMs, mode ('shape' or 'police').
local METER_FIELDS = 4

local function meter_rule(argv, at)
  local burst = tonumber(argv[at])
  local unit = tonumber(argv[at + 1])
  local per_ms = tonumber(argv[at + 2])
  -- The state matters until a full bucket has drained: ruleHorizon() in src/stores/redis-store.ts.
  return { burst = burst, unit = unit, per_ms = per_ms, shape = argv[at + 3] == 'shape', horizon = ceil_div(burst * unit, per_ms), size = 3 }
end

-- Bucket state is {level or tokens, updatedAt, unitsPerToken}, stored as "n:n:n".
local function meter_write(key, rule, next_state, ttl, ctx)
  set_state(key, join(next_state, 3), rule, ctx, ttl)
end

local function meter_drain(level, elapsed, per_ms)
  if elapsed <= 0 or level <= 0 then return math.max(level, 0) end
  if elapsed >= ceil_div(level, per_ms) then return 0 end
  return level - elapsed * per_ms
end

-- At most a full bucket, as in src/algorithms/meter.ts.
local function meter_rescale_level(rule, level, stored_unit)
  if stored_unit ~= rule.unit then level = ceil_div(level * rule.unit, stored_unit) end
  return math.min(level, rule.burst * rule.unit)
end

local function meter_decide(rule, level, cost, out)
  local unit = rule.unit
  local per_ms = rule.per_ms
  local room = rule.burst * unit
  local after = level + cost * unit
  out.remaining_now = level < room and floor_div(room - level, unit) or 0
  out.reset_now = ceil_div(level, per_ms)
  if after <= room then
    out.allowed = true
    out.retry = 0
    out.delay = rule.shape and out.reset_now or 0
    out.remaining = floor_div(room - after, unit)
    out.reset = ceil_div(after, per_ms)
    out.ttl = out.reset
  else
    out.allowed = false
    out.retry = cost > rule.burst and INFINITY or ceil_div(after - room, per_ms)
    out.delay = 0
    out.remaining = out.remaining_now
    out.reset = out.reset_now
    out.ttl = 0
  end
  return after
end

local function meter_refund(rule, level, cost)
  local after = level - cost * rule.unit
  return math.max(after, 0)
end
