-- The fast path's entry: a call's specs to the FAST entries of the algorithms'
-- fast.lua files, then all read and, if all admit, all written.

-- Parsed specs, kept while the library is loaded (bounded, as in rule_of).
local FAST_RULES, fast_rules = {}, 0

local function fast_rule(spec)
  local rule = FAST_RULES[spec]
  if rule then return rule end
  local kind, a, b, c = string.match(spec, '^(%a+):(%d+):(%d+):?(%d*)$')
  local algorithm = FAST[kind]
  a, b, c = integer(a), integer(b), integer(c)
  if not (algorithm and a and b) or a == 0 or b == 0 or c == 0 then return nil end
  rule = algorithm.rule(a, b, c)
  if not rule then return nil end
  rule.consume, rule.read, rule.write = algorithm.consume, algorithm.read, algorithm.write
  if fast_rules >= 1000 then FAST_RULES, fast_rules = {}, 0 end
  FAST_RULES[spec], fast_rules = rule, fast_rules + 1
  return rule
end

-- keys: one per rule; args: the rules' specs, then the cost unless it is 1.
-- A rule's read adds its numbers to the reply and answers whether it admits
-- the call (nil: it cannot decide), then the numbers its write takes.
local function fast(keys, args)
  local n = #keys
  -- A cost of 1, the most common, comes as no argument: one fewer to send,
  -- and no text to turn into a number (as dear as a Redis command).
  local text_cost = args[n + 1] or '1'
  local cost = text_cost == '1' and 1 or integer(text_cost)
  if n == 0 or not cost or cost < 1 or #args > n + 1 then return nil end
  if n == 1 then
    -- One rule: no table but the reply (each costs as much as a command).
    local rule, key = fast_rule(args[1]), keys[1]
    if not rule or cost > rule.capacity then return nil end
    if rule.consume then return rule.consume(key, rule, cost, text_cost) end
    local reply = { 0 }
    local ok, a, b, c, d = rule.read(key, rule, cost, nil, reply)
    if ok == nil then return nil end
    if ok then
      reply[1] = 1
      rule.write(key, rule, text_cost, cost, a, b, c, d)
    end
    return reply
  end
  -- Several: all read, then all written if all admit.
  local rules, states, reply, at = {}, {}, { 1 }, {}
  for i = 1, n do
    local rule = fast_rule(args[i])
    if not rule or cost > rule.capacity then return nil end
    rules[i] = rule
  end
  for i = 1, n do
    local state = { rules[i].read(keys[i], rules[i], cost, at, reply) }
    if state[1] == nil then return nil end
    if not state[1] then reply[1] = 0 end
    states[i] = state
  end
  if reply[1] == 1 then
    for i = 1, n do rules[i].write(keys[i], rules[i], text_cost, cost, unpack(states[i], 2, 5)) end
  end
  return reply
end
