-- Mirrors index.ts (concurrency) on a sorted set: one member per
-- lease, named by its lease id ("<cost>.<random>", made by the limiter) and
-- scored by the ms it ends at. The member "#" keeps the units of all leases
-- in the set, as the score -1 - units (below every time, so out of every
-- range of times), so that a call reads what is in use without adding up
-- every lease. A release removes only a lease the set holds, with the units
-- it was taken with: a lease id that is not there changes nothing.
-- View: units in use, ms until the last lease ends, ms until the call would
-- fit if no lease were released (0 when it fits now).

local function cc_units(lease) return integer(string.match(lease, '^(%d+)%.')) end

-- Units of the leases in the set, and of those already ended, and the end of the last one.
local function cc_read(key, clock)
  local kind = type_of(key)
  if kind ~= 'zset' then return kind ~= 'none' and { corrupt = true, used = 0 } or nil end
  local now = now_of(clock)
  local total = -1 - (tonumber(redis.call('ZSCORE', key, '#')) or -1)
  local ended, gone = redis.call('ZRANGEBYSCORE', key, 0, now), 0
  for i = 1, #ended do gone = gone + (cc_units(ended[i]) or 0) end
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local latest = last[1] ~= '#' and integer(last[2]) or nil
  if not integer(total) or gone > total or (last[1] ~= '#' and not latest) or not expires(key) then return { corrupt = true, used = 0 } end
  return { key = key, now = now, total = total, used = total - gone, gone = gone, latest = latest }
end

-- Writes the units the set holds, and its expiry: when its last lease ends;
-- or forgets the key once no lease is left in force.
local function cc_settle(key, state, clock)
  if state.total - state.gone <= 0 then
    redis.call('DEL', key)
    return
  end
  redis.call('ZADD', key, -1 - state.total, '#')
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  keep(key, integer(last[2]) - state.now, clock)
end

ALGORITHMS.cc = {
  -- cc:<limit>:<windowMs>
  rule = function(f) return { limit = f[2], window = f[3] } end,

  read = function(key, rule, clock) return cc_read(key, clock) end,

  admits = function(rule, state, cost)
    return (state and state.used or 0) + cost <= rule.limit
  end,

  view = function(rule, state, cost, clock, reply)
    local used = state and state.used or 0
    local now = now_of(clock)
    reply[#reply + 1] = used
    reply[#reply + 1] = used > 0 and state.latest and state.latest - now or 0
    if used + cost <= rule.limit or cost > rule.limit then
      reply[#reply + 1] = 0
      return
    end
    -- The call fits once the leases holding the first `used + cost - limit` units have ended.
    local excess, offset = used + cost - rule.limit, 0
    while true do
      local leases = redis.call('ZRANGEBYSCORE', state.key, '(' .. fmt(now), '+inf', 'WITHSCORES', 'LIMIT', offset, 64)
      for i = 1, #leases, 2 do
        excess = excess - (cc_units(leases[i]) or 0)
        if excess <= 0 then
          reply[#reply + 1] = integer(leases[i + 1]) - now
          return
        end
      end
      if #leases < 128 then break end
      offset = offset + 64
    end
    reply[#reply + 1] = 0 -- not reached: the leases in use hold more than the excess
  end,

  write = function(key, rule, state, cost, clock, lease)
    if cc_units(lease) ~= cost then fail('ARG a lease id starts with its cost, got ' .. lease) end
    if state and state.corrupt then redis.call('DEL', key) end
    if not state or state.corrupt then
      state = { now = now_of(clock), total = 0, gone = 0 }
    end
    -- An admitted call drops the leases that have ended, as the memory store's commit does.
    if state.gone > 0 then redis.call('ZREMRANGEBYSCORE', key, 0, state.now) end
    state.total, state.gone = state.total - state.gone, 0
    redis.call('ZADD', key, state.now + rule.window, lease)
    state.total = state.total + cost
    cc_settle(key, state, clock)
  end,

  -- Leases are given back by release, not by refunds; a refund only forgets
  -- a key whose leases have all ended, as the memory store does.
  refund = function(key, rule, clock)
    local state = cc_read(key, clock)
    if state and not state.corrupt and state.used == 0 then redis.call('DEL', key) end
  end,

  -- Removes the lease if the set holds it, with the units it holds; and, as
  -- the memory store does, forgets the key once no lease is left in force.
  release = function(key, rule, clock, lease)
    local state = cc_read(key, clock)
    if not state or state.corrupt then return end
    local ends = integer(redis.call('ZSCORE', key, lease))
    if ends then
      local units = cc_units(lease) or 0
      redis.call('ZREM', key, lease)
      state.total = state.total - units
      if ends <= state.now then state.gone = state.gone - units end
    elseif state.used > 0 then
      return -- not a lease of this key, and leases in force: nothing changes
    end
    cc_settle(key, state, clock)
  end,
}
