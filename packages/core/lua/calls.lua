-- The operations of one call, over every rule of it. Consume reads every
-- rule, and writes only when every rule admits the call: a denied call leaves
-- every key as it was, but for the blocks it starts (rules with blockMs whose
-- own numbers deny it). Deny (a Cluster's slots after one that denied a
-- call) reads like consume, records nothing, and starts the same blocks.
-- Block and unblock are the limiter's blocks by hand.

-- Lifts a key's block while it is remembered: its state stays as it stands
-- now (a refund of nothing: forgotten once it has ended), as the engine's
-- unblock (src/engine.ts).
local function unblock(key, rule, clock)
  local _, held = rule.algorithm.read(key, rule, clock)
  if not (held and held.block) then return end
  rule.algorithm.refund(key, rule, clock, 0)
  if type_of(key) == 'zset' then
    local set = zset_block(key, clock)
    if set.member then redis.call('ZREM', key, set.member) end
    return
  end
  local _, after = rule.algorithm.read(key, rule, clock)
  if not (after and after.block) then return end
  local state_end, now = state_end_of(after, clock), now_of(clock)
  if state_end > now and after.raw ~= '' then
    store_held(key, after.tag, after.raw, state_end - now, nil, clock)
  else
    redis.call('DEL', key)
  end
end

-- Records (RedisStore's records: blocks by hand and their reasons): small
-- named values beside the rules' states, in two keys of one slot: an index
-- (a sorted set of the names, all scored 0, so that ZRANGEBYLEX lists them in
-- the order of their bytes) and the values (a hash: name -> "<expires>:<value>",
-- expires in ms on Redis's clock). A record that has expired reads as none,
-- and goes when a call comes across it; both keys expire with the last record.
--   rset  name, ttl ms, value       rget  names...      rdel  names...
--   rlist prefix, after, count: { next, name, value, name, value, ... }
local function records(op, keys, args)
  local index, values, now = keys[1], keys[2], server_now()
  local function live(name)
    local text = redis.call('HGET', values, name)
    if not text then return nil end
    local colon = string.find(text, ':', 1, true)
    local expires = colon and integer(string.sub(text, 1, colon - 1))
    if expires and expires > now then return string.sub(text, colon + 1) end
    redis.call('HDEL', values, name)
    redis.call('ZREM', index, name)
    return nil
  end
  if op == 'rset' then
    local ttl = integer(args[6])
    if not ttl or ttl < 1 or not args[7] then fail('ARG rset takes a name, a ttl of ms and a value') end
    redis.call('ZADD', index, 0, args[5])
    redis.call('HSET', values, args[5], fmt(now + ttl) .. ':' .. args[7])
    -- Both keys live as long as their longest record, as every key of the library has an expiry.
    local keep = math.max(redis.call('PTTL', index), redis.call('PTTL', values), ttl)
    redis.call('PEXPIRE', index, keep)
    redis.call('PEXPIRE', values, keep)
    return {}
  elseif op == 'rdel' then
    for i = 5, #args do
      redis.call('HDEL', values, args[i])
      redis.call('ZREM', index, args[i])
    end
    return {}
  elseif op == 'rget' then
    local reply = {}
    for i = 5, #args do reply[i - 4] = live(args[i]) or false end
    return reply
  end
  -- rlist
  local prefix, after, count = args[5], args[6], integer(args[7])
  if not (prefix and after and count) or count < 1 then fail('ARG rlist takes a prefix, the name to list after and a count') end
  local from = after ~= '' and ('(' .. after) or ('[' .. prefix)
  -- One more than asked: whether a page follows.
  local names = redis.call('ZRANGEBYLEX', index, from, '[' .. prefix .. '\255', 'LIMIT', 0, count + 1)
  local reply = { '' }
  for i = 1, math.min(#names, count) do
    local value = live(names[i])
    if value then
      reply[#reply + 1] = names[i]
      reply[#reply + 1] = value
    end
  end
  if #names > count then reply[1] = names[count] end
  return reply
end

local function call(keys, args, read_only)
  local op, clock, cost, lease = args[1], clock_of(args[2]), integer(args[3]), args[4]
  if not cost then fail('ARG cost must be an integer, got ' .. tostring(args[3])) end
  if read_only and op ~= 'peek' then fail('ARG ' .. tostring(op) .. ' writes: call the library\'s write function') end
  if op == 'reset' then
    redis.call('DEL', unpack(keys))
    return {}
  end
  if op == 'rset' or op == 'rget' or op == 'rdel' or op == 'rlist' then return records(op, keys, args) end
  local rules = {}
  for i = 1, #keys do rules[i] = rule_of(args[4 + i]) end

  if op == 'block' or op == 'unblock' then
    -- By hand, under every rule that can hold a block; a block's length is the call's cost.
    local now = now_of(clock)
    local block = { ends = now + cost, length = cost, strike = 0, forget = now + cost }
    for i = 1, #keys do
      local rule = rules[i]
      if rule.algorithm.block then
        if op == 'unblock' then
          unblock(keys[i], rule, clock)
        elseif cost > 0 then
          local _, held = rule.algorithm.read(keys[i], rule, clock)
          rule.algorithm.block(keys[i], held, block, clock)
        end
      end
    end
    return {}
  end

  if op == 'consume' or op == 'peek' or op == 'deny' then
    local states, helds, own, lefts, admitted = {}, {}, {}, {}, true
    for i = 1, #keys do
      local rule = rules[i]
      states[i], helds[i] = rule.algorithm.read(keys[i], rule, clock)
      own[i] = rule.algorithm.admits(rule, states[i], cost)
      lefts[i] = block_left(helds[i] and helds[i].block, clock)
      if not own[i] or lefts[i] > 0 then admitted = false end
    end
    local reply = { admitted and 1 or 0 }
    for i = 1, #keys do
      local rule = rules[i]
      rule.algorithm.view(rule, states[i], cost, clock, reply)
      if rule.algorithm.block then
        -- The block: ms it holds the key, and the length and strike of the one remembered (0s: none).
        local block = helds[i] and helds[i].block
        reply[#reply + 1] = lefts[i]
        reply[#reply + 1] = block and block.length or 0
        reply[#reply + 1] = block and block.strike or 0
      end
    end
    if admitted and op == 'consume' then
      for i = 1, #keys do rules[i].algorithm.write(keys[i], rules[i], states[i], cost, clock, lease, helds[i]) end
    elseif not admitted and op ~= 'peek' then
      for i = 1, #keys do
        local held = helds[i]
        local block = block_started(rules[i], held and held.block, lefts[i], own[i], cost, clock)
        if block then rules[i].algorithm.block(keys[i], held, block, clock) end
      end
    end
    return reply
  end

  -- refund: units back to every rule; release: the lease back to concurrency
  -- rules; undo (a call admitted in one slot of a Cluster while another slot
  -- denied it): both.
  if op ~= 'refund' and op ~= 'release' and op ~= 'undo' then fail('ARG unknown op ' .. tostring(op)) end
  -- A refund leaves blocks as they are: only reset lifts them.
  for i = 1, #keys do
    local rule = rules[i]
    if op ~= 'release' then rule.algorithm.refund(keys[i], rule, clock, cost) end
    if op ~= 'refund' and rule.algorithm.release then rule.algorithm.release(keys[i], rule, clock, lease) end
  end
  return {}
end

-- The fast path's function: what fast.lua leaves, the general path decides in the same call.
local function fast_call(keys, args)
  local reply = fast(keys, args)
  if reply then return reply end
  local general = { 'consume', '', args[#keys + 1] or '1', '' }
  for i = 1, #keys do general[4 + i] = args[i] end
  return call(keys, general, false)
end

-- Several calls in one: the calls a client made during one turn of its event
-- loop, run in turn as if each were an FCALL of its own (Redis runs one
-- command at a time anyway). One command instead of a pipeline of them
-- spares both ends most of a call's cost: the command's parsing, dispatch
-- and reply, and the function's entry, which cost more than fast.lua's work.
--   KEYS  every call's keys, in turn
--   ARGV  the batch's tag, then per call: 'f' (fast_call) or 'w' (call),
--         its number of keys and of arguments, then its arguments
--   reply per call, its label ("<tag>:<n>", n from 1) and its reply: a call
--         that failed answers its error's text, a string where every other
--         reply is an array, and the calls after it run on as they would
--         have. The labels let the store tell a reply that is not its call's
--         (a proxy that reorders replies) from its own.
local function many(keys, args)
  local tag = args[1]
  local replies, k, a, n = {}, 1, 2, 0
  while a <= #args do
    local kind, nkeys, nargs = args[a], tonumber(args[a + 1]), tonumber(args[a + 2])
    n = n + 1
    if not (nkeys and nargs and (kind == 'f' or kind == 'w')) then fail('ARG bad call ' .. fmt(n) .. ' in many') end
    local ok, reply = pcall(kind == 'f' and fast_call or call, { unpack(keys, k, k + nkeys - 1) }, { unpack(args, a + 3, a + 2 + nargs) }, false)
    if not ok then reply = type(reply) == 'table' and (reply.err or reply.ok) or tostring(reply) end
    replies[#replies + 1] = tag .. ':' .. fmt(n)
    replies[#replies + 1] = reply
    k, a = k + nkeys, a + 3 + nargs
  end
  return replies
end
