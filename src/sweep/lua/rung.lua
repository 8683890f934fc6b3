--[[
  ASHA decision of one trial at one rung, taken at once and atomically: no coordinator.

  Records the trial's metric at the rung, then the trial continues iff it is in the top 1/eta of
  the trials that have reached this rung so far, itself included:
      n    = trials recorded at the rung (with this one)
      rank = trials recorded with a strictly better score (ties favour the newcomer)
      keep = ceil(n / eta)
      continue iff rank < keep
  A pruned trial releases its concurrency slot; while the sweep runs, pending trials take the free
  slots, and the sweep completes when no trial is active or pending.

  Scores are goal-normalised (higher is better); a null metric is -inf.

  KEYS[1] sweep record (HASH)      KEYS[2] rung ZSET            KEYS[3] decisions HASH
  KEYS[4] status HASH              KEYS[5] active SET           KEYS[6] pending LIST
  KEYS[7] decision log LIST        KEYS[8] epochs HASH          KEYS[9] metric HASH

  ARGV[1] run id    ARGV[2] rung (epochs)    ARGV[3] score ('-inf' for null)    ARGV[4] eta
  ARGV[5] metric as reported (JSON number or 'null')    ARGV[6] concurrency cap    ARGV[7] now (ms)

  Returns { decision, rank, n, keep, { run ids to enqueue }, sweepDone (0/1) }
    decision: 'continue' | 'prune' | 'ended' (the trial had ended or is unknown: nothing changes).
  Calling it again for the same run and rung returns the first decision and changes nothing.
]]
local runId, rung, score, eta = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local field = runId .. ':' .. rung

local prior = redis.call('HGET', KEYS[3], field)
if prior then
  local d = cjson.decode(prior)
  return { d.decision, d.rank, d.n, d.keep, {}, 0 }
end
local st = redis.call('HGET', KEYS[4], runId)
if (not st) or trial_ended(st) then
  return { 'ended', 0, 0, 0, {}, 0 }
end

local e = tonumber(redis.call('HGET', KEYS[8], runId) or '0')
if tonumber(rung) > e then redis.call('HSET', KEYS[8], runId, rung) end
redis.call('HSET', KEYS[9], runId, ARGV[5])

redis.call('ZADD', KEYS[2], score, runId)
local n = redis.call('ZCARD', KEYS[2])
local rank = redis.call('ZCOUNT', KEYS[2], '(' .. score, '+inf')
local keep = math.ceil(n / eta)
local decision = 'prune'
if rank < keep then decision = 'continue' end

local entry = cjson.encode({ run = runId, rung = tonumber(rung), metric = ARGV[5], score = score,
  decision = decision, rank = rank, n = n, keep = keep, at = tonumber(ARGV[7]) })
redis.call('HSET', KEYS[3], field, entry)
redis.call('RPUSH', KEYS[7], entry)

local nextIds = {}
local done = 0
if decision == 'prune' then
  redis.call('HSET', KEYS[4], runId, 'pruned')
  redis.call('SREM', KEYS[5], runId)
  if redis.call('HGET', KEYS[1], 'status') == 'running' then
    nextIds = fill_slots(KEYS[4], KEYS[5], KEYS[6], tonumber(ARGV[6]))
    done = complete_if_done(KEYS[1], KEYS[5], KEYS[6], ARGV[7])
  end
end
return { decision, rank, n, keep, nextIds, done }
