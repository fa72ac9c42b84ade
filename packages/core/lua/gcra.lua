-- Mirrors src/algorithms/gcra.ts. State: the theoretical arrival time
-- {tatMs, fraction, unitsPerMs}, TAT = tatMs + fraction / unitsPerMs.
--
-- With the server clock the key expires at ceil(TAT) - 1, the last ms its
-- state matters, and holds only what the expiry cannot tell: "0" (a shared
-- small integer) when the fraction is 0, which it is whenever limit divides
-- windowMs, else "fraction:unitsPerMs". A key that holds "0" and keeps a
-- whole-ms TAT only needs its expiry moved.

local function gcra_level_at(rule, state, now)
  local tat_ms = state[1]
  local fraction = state[2]
  local stored_per_ms = state[3]
  if stored_per_ms ~= rule.per_ms and fraction > 0 then
    fraction = ceil_div(fraction * rule.per_ms, stored_per_ms)
  end
  if tat_ms < now or (tat_ms == now and fraction == 0) then return 0 end
  return (tat_ms - now) * rule.per_ms + fraction
end

local function gcra_tat(rule, level, now)
  local whole = floor_div(level, rule.per_ms)
  return { now + whole, level - whole * rule.per_ms, rule.per_ms }
end

algorithms['gcra'] = {
  fields = METER_FIELDS,
  rule = meter_rule,

  read = function(key, rule, ctx)
    local raw = get_string(key)
    if not raw then return nil end
    if not ctx.server then
      local tat = split(raw, 1)
      if tat then return { tat[1], 0, rule.per_ms } end
      return split(raw, 3)
    end
    local last = redis.call('PEXPIRETIME', key)
    if raw == '0' then return { last + 1, 0, rule.per_ms } end
    local parts = split(raw, 2)
    if not parts then return nil end
    return { last, parts[1], parts[2] }
  end,

  write = function(key, rule, next_state, ttl, ctx, state)
    local fraction = next_state[2]
    if not ctx.server then
      local value = fraction == 0 and fmt(next_state[1]) or join(next_state, 3)
      set_state(key, value, rule, ctx, ttl)
    elseif fraction ~= 0 then
      redis.call('SET', key, fmt(fraction) .. ':' .. fmt(next_state[3]), 'PXAT', next_state[1])
    elseif state and state[2] == 0 then
      redis.call('PEXPIREAT', key, next_state[1] - 1) -- the key holds "0" already
    else
      redis.call('SET', key, '0', 'PXAT', next_state[1] - 1)
    end
  end,

  decide = function(rule, state, now, cost, out)
    local level = 0
    if state then level = gcra_level_at(rule, state, now) end
    local after = meter_decide(rule, level, cost, out)
    if out.allowed then return gcra_tat(rule, after, now) end
    return nil
  end,

  refund = function(rule, state, now, cost)
    local level = meter_refund(rule, gcra_level_at(rule, state, now), cost)
    if level == 0 then return nil, 0 end
    return gcra_tat(rule, level, now), ceil_div(level, rule.per_ms)
  end,
}
