-- The fast path of the meter (lua/fast-prelude.lua says what the fast path is): it
-- comes before the library's prelude, and its helpers serve the general path
-- of the meter too.

-- A meter's level (meter.lua) `stored` units when written, at `per_ms`
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

-- The meter: "level:unitsPerToken:unitsPerMs" (meter.lua) under this
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
