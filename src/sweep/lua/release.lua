--[[
  A trial ends (completed or failed), or nothing ends and free slots are just filled: releases the
  trial's concurrency slot, moves pending trials into free slots (FIFO), and completes the sweep
  when no trial is active or pending. Idempotent: ending an ended trial changes nothing.

  KEYS[1] sweep record (HASH)   KEYS[2] status HASH   KEYS[3] active SET   KEYS[4] pending LIST

  ARGV[1] run id ('' to only fill slots)   ARGV[2] final status: completed | failed ('' with '')
  ARGV[3] concurrency cap   ARGV[4] now (ms)

  Returns { { run ids to enqueue }, sweepDone (0/1), ended (1 if this call ended the trial) }
]]
local runId, final, cap = ARGV[1], ARGV[2], tonumber(ARGV[3])
local ended = 0
if runId ~= '' then
  local st = redis.call('HGET', KEYS[2], runId)
  if st ~= 'completed' and st ~= 'pruned' and st ~= 'failed' and st then
    redis.call('HSET', KEYS[2], runId, final)
    ended = 1
  end
  redis.call('SREM', KEYS[3], runId)
end
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then
  return { {}, 0, ended }
end
local nextIds = {}
while redis.call('SCARD', KEYS[3]) < cap do
  local id = redis.call('LPOP', KEYS[4])
  if not id then break end
  if redis.call('HGET', KEYS[2], id) == 'pending' then
    redis.call('HSET', KEYS[2], id, 'queued')
    redis.call('SADD', KEYS[3], id)
    nextIds[#nextIds + 1] = id
  end
end
local done = 0
if redis.call('SCARD', KEYS[3]) == 0 and redis.call('LLEN', KEYS[4]) == 0 then
  redis.call('HSET', KEYS[1], 'status', 'completed', 'finishedAt', ARGV[4])
  done = 1
end
return { nextIds, done, ended }
