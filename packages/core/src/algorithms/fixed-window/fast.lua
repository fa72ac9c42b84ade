-- The fast path of fixed-window (lua/fast-prelude.lua says what the fast path is): it
-- comes before the library's prelude, and its helpers serve the general path
-- of fixed-window too.

-- fixed-window: PTTL and INCRBY on a key in its window, which is what keeps
-- the rule's state; INCRBY fails on any other state, and a denied call takes
-- its units back.
FAST.fw = {
  -- fw:<limit>:<windowMs>
  rule = function(a, b, c)
    if c then return nil end
    return { limit = a, window = b, capacity = a }
  end,
  consume = function(key, rule, cost, text_cost)
    local ttl = redis.call('PTTL', key)
    if ttl > 0 then
      local after = redis.pcall('INCRBY', key, text_cost)
      if type(after) ~= 'number' then return nil end
      local count = after - cost
      if count >= 0 and count <= MAX_EXACT then
        if after <= rule.limit then return { 1, count, ttl } end
        redis.call('DECRBY', key, text_cost)
        return { 0, count, ttl }
      end
    end
    -- No state: the call opens a window on the epoch's grid, ending exactly on it (see store in lua/prelude.lua).
    local now = server_now()
    local ends = now - now % rule.window + rule.window
    redis.call('SET', key, text_cost, 'PXAT', fmt(ends))
    return { 1, 0, ends - now }
  end,
  -- One rule of several (see fast): the count and ms to the window's end, and the end of a
  -- window the call opens.
  read = function(key, rule, cost, at, reply)
    local ttl = redis.call('PTTL', key)
    local count, ends = 0, nil
    if ttl <= 0 then
      local now = time_of(at)
      ends = now - now % rule.window + rule.window
      ttl = ends - now
    else
      local raw = redis.pcall('GET', key)
      count = integer(raw)
      if not count or fmt(count) ~= raw then return nil end -- the text INCRBY takes (see fixed-window.lua)
    end
    local n = #reply
    reply[n + 1], reply[n + 2] = count, ttl
    return count + cost <= rule.limit, ends
  end,
  write = function(key, rule, text_cost, cost, ends)
    if ends then
      redis.call('SET', key, text_cost, 'PXAT', fmt(ends))
    else
      redis.call('INCRBY', key, text_cost)
    end
  end,
}
