-- Mirrors src/algorithms/fixed-window.ts. State: {windowStart, count}.
--
-- With the server clock the key holds only the count and expires at the last
-- ms of its window, which tells the window back (PEXPIRETIME): a small integer
-- value that Redis shares, the smallest key this layout allows. A call in the
-- window the key already holds is one INCRBY, which keeps the expiry.
algorithms['fixed-window'] = {
  -- Arguments per rule: limit, windowMs.
  fields = 2,
  rule = window_rule,

  read = function(key, rule, ctx)
    local raw = get_string(key)
    if not raw then return nil end
    if not ctx.server then return split(raw, 2) end
    local count = tonumber(raw)
    if not count then return nil end
    return { redis.call('PEXPIRETIME', key) + 1 - rule.window, count }
  end,

  write = function(key, rule, next_state, ttl, ctx, state)
    if not ctx.server then
      set_state(key, join(next_state, 2), rule, ctx, ttl)
    elseif state and state[1] == next_state[1] then
      redis.call('INCRBY', key, ctx.cost)
    else
      redis.call('SET', key, fmt(next_state[2]), 'PXAT', next_state[1] + rule.window - 1)
    end
  end,

  decide = function(rule, state, now, cost, out)
    local limit = rule.limit
    local start = now - (now % rule.window)
    local count = 0
    if state then
      local stored_start = state[1]
      -- A stored window later than ours means the clock went back: keep the later window.
      if stored_start >= start then
        start = stored_start
        count = state[2]
      end
    end
    local ms_to_end = start + rule.window - now
    local after = count + cost
    out.remaining_now = count < limit and limit - count or 0
    out.reset_now = count > 0 and ms_to_end or 0
    out.delay = 0
    if after <= limit then
      out.allowed = true
      out.retry = 0
      out.remaining = limit - after
      out.reset = ms_to_end
      out.ttl = ms_to_end
      return { start, after }
    end
    out.allowed = false
    out.retry = cost > limit and INFINITY or ms_to_end
    out.remaining = out.remaining_now
    out.reset = out.reset_now
    out.ttl = 0
    return nil
  end,

  refund = function(rule, state, now, cost)
    local start = state[1]
    local ms_to_end = start + rule.window - now
    if ms_to_end <= 0 then return nil, 0 end -- that window is over: nothing to give back
    local count = math.max(0, state[2] - cost)
    if count == 0 then return nil, 0 end
    return { start, count }, ms_to_end
  end,
}
