-- The operations of one call, over every rule of it. Consume reads every
-- rule, and writes only when every rule admits the call: a denied call leaves
-- every key as it was.

local function call(keys, args, read_only)
  local op, clock, cost, lease = args[1], clock_of(args[2]), integer(args[3]), args[4]
  if not cost then fail('ARG cost must be an integer, got ' .. tostring(args[3])) end
  if read_only and op ~= 'peek' then fail('ARG ' .. tostring(op) .. ' writes: call the library\'s write function') end
  if op == 'reset' then
    redis.call('DEL', unpack(keys))
    return {}
  end
  local rules = {}
  for i = 1, #keys do rules[i] = rule_of(args[4 + i]) end

  if op == 'consume' or op == 'peek' then
    local states, admitted = {}, true
    for i = 1, #keys do
      local rule = rules[i]
      states[i] = rule.algorithm.read(keys[i], rule, clock)
      if not rule.algorithm.admits(rule, states[i], cost) then admitted = false end
    end
    local reply = { admitted and 1 or 0 }
    for i = 1, #keys do rules[i].algorithm.view(rules[i], states[i], cost, clock, reply) end
    if admitted and op == 'consume' then
      for i = 1, #keys do rules[i].algorithm.write(keys[i], rules[i], states[i], cost, clock, lease) end
    end
    return reply
  end

  -- refund: units back to every rule; release: the lease back to concurrency
  -- rules; undo (a call admitted in one slot of a Cluster while another slot
  -- denied it): both.
  if op ~= 'refund' and op ~= 'release' and op ~= 'undo' then fail('ARG unknown op ' .. tostring(op)) end
  for i = 1, #keys do
    local rule = rules[i]
    if op ~= 'release' then rule.algorithm.refund(keys[i], rule, clock, cost) end
    if op ~= 'refund' and rule.algorithm.release then rule.algorithm.release(keys[i], rule, clock, lease) end
  end
  return {}
end
