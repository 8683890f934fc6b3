--[[
  Commit one epoch of a run: atomic and fenced. Either everything below happens, or nothing does.

  Fences (checked in this order; the first that fails returns its reason and changes nothing):
    'lost_lock'  the job's BullMQ lock key no longer holds this worker's token (stalled, taken over)
    'no_run'     the run record does not exist
    'ended'      the run is cancelled or pruned
    'duplicate'  epoch <= committed epoch (already committed, e.g. a duplicate delivery)
    'gap'        epoch > committed epoch + 1 (an epoch would be skipped)
  Then, atomically:
    XADD the epoch's scalars to the run's stream with ID `<epoch>-1`;
    make the staged checkpoint chunks persistent and record the checkpoint's meta;
    set committed_epoch, status, worker, updated_ms; best_epoch/best_sharpe when val Sharpe improved;
    trim checkpoints: keep the last K epochs that have one, and the best epoch's.

  KEYS[1] run record HASH    KEYS[2] epochs STREAM    KEYS[3] checkpoint meta HASH (epoch -> JSON)
  KEYS[4] the job's lock key (bull:<queue>:<jobId>:lock)

  ARGV[1] lock token          ARGV[2] epoch (1-based)      ARGV[3] scalars JSON
  ARGV[4] worker id           ARGV[5] now (ms)             ARGV[6] checkpoint meta JSON ('' = none)
  ARGV[7] checkpoint nonce    ARGV[8] checkpoint chunks    ARGV[9] chunk key base (<run>:ckpt:)
  ARGV[10] keep last K        ARGV[11] val Sharpe ('' = null)
  ARGV[12] status after the commit ('running' | 'completed')

  Returns { ok (1|0), reason ('ok' or a fence above), committed epoch after the call }
]]
local token, epoch = ARGV[1], tonumber(ARGV[2])

local committed = tonumber(redis.call('HGET', KEYS[1], 'committed_epoch') or '0') or 0
if redis.call('GET', KEYS[4]) ~= token then
  return { 0, 'lost_lock', committed }
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return { 0, 'no_run', 0 }
end
local status = redis.call('HGET', KEYS[1], 'status')
if status == 'cancelled' or status == 'pruned' then
  return { 0, 'ended', committed }
end
if epoch <= committed then
  return { 0, 'duplicate', committed }
end
if epoch ~= committed + 1 then
  return { 0, 'gap', committed }
end

-- The stream ID is the second fence: an entry for this epoch can exist only once.
local added = redis.pcall('XADD', KEYS[2], epoch .. '-1', 'scalars', ARGV[3], 'worker', ARGV[4], 'ts', ARGV[5])
if type(added) == 'table' and added.err then
  return { 0, 'duplicate', committed }
end

local nChunks = tonumber(ARGV[8]) or 0
if ARGV[6] ~= '' then
  for i = 0, nChunks - 1 do
    redis.call('PERSIST', ARGV[9] .. epoch .. ':' .. ARGV[7] .. ':' .. i)
  end
  redis.call('HSET', KEYS[3], tostring(epoch), ARGV[6])
end

redis.call('HSET', KEYS[1], 'committed_epoch', epoch, 'status', ARGV[12], 'worker', ARGV[4], 'updated_ms', ARGV[5])

if ARGV[11] ~= '' then
  local sharpe = tonumber(ARGV[11])
  local best = redis.call('HGET', KEYS[1], 'best_sharpe')
  if best == false or best == '' or sharpe > tonumber(best) then
    redis.call('HSET', KEYS[1], 'best_epoch', epoch, 'best_sharpe', ARGV[11])
  end
end

-- Retention: the last K checkpointed epochs and the best epoch's checkpoint.
local keep = tonumber(ARGV[10]) or 1
local bestEpoch = tonumber(redis.call('HGET', KEYS[1], 'best_epoch') or '-1') or -1
local fields = redis.call('HKEYS', KEYS[3])
local epochs = {}
for _, f in ipairs(fields) do epochs[#epochs + 1] = tonumber(f) end
table.sort(epochs, function(a, b) return a > b end)
for idx, e in ipairs(epochs) do
  if idx > keep and e ~= bestEpoch then
    local meta = cjson.decode(redis.call('HGET', KEYS[3], tostring(e)))
    for i = 0, (tonumber(meta['chunks']) or 0) - 1 do
      redis.call('DEL', ARGV[9] .. e .. ':' .. meta['nonce'] .. ':' .. i)
    end
    redis.call('HDEL', KEYS[3], tostring(e))
  end
end

return { 1, 'ok', epoch }
