-- Mirrors src/algorithms/sliding-log.ts on a sorted set: one member per unit
-- admitted, scored by the ms it was admitted at. Members are "<ms>:<index>",
-- the index zero-padded so that members of one ms sort in the order they were
-- added: they stay unique when calls collide on a timestamp, and refunds take
-- the newest first.

local SL_INDEX = '%09d'

-- The later of now and the newest entry, and that entry's time (or nil).
local function sl_effective_now(key, now)
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if newest[2] == nil then return now, nil end
  local newest_at = tonumber(newest[2])
  return math.max(newest_at, now), newest_at
end

local function sl_prune(key, rule, at)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(at - rule.window))
end

algorithms['sliding-log'] = {
  -- Arguments per rule: limit, windowMs.
  fields = 2,
  rule = window_rule,
  read = read_zset,

  decide = function(rule, key, now, cost, out)
    local at, newest_at = now, nil
    local used = 0
    if key then
      at, newest_at = sl_effective_now(key, now)
      used = redis.call('ZCOUNT', key, '(' .. fmt(at - rule.window), '+inf')
    end
    local limit = rule.limit
    local after = used + cost
    out.remaining_now = used < limit and limit - used or 0
    out.reset_now = used > 0 and newest_at + rule.window - at or 0
    out.delay = 0
    if after <= limit then
      out.allowed = true
      out.retry = 0
      out.remaining = limit - after
      out.reset = rule.window
      out.ttl = rule.window
      return { at }
    end
    out.allowed = false
    out.remaining = out.remaining_now
    out.reset = out.reset_now
    out.ttl = 0
    if cost > limit then
      out.retry = INFINITY
      return nil
    end
    -- The call fits once the oldest `after - limit` units have left the window.
    local entry = redis.call('ZRANGEBYSCORE', key, '(' .. fmt(at - rule.window), '+inf', 'WITHSCORES', 'LIMIT', after - limit - 1, 1)
    out.retry = tonumber(entry[2]) + rule.window - at
    return nil
  end,

  write = function(key, rule, next_state, ttl, ctx)
    local at = next_state[1]
    if redis.call('EXISTS', key) == 1 and not is_zset(key) then redis.call('DEL', key) end
    sl_prune(key, rule, at)
    local first = redis.call('ZCOUNT', key, at, at)
    local member_prefix = fmt(at) .. ':'
    local score = fmt(at)
    local added = 0
    while added < ctx.cost do
      local args = {}
      local batch = math.min(ZSET_BATCH, ctx.cost - added)
      for j = 1, batch do
        args[#args + 1] = score
        args[#args + 1] = member_prefix .. string.format(SL_INDEX, first + added + j)
      end
      redis.call('ZADD', key, unpack(args))
      added = added + batch
    end
    if ctx.server then
      redis.call('PEXPIREAT', key, at + rule.window)
    else
      redis.call('PEXPIRE', key, rule.horizon)
    end
  end,

  -- Gives units back on the sorted set itself, newest first.
  refund_in_place = function(key, rule, ctx)
    if not is_zset(key) then return end
    local at = sl_effective_now(key, ctx.now)
    sl_prune(key, rule, at)
    redis.call('ZPOPMAX', key, ctx.cost)
    local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    if newest[2] == nil then return end
    if ctx.server then
      redis.call('PEXPIREAT', key, tonumber(newest[2]) + rule.window)
    else
      redis.call('PEXPIRE', key, rule.horizon)
    end
  end,
}
