--[[
  Cancels a running sweep at once: its status becomes cancelled (with finished_ms), every trial
  that has not ended (pending, or queued: holding a slot) becomes cancelled, and the pending list
  and the slots are emptied, so no script fills a slot again. The caller then cancels the runs of
  the trials that held a slot. A sweep that is not running changes nothing.

  KEYS[1] sweep record (HASH)   KEYS[2] status HASH   KEYS[3] active SET   KEYS[4] pending LIST

  ARGV[1] now (ms)

  Returns { sweep status before the call, { run ids that held a slot }, pending trials cancelled }
]]
local before = redis.call('HGET', KEYS[1], 'status')
if before ~= 'running' then
  return { before or '', {}, 0 }
end
redis.call('HSET', KEYS[1], 'status', 'cancelled', 'finished_ms', ARGV[1])
local held, pending = {}, 0
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local id, st = all[i], all[i + 1]
  if not trial_ended(st) then
    if st == 'pending' then
      pending = pending + 1
    else
      held[#held + 1] = id
    end
    redis.call('HSET', KEYS[2], id, 'cancelled')
  end
end
redis.call('DEL', KEYS[3], KEYS[4])
table.sort(held)
return { before, held, pending }
