-- Mirrors src/algorithms/fixed-window.ts. The key holds the count and
-- expires when its window ends, so its TTL tells when that is: a call in a window the key already holds reads no clock
-- and is one INCRBY, which keeps the expiry.
-- View: count, ms to the window's end.
ALGORITHMS.fw = {
  -- fw:<limit>:<windowMs>
  rule = function(f) return { limit = f[2], window = f[3] } end,

  read = function(key, rule, clock)
    local count = integer(get_string(key))
    if not count then return nil end
    local ttl = ttl_of(key, clock)
    if not ttl then return nil end
    return { count = count, ms_to_end = ttl }
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

  write = function(key, rule, state, cost, clock)
    if state then
      redis.call('INCRBY', key, cost)
    else
      store(key, cost, rule.window - now_of(clock) % rule.window, clock)
    end
  end,

  refund = function(key, rule, clock, cost)
    local state = ALGORITHMS.fw.read(key, rule, clock)
    if not state then return forget_ended(key, clock) end
    if state.count <= cost then
      redis.call('DEL', key)
    else
      redis.call('DECRBY', key, cost)
    end
  end,
}
