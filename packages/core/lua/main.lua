-- One call decides every rule of a key (one round trip), all-or-nothing:
-- every rule is checked first, and state is written only when all admit.
--
-- KEYS[i]  the key of rule i (all of one user key share a Cluster slot)
-- ARGV     op ('consume' | 'peek' | 'refund' | 'reset' | 'release'), now ('' =
--          read Redis TIME), cost, then per rule its algorithm's fields (led by
--          the algorithm's name in the script that serves every algorithm; see
--          ruleArguments in src/stores/redis-store.ts), then the lease id
--          concurrency rules take or give back
-- Reply    consume/peek: allowed, remaining, resetMs, retryAfterMs (-1 =
--          never), delayMs per rule, then the time decided at; refund,
--          reset and release: the time.
--
-- SINGLE (set by the build above this file) is the algorithm of a script that
-- serves one algorithm, and nil in the script that serves them all.

local op = ARGV[1]
local ctx = { server = ARGV[2] == '', cost = tonumber(ARGV[3]) }
if ctx.server then
  local time = redis.call('TIME')
  ctx.now = tonumber(time[1]) * 1000 + floor_div(tonumber(time[2]), 1000)
else
  ctx.now = tonumber(ARGV[2])
end

if op == 'reset' then
  redis.call('DEL', unpack(KEYS))
  return { ctx.now }
end

local rules = {}
local uses = {}
local at = 4
for i = 1, #KEYS do
  local algorithm = SINGLE
  if not algorithm then
    algorithm = algorithms[ARGV[at]]
    at = at + 1
  end
  uses[i] = algorithm
  rules[i] = algorithm.rule(ARGV, at)
  at = at + algorithm.fields
end
ctx.lease = ARGV[at] or ''

if op == 'release' then
  for i = 1, #KEYS do
    if uses[i].release_in_place then uses[i].release_in_place(KEYS[i], rules[i], ctx) end
  end
  return { ctx.now }
end

if op == 'refund' then
  for i = 1, #KEYS do
    local rule = rules[i]
    local algorithm = uses[i]
    if algorithm.refund_in_place then
      algorithm.refund_in_place(KEYS[i], rule, ctx)
    else
      local state = algorithm.read(KEYS[i], rule, ctx)
      if state then
        local next_state, ttl = algorithm.refund(rule, state, ctx.now, ctx.cost)
        if next_state then algorithm.write(KEYS[i], rule, next_state, ttl, ctx) else redis.call('DEL', KEYS[i]) end
      end
    end
  end
  return { ctx.now }
end

local outs = {}
local states = {}
local nexts = {}
local admitted = true
for i = 1, #KEYS do
  local rule = rules[i]
  local algorithm = uses[i]
  local out = {}
  local state = algorithm.read(KEYS[i], rule, ctx)
  states[i] = state
  nexts[i] = algorithm.decide(rule, state, ctx.now, ctx.cost, out)
  outs[i] = out
  if not out.allowed then admitted = false end
end

local reply = {}
local n = 0
for i = 1, #KEYS do
  local out = outs[i]
  if op == 'peek' or not admitted then
    reply[n + 1] = out.allowed and 1 or 0
    reply[n + 2] = out.remaining_now
    reply[n + 3] = out.reset_now
    reply[n + 4] = out.retry == INFINITY and -1 or out.retry
    reply[n + 5] = (op == 'peek' and out.allowed) and out.delay or 0
  else
    uses[i].write(KEYS[i], rules[i], nexts[i], out.ttl, ctx, states[i])
    reply[n + 1] = 1
    reply[n + 2] = out.remaining
    reply[n + 3] = out.reset
    reply[n + 4] = 0
    reply[n + 5] = out.delay
  end
  n = n + 5
end
reply[n + 1] = ctx.now
return reply
