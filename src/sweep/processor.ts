/**
 * The `foxhunt-sweeps` queue's job: `{ sweepId }`. The sweep record (with its resolved spec) is
 * written by the producer; the job adds the trials (deduplicated by config hash) and enqueues up
 * to the concurrency cap. Re-running it resumes the sweep (resume.ts), so a retry or a duplicate
 * delivery is harmless. While the sweep runs, each sweep job leaves a delayed successor (every
 * FOXHUNT_SWEEP_CHECK_MS, default 30 s) that frees the slots of trials whose jobs failed for good
 * or were cancelled; the decisions themselves are never taken here (they are the trials' own).
 */
import type { Job, Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { FoxhuntError } from '../errors.js';
import { Keys, RUN_ID_PATTERN } from '../redis/keys.js';
import { serviceRedis } from '../queue/connection.js';
import { sharedEpochsQueue, sharedSweepsQueue } from './hooks.js';
import { resumeSweep } from './resume.js';
import type { ResumeReport } from './resume.js';

export const SWEEP_JOB = 'sweep';

export const SweepJobSchema = z.strictObject({
  sweepId: z.string().regex(RUN_ID_PATTERN, 'sweep id: letters, digits, ".", "_", "-"').describe('the sweep to start or resume'),
});
export type SweepJobData = z.infer<typeof SweepJobSchema>;

export function sweepJobId(sweepId: string): string {
  return `sweep.${sweepId}`;
}

export function parseSweepJob(data: unknown): SweepJobData {
  const r = SweepJobSchema.safeParse(data);
  if (!r.success) {
    const issue = r.error.issues[0];
    const where = ['data', ...(issue?.path ?? []).map(String)].join('.');
    throw new FoxhuntError('JOB_INVALID', `invalid sweep job: ${issue?.message ?? 'bad data'}`, { where });
  }
  return r.data;
}

export function checkEveryMs(): number {
  const v = Number(process.env['FOXHUNT_SWEEP_CHECK_MS'] ?? 30_000);
  return Number.isFinite(v) && v >= 100 ? v : 30_000;
}

/** Adds the sweep's next delayed check (one per time bucket, so duplicates collapse). */
export async function scheduleCheck(queue: Queue, sweepId: string, everyMs = checkEveryMs(), now = Date.now()): Promise<void> {
  const bucket = Math.floor(now / everyMs) + 1;
  await queue.add(SWEEP_JOB, { sweepId }, {
    jobId: `${sweepJobId(sweepId)}.check${bucket}`, delay: everyMs, attempts: 3,
    backoff: { type: 'exponential', delay: 1000 }, removeOnComplete: true, removeOnFail: { age: 24 * 3600 },
  });
}

export async function processSweepJob(job: Pick<Job, 'data'>, opts: { redis?: Redis; keys?: Keys; queue?: Queue; sweepsQueue?: Queue } = {}): Promise<ResumeReport> {
  const data = parseSweepJob(job.data);
  const redis = opts.redis ?? serviceRedis();
  try {
    const report = await resumeSweep({ redis, keys: opts.keys ?? new Keys(), queue: opts.queue ?? sharedEpochsQueue() }, data.sweepId);
    if (report.status === 'running') await scheduleCheck(opts.sweepsQueue ?? sharedSweepsQueue(), data.sweepId);
    return report;
  } finally {
    if (opts.redis === undefined) await redis.quit();
  }
}
