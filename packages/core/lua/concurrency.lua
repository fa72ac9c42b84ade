-- Mirrors src/algorithms/concurrency.ts on a sorted set: one member per unit
-- a lease holds ("<leaseId>:<n>"), scored by the ms the lease expires at.
-- A lease id starts with the units it holds ("3.<random>"), so a release
-- knows which members to remove.

local function cc_lease_cost(lease_id)
  return tonumber(string.match(lease_id, '^(%d+)%.')) or 0
end

local function cc_members(lease_id, cost)
  local members = {}
  for i = 1, cost do members[i] = lease_id .. ':' .. fmt(i) end
  return members
end

local function cc_expire(key, rule, ctx)
  local latest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if latest[2] == nil then return end
  if ctx.server then
    redis.call('PEXPIREAT', key, tonumber(latest[2]))
  else
    redis.call('PEXPIRE', key, rule.horizon)
  end
end

algorithms['concurrency'] = {
  -- Arguments per rule: limit, windowMs (how long a lease lives).
  fields = 2,
  rule = window_rule,
  read = read_zset,

  decide = function(rule, key, now, cost, out)
    local used = 0
    local latest = now
    if key then
      used = redis.call('ZCOUNT', key, '(' .. fmt(now), '+inf')
      if used > 0 then latest = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2]) end
    end
    local limit = rule.limit
    local after = used + cost
    out.remaining_now = used < limit and limit - used or 0
    out.reset_now = latest - now
    out.delay = 0
    if after <= limit then
      out.allowed = true
      out.retry = 0
      out.remaining = limit - after
      out.reset = math.max(out.reset_now, rule.window)
      out.ttl = out.reset
      return { now }
    end
    out.allowed = false
    out.remaining = out.remaining_now
    out.reset = out.reset_now
    out.ttl = 0
    if cost > limit then
      out.retry = INFINITY
      return nil
    end
    -- The call fits once the leases holding the first `after - limit` units have expired.
    local unit = redis.call('ZRANGEBYSCORE', key, '(' .. fmt(now), '+inf', 'WITHSCORES', 'LIMIT', after - limit - 1, 1)
    out.retry = tonumber(unit[2]) - now
    return nil
  end,

  write = function(key, rule, next_state, ttl, ctx)
    local now = next_state[1]
    if redis.call('EXISTS', key) == 1 and not is_zset(key) then redis.call('DEL', key) end
    redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(now))
    local members = cc_members(ctx.lease, ctx.cost)
    local score = fmt(now + rule.window)
    for first = 1, #members, ZSET_BATCH do
      local args = {}
      for i = first, math.min(first + ZSET_BATCH - 1, #members) do
        args[#args + 1] = score
        args[#args + 1] = members[i]
      end
      redis.call('ZADD', key, unpack(args))
    end
    cc_expire(key, rule, ctx)
  end,

  -- Leases are given back by release, not by refunds.
  refund_in_place = function() end,

  release_in_place = function(key, rule, ctx)
    if not is_zset(key) then return end
    local members = cc_members(ctx.lease, cc_lease_cost(ctx.lease))
    for first = 1, #members, ZSET_BATCH do
      redis.call('ZREM', key, unpack(members, first, math.min(first + ZSET_BATCH - 1, #members)))
    end
    cc_expire(key, rule, ctx)
  end,
}
