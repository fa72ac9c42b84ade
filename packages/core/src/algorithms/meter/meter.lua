-- Mirrors index.ts (the meter): token-bucket, leaky-bucket and gcra are
-- one meter, a level of units that drains at per_ms units per ms, with room
-- for `burst` tokens of `unit` units each. The key holds
-- "level:unitsPerToken:unitsPerMs" as of the time it was written, and expires
-- when that level has drained: ceil(level / unitsPerMs) ms after it was
-- written. Its TTL tells how long ago that was (or, on a key that also holds
-- a block, the state's end: see prelude.lua). Read under another rule, the
-- level drains at the rate it was written with and is then re-expressed in
-- the reader's units, so it ends with its key whichever rule reads it.
-- View: the level now.

-- A level stored under another unit size (the rule changed since): rounded
-- up, never handing out free units, and at most a full bucket.
local function rescale(rule, level, stored_unit)
  if stored_unit ~= rule.unit then level = math.ceil(level * rule.unit / stored_unit) end
  return math.min(level, rule.room)
end

local meter = {
  -- m:<burst>:<unitsPerToken>:<unitsPerMs>
  rule = function(f, spec)
    return { burst = f[2], unit = f[3], per_ms = f[4], room = f[2] * f[3], tag = string.sub(spec, #fmt(f[2]) + 4), capacity = f[2] }
  end,

  -- The state, and the key as read_string holds it (for its block).
  read = function(key, rule, clock)
    local held = read_string(key, 'm', clock)
    if not (held and held.raw and held.ttl) then return nil, held end
    local level, tag = string.match(held.raw, '^(%d+):(.+)$')
    level = integer(level)
    if not level then return nil, held end
    local unit, per_ms = rule.unit, rule.per_ms
    if tag ~= rule.tag then
      -- Written under other numbers: read them (parsing is dearer than comparing).
      unit, per_ms = string.match(tag, '^(%d+):(%d+)$')
      unit, per_ms = integer(unit), integer(per_ms)
      if not (unit and per_ms) or unit == 0 or per_ms == 0 then return nil, held end
    end
    -- Drained at the rate it was written with (meter_now, in fast.lua), then in this rule's units.
    local ahead
    level, ahead = meter_now(level, per_ms, held.ttl)
    return { level = rescale(rule, level, unit), ahead = ahead }, held
  end,

  admits = function(rule, state, cost)
    return (state and state.level or 0) + cost * rule.unit <= rule.room
  end,

  view = function(rule, state, cost, clock, reply)
    reply[#reply + 1] = state and state.level or 0
  end,
}

-- Stores `level` as of the state's time (`ahead` ms from now), kept until it has drained.
local function meter_store(key, rule, level, ahead, held, clock)
  store_held(key, 'm', fmt(level) .. ':' .. rule.tag, ahead + math.ceil(level / rule.per_ms), held, clock)
end

meter.write = function(key, rule, state, cost, clock, lease, held)
  local level = state and state.level or 0
  meter_store(key, rule, level + cost * rule.unit, state and state.ahead or 0, held, clock)
end

meter.refund = function(key, rule, clock, cost)
  local state, held = meter.read(key, rule, clock)
  if not state then return refund_nothing(key, held, clock) end
  local level = state.level - cost * rule.unit
  if level <= 0 then
    drop_state(key, held, clock)
  else
    meter_store(key, rule, level, state.ahead, held, clock)
  end
end

meter.block = function(key, held, block, clock) block_string(key, 'm', held, block, clock) end

ALGORITHMS.m = meter
