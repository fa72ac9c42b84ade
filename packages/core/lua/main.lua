-- One call decides every rule of a key (one round trip), all-or-nothing:
-- every rule is checked first, and state is written only when all admit.
--
-- KEYS[i]  the key of rule i (all of one user key share a Cluster slot)
-- ARGV     op ('consume' | 'peek' | 'refund' | 'reset' | 'release'), now ('' =
--          read Redis TIME), cost, the lease id concurrency rules take or give
--          back, then RULE_FIELDS values per rule (see src/stores/redis-store.ts)
-- Reply    consume/peek: allowed, remaining, resetMs, retryAfterMs (-1 =
--          never), delayMs per rule, then the time decided at; refund,
--          reset and release: the time.

local RULE_FIELDS = 10

local ctx = { server = ARGV[2] == '', cost = tonumber(ARGV[3]), lease = ARGV[4] }
if ctx.server then
  local time = redis.call('TIME')
  ctx.now = tonumber(time[1]) * 1000 + floor_div(tonumber(time[2]), 1000)
else
  ctx.now = tonumber(ARGV[2])
end

local rules = {}
for i = 1, #KEYS do
  local base = 4 + (i - 1) * RULE_FIELDS
  rules[i] = {
    algorithm = ARGV[base + 1],
    limit = tonumber(ARGV[base + 2]),
    window = tonumber(ARGV[base + 3]),
    burst = tonumber(ARGV[base + 4]),
    segments = tonumber(ARGV[base + 5]),
    shape = ARGV[base + 6] == 'shape',
    unit = tonumber(ARGV[base + 7]),
    per_ms = tonumber(ARGV[base + 8]),
    seg_ms = tonumber(ARGV[base + 9]),
    horizon = tonumber(ARGV[base + 10]),
  }
end

local function as_int(ms)
  if ms == INFINITY then return -1 end
  return ms
end

local op = ARGV[1]

if op == 'reset' then
  redis.call('DEL', unpack(KEYS))
  return { ctx.now }
end

if op == 'release' then
  for i = 1, #KEYS do
    local algorithm = algorithms[rules[i].algorithm]
    if algorithm.release_in_place then algorithm.release_in_place(KEYS[i], rules[i], ctx) end
  end
  return { ctx.now }
end

if op == 'refund' then
  for i = 1, #KEYS do
    local rule = rules[i]
    local algorithm = algorithms[rule.algorithm]
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
local nexts = {}
local admitted = true
for i = 1, #KEYS do
  local rule = rules[i]
  local algorithm = algorithms[rule.algorithm]
  local out = {}
  nexts[i] = algorithm.decide(rule, algorithm.read(KEYS[i], rule, ctx), ctx.now, ctx.cost, out)
  outs[i] = out
  if not out.allowed then admitted = false end
end

local reply = {}
for i = 1, #KEYS do
  local out = outs[i]
  if op == 'peek' then
    reply[#reply + 1] = out.allowed and 1 or 0
    reply[#reply + 1] = out.remaining_now
    reply[#reply + 1] = out.reset_now
    reply[#reply + 1] = as_int(out.retry)
    reply[#reply + 1] = out.allowed and out.delay or 0
  elseif admitted then
    algorithms[rules[i].algorithm].write(KEYS[i], rules[i], nexts[i], out.ttl, ctx)
    reply[#reply + 1] = 1
    reply[#reply + 1] = out.remaining
    reply[#reply + 1] = out.reset
    reply[#reply + 1] = 0
    reply[#reply + 1] = out.delay
  else
    reply[#reply + 1] = out.allowed and 1 or 0
    reply[#reply + 1] = out.remaining_now
    reply[#reply + 1] = out.reset_now
    reply[#reply + 1] = as_int(out.retry)
    reply[#reply + 1] = 0
  end
end
reply[#reply + 1] = ctx.now
return reply
