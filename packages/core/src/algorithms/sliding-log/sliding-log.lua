-- Mirrors index.ts (sliding log) on a sorted set: one member per
-- admitted call, scored by the ms it counts at and named "<units>:<cost>",
-- where <units> sums every unit the key admitted up to and including that
-- call (zero-padded, so that members of one ms sort in the order they came). The units in the window (at - windowMs, at] are the newest member's
-- <units> minus those before the window's first member: two lookups, whatever
-- the limit and the cost, and one member written per call. A block is one
-- more member, scored -inf (see prelude.lua): the lowest, out of every range
-- of times, and skipped wherever members are counted by rank.
-- View: units in the window, ms until they have all left it, ms until the
-- call would fit (0 when it fits now).

-- Expired members dropped per admitted call, at most: each call adds one.
local SL_PRUNE = 64
-- Past this many units a key's counts start again from 0 (see sl_rebase).
local SL_REBASE = 2 ^ 50

local function sl_member(member)
  local units, cost = string.match(member or '', '^(%d+):(%d+)$')
  return integer(units), integer(cost)
end

local function sl_name(units, cost) return string.format('%016d:%d', units, cost) end

local sliding_log = {
  -- sl:<limit>:<windowMs>
  rule = function(f) return { limit = f[2], window = f[3], capacity = f[2] } end,

  -- The state, and the set's block member (see zset_block). Unreadable
  -- members (written by someone else, or corrupt) read as no state.
  read = function(key, rule, clock)
    local kind = type_of(key)
    if kind ~= 'zset' then return kind ~= 'none' and { corrupt = true, used = 0 } or nil, {} end
    local held = zset_block(key, clock)
    local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    if held.member and newest[1] == held.member then return nil, held end -- a block, no calls
    local units, cost = sl_member(newest[1])
    local newest_at = integer(newest[2])
    if not (units and cost and newest_at) or not expires(key) then return { corrupt = true, used = 0 }, held end
    -- A clock that went back stands still: the window ends at the newest call.
    local at = math.max(now_of(clock), newest_at)
    local first = redis.call('ZRANGEBYSCORE', key, '(' .. fmt(at - rule.window), '+inf', 'LIMIT', 0, 1)
    local first_units, first_cost = sl_member(first[1])
    if not first[1] then return { at = at, used = 0, units = units }, held end
    if not (first_units and first_cost and first_units >= first_cost and units >= first_units) then return { corrupt = true, used = 0 }, held end
    local before = first_units - first_cost
    return { key = key, at = at, used = units - before, units = units, before = before, newest_at = newest_at }, held
  end,

  admits = function(rule, state, cost)
    return (state and state.used or 0) + cost <= rule.limit
  end,
}

-- The first member (by rank, from `low`) whose <units> reach `target`: a binary search.
local function sl_reaching(key, low, high, target)
  while low < high do
    local middle = math.floor((low + high) / 2)
    local units = sl_member(redis.call('ZRANGE', key, middle, middle)[1])
    if units and units >= target then high = middle else low = middle + 1 end
  end
  return redis.call('ZRANGE', key, low, low, 'WITHSCORES')
end

sliding_log.view = function(rule, state, cost, clock, reply)
  local used = state and state.used or 0
  reply[#reply + 1] = used
  reply[#reply + 1] = used > 0 and state.newest_at + rule.window - state.at or 0
  if used + cost <= rule.limit or cost > rule.limit then
    reply[#reply + 1] = 0
    return
  end
  -- The call fits once the oldest `used + cost - limit` units have left the window.
  -- (Ranks count the block member too, which lies below every call.)
  local from = state.at - rule.window
  local low = redis.call('ZCOUNT', state.key, '-inf', fmt(from))
  local high = redis.call('ZCARD', state.key) - 1
  local entry = sl_reaching(state.key, low, high, state.before + used + cost - rule.limit)
  reply[#reply + 1] = integer(entry[2]) + rule.window - state.at
end

-- Counts start again from 0 when they grow large, so that they stay exact:
-- the members still in the window are written again, the others dropped.
local function sl_rebase(key, rule, state, held)
  redis.call('ZREMRANGEBYSCORE', key, '(-inf', fmt(state.at - rule.window))
  local members = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  redis.call('DEL', key)
  for i = 1, #members, 2 do
    if members[i] ~= held.member then
      local units, cost = sl_member(members[i])
      redis.call('ZADD', key, members[i + 1], sl_name(units - state.before, cost))
    end
  end
  if held.member then redis.call('ZADD', key, '-inf', held.member) end
  state.units = state.units - state.before
  state.before = 0
end

-- Empties the set of calls; it keeps its block while remembered.
local function sl_drop(key, held)
  redis.call('DEL', key)
  if held.block then redis.call('ZADD', key, '-inf', held.member) end
end

-- Sets the expiry: when the newest call (at `newest`) leaves the window, or the block is forgotten.
local function sl_keep(key, rule, newest, held, clock)
  local now = now_of(clock)
  keep(key, math.max(newest + rule.window - now, held.block and held.block.forget - now or 0), clock)
end

sliding_log.write = function(key, rule, state, cost, clock, lease, held)
  held = held or {}
  if held.member and not held.block then
    -- A block no longer remembered: dropped as the key is written.
    redis.call('ZREM', key, held.member)
    held = {}
  end
  local at, units = now_of(clock), 0
  if state and state.used > 0 then
    at, units = state.at, state.units
    if units + cost > SL_REBASE then
      sl_rebase(key, rule, state, held)
      units = state.units
    end
    -- Drop a few members that left the window: at most SL_PRUNE per call, so
    -- that no call does unbounded work, while the set never grows past what
    -- the window holds plus what calls drop faster than they add.
    local expired = redis.call('ZCOUNT', key, '(-inf', fmt(at - rule.window))
    local first = held.member and 1 or 0 -- the block member's rank, below the calls
    if expired > 0 then redis.call('ZREMRANGEBYRANK', key, first, first + math.min(expired, SL_PRUNE) - 1) end
  elseif state then
    sl_drop(key, held) -- corrupt, or every member has left the window: start again from 0
  end
  redis.call('ZADD', key, at, sl_name(units + cost, cost))
  sl_keep(key, rule, at, held, clock)
end

-- Gives units back, newest first (a refund is most likely for the latest call).
sliding_log.refund = function(key, rule, clock, cost)
  local state, held = sliding_log.read(key, rule, clock)
  if not state then
    -- Nothing to give back; a block no longer remembered is forgotten, as a string key's expiry would.
    if held and held.member and not held.block then redis.call('DEL', key) end
    return
  end
  if state.corrupt or cost >= state.used then
    sl_drop(key, held)
    if held.block then keep(key, held.block.forget - now_of(clock), clock) end
    return
  end
  if held.member and not held.block then
    redis.call('ZREM', key, held.member)
    held = {}
  end
  -- The calls that left the window go first, as in the memory store: a clock
  -- that goes back later must not find them again.
  redis.call('ZREMRANGEBYSCORE', key, '(-inf', fmt(state.at - rule.window))
  local left = cost
  while left > 0 do
    local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    local units, taken = sl_member(newest[1])
    redis.call('ZREM', key, newest[1])
    if taken > left then
      redis.call('ZADD', key, newest[2], sl_name(units - left, taken - left))
      taken = left
    end
    left = left - taken
  end
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  sl_keep(key, rule, integer(newest[2]), held, clock)
end

sliding_log.block = function(key, held, block, clock) block_zset(key, held, block, clock) end

ALGORITHMS.sl = sliding_log
