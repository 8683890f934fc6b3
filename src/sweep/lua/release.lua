--[[
  A trial ends (completed or failed), or nothing ends and free slots are just filled: releases the
  trial's concurrency slot, moves pending trials into free slots (FIFO), and completes the sweep
  when no trial is active or pending. Idempotent: ending an ended trial changes nothing. A sweep
  that is not running (completed, cancelled) only has the slot released.

  KEYS[1] sweep record (HASH)   KEYS[2] status HASH   KEYS[3] active SET   KEYS[4] pending LIST

  ARGV[1] run id ('' to only fill slots)   ARGV[2] final status: completed | failed ('' with '')
  ARGV[3] concurrency cap   ARGV[4] now (ms)

  Returns { { run ids to enqueue }, sweepDone (0/1), ended (1 if this call ended the trial) }
]]
local runId, final, cap = ARGV[1], ARGV[2], tonumber(ARGV[3])
local ended = 0
if runId ~= '' then
  local st = redis.call('HGET', KEYS[2], runId)
  if st and not trial_ended(st) then
    redis.call('HSET', KEYS[2], runId, final)
    ended = 1
  end
  redis.call('SREM', KEYS[3], runId)
end
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then
  return { {}, 0, ended }
end
local nextIds = fill_slots(KEYS[2], KEYS[3], KEYS[4], cap)
return { nextIds, complete_if_done(KEYS[1], KEYS[3], KEYS[4], ARGV[4]), ended }
