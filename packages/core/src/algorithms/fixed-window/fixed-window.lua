-- Mirrors index.ts (fixed window). The key holds the count and
-- expires when its window ends, so its TTL tells when that is: a call in a
-- window the key already holds reads no clock and is one INCRBY, which keeps
-- the expiry (unless the key also holds a block: see prelude.lua).
-- View: count, ms to the window's end.
ALGORITHMS.fw = {
  -- fw:<limit>:<windowMs>
  rule = function(f) return { limit = f[2], window = f[3], capacity = f[2] } end,

  -- The state, and the key as read_string holds it (for its block).
  read = function(key, rule, clock)
    local held = read_string(key, 'fw', clock)
    if not held then return nil end
    -- A count INCRBY takes: the text fmt writes ("01" or "1e3" are numbers to Lua, not to Redis).
    local count = integer(held.raw)
    if not (count and held.ttl and fmt(count) == held.raw) then return nil, held end
    return { count = count, ms_to_end = held.ttl }, held
  end,

  admits = function(rule, state, cost)
    return (state and state.count or 0) + cost <= rule.limit
  end,

  view = function(rule, state, cost, clock, reply)
    if state then
      reply[#reply + 1] = state.count
      reply[#reply + 1] = state.ms_to_end
    else
      reply[#reply + 1] = 0
      reply[#reply + 1] = rule.window - now_of(clock) % rule.window
    end
  end,

  write = function(key, rule, state, cost, clock, lease, held)
    if state and not held.suffixed then
      redis.call('INCRBY', key, cost)
    elseif state then
      store_held(key, 'fw', fmt(state.count + cost), state.ms_to_end, held, clock)
    else
      store_held(key, 'fw', fmt(cost), rule.window - now_of(clock) % rule.window, held, clock)
    end
  end,

  refund = function(key, rule, clock, cost)
    local state, held = ALGORITHMS.fw.read(key, rule, clock)
    if not state then return refund_nothing(key, held, clock) end
    if state.count <= cost then
      drop_state(key, held, clock)
    elseif not held.suffixed then
      redis.call('DECRBY', key, cost)
    else
      store_held(key, 'fw', fmt(state.count - cost), state.ms_to_end, held, clock)
    end
  end,

  block = function(key, held, block, clock) block_string(key, 'fw', held, block, clock) end,
}
