/**
 * Worker heartbeats: `<p>:worker:<id>` (HASH with a TTL of a few heartbeat periods) and the
 * `<p>:workers` index (ZSET by last beat). A worker that stops beating disappears on its own.
 */
import type { Redis } from 'ioredis';
import type { Keys } from './keys.js';

export type WorkerState = 'starting' | 'idle' | 'busy' | 'quarantined' | 'stopping';

export interface WorkerHeartbeat {
  workerId: string;
  host: string;
  pid: number;
  gpuIndex: number | null;
  gpuUuid: string;
  gpuModel: string;
  gpuMemMb: number | null;
  driver: string;
  backend: 'cpu' | 'cuda';
  state: WorkerState;
  jobId: string;
  runId: string;
  epoch: number | null;
  quarantined: boolean;
  faults: number;
  startedMs: number;
  updatedMs: number;
}

export const HEARTBEAT_EVERY_MS = 3000;
export const HEARTBEAT_TTL_S = 15;

function field(v: number | null): string {
  return v === null ? '' : String(v);
}

export async function writeHeartbeat(redis: Redis, keys: Keys, hb: WorkerHeartbeat, ttlS = HEARTBEAT_TTL_S): Promise<void> {
  const key = keys.worker(hb.workerId);
  await redis.multi()
    .hset(key, {
      host: hb.host,
      pid: String(hb.pid),
      gpu_index: field(hb.gpuIndex),
      gpu_uuid: hb.gpuUuid,
      gpu_model: hb.gpuModel,
      gpu_mem_mb: field(hb.gpuMemMb),
      driver: hb.driver,
      backend: hb.backend,
      state: hb.state,
      job_id: hb.jobId,
      run_id: hb.runId,
      epoch: field(hb.epoch),
      quarantined: hb.quarantined ? '1' : '0',
      faults: String(hb.faults),
      started_ms: String(hb.startedMs),
      updated_ms: String(hb.updatedMs),
    })
    .expire(key, ttlS)
    .zadd(keys.workersIndex(), hb.updatedMs, hb.workerId)
    .exec();
}

export async function removeHeartbeat(redis: Redis, keys: Keys, workerId: string): Promise<void> {
  await redis.multi().del(keys.worker(workerId)).zrem(keys.workersIndex(), workerId).exec();
}

function num(v: string | undefined): number | null {
  if (v === undefined || v === '') return null;
  const n = Number(v);
  return Number.isFinite(n) ? n : null;
}

/** Live workers (those whose record has not expired); stale index entries are dropped. */
export async function listWorkers(redis: Redis, keys: Keys): Promise<WorkerHeartbeat[]> {
  const ids = await redis.zrange(keys.workersIndex(), '0', '-1');
  const out: WorkerHeartbeat[] = [];
  for (const id of ids) {
    const h = await redis.hgetall(keys.worker(id));
    if (h['host'] === undefined) {
      await redis.zrem(keys.workersIndex(), id);
      continue;
    }
    out.push({
      workerId: id,
      host: h['host'],
      pid: Number(h['pid'] ?? 0),
      gpuIndex: num(h['gpu_index']),
      gpuUuid: h['gpu_uuid'] ?? '',
      gpuModel: h['gpu_model'] ?? '',
      gpuMemMb: num(h['gpu_mem_mb']),
      driver: h['driver'] ?? '',
      backend: h['backend'] === 'cuda' ? 'cuda' : 'cpu',
      state: (h['state'] ?? 'idle') as WorkerState,
      jobId: h['job_id'] ?? '',
      runId: h['run_id'] ?? '',
      epoch: num(h['epoch']),
      quarantined: h['quarantined'] === '1',
      faults: Number(h['faults'] ?? 0),
      startedMs: Number(h['started_ms'] ?? 0),
      updatedMs: Number(h['updated_ms'] ?? 0),
    });
  }
  return out;
}
