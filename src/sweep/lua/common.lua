--[[
  Shared by rung.lua, release.lua and cancel.lua: asha.ts puts this text in front of each script.
]]

-- Whether a trial's sweep status is final (nothing changes it any more).
local function trial_ended(st)
  return st == 'completed' or st == 'pruned' or st == 'failed' or st == 'cancelled'
end

-- Moves pending trials (FIFO) into the free concurrency slots, up to cap; returns their run ids.
local function fill_slots(statusKey, activeKey, pendingKey, cap)
  local ids = {}
  while redis.call('SCARD', activeKey) < cap do
    local id = redis.call('LPOP', pendingKey)
    if not id then break end
    if redis.call('HGET', statusKey, id) == 'pending' then
      redis.call('HSET', statusKey, id, 'queued')
      redis.call('SADD', activeKey, id)
      ids[#ids + 1] = id
    end
  end
  return ids
end

-- Completes the sweep when no trial is active or pending; 1 if this call did.
local function complete_if_done(recordKey, activeKey, pendingKey, now)
  if redis.call('SCARD', activeKey) == 0 and redis.call('LLEN', pendingKey) == 0 then
    redis.call('HSET', recordKey, 'status', 'completed', 'finished_ms', now)
    return 1
  end
  return 0
end
