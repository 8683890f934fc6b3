/**
 * Cancelling a run (`foxhunt cancel`, and every trial of `foxhunt sweep-cancel`): the run record
 * becomes cancelled and a job of it that no worker has taken is removed. A worker training it stops
 * at the next epoch boundary: the fenced commit refuses an epoch of a cancelled run.
 */
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Keys } from '../redis/keys.js';
import { RunStore } from '../redis/runs.js';
import type { RunStatus } from '../redis/runs.js';

export interface CancelRunResult {
  runId: string;
  /** The status it had: a run that had already ended (completed, cancelled, pruned) is left as it was. */
  before: RunStatus;
  cancelled: boolean;
  committedEpoch: number;
  /** What became of its job: removed from the queue, still active (stops at the next epoch), or none. */
  job: 'removed' | 'active' | 'none';
}

const ENDED: ReadonlySet<RunStatus> = new Set<RunStatus>(['completed', 'cancelled', 'pruned']);

/** Cancels the run unless it has ended. Throws NOT_FOUND for an unknown run. */
export async function cancelRun(redis: Redis, keys: Keys, queue: Queue, runId: string): Promise<CancelRunResult> {
  const store = new RunStore(redis, keys);
  const run = await store.require(runId);
  const out: CancelRunResult = { runId, before: run.status, cancelled: false, committedEpoch: run.committedEpoch, job: 'none' };
  if (ENDED.has(run.status)) return out;
  await store.setStatus(runId, 'cancelled');
  out.cancelled = true;
  if (run.jobId !== null) out.job = await removeQueuedJob(queue, run.jobId);
  return out;
}

/**
 * Removes a job that no worker has taken (waiting, delayed, prioritized). 'active' when a worker holds it, also when
 * one took it in between (a locked job cannot be removed): its worker finds the run or trial cancelled.
 */
export async function removeQueuedJob(queue: Queue, jobId: string): Promise<'removed' | 'active' | 'none'> {
  const job = await queue.getJob(jobId);
  if (job === undefined) return 'none';
  const state = await job.getState();
  if (state === 'waiting' || state === 'delayed' || state === 'prioritized') {
    try {
      await job.remove();
      return 'removed';
    } catch {
      return 'active';
    }
  }
  return state === 'active' ? 'active' : 'none';
}
