/** The producer side of the queues: typed, validated enqueueing. */
import { Queue } from 'bullmq';
import { configHash } from '../config/load.js';
import { FoxhuntError } from '../errors.js';
import { RunStore } from '../redis/runs.js';
import type { Keys } from '../redis/keys.js';
import type { Redis } from 'ioredis';
import { bullConnection } from './connection.js';
import { JOB_EPOCHS, JOB_PRECOMPUTE, epochsQueueName } from './names.js';
import { defaultJobOptions } from './retry.js';
import { parseEpochsJob, parsePrecomputeJob } from './schemas.js';
import type { EpochsJobInput, PrecomputeJobInput } from './schemas.js';

export function epochsQueue(url?: string, name: string = epochsQueueName()): Queue {
  return new Queue(name, { connection: bullConnection(url) });
}

/** Job id of the epochs job that trains `runId` up to `epochs`. Same target twice = same job. */
export function epochsJobId(runId: string, epochs: number): string {
  return `${runId}.e${epochs}`;
}

export interface EnqueueResult {
  jobId: string;
  runId: string;
  fromEpoch: number;
  epochs: number;
}

/**
 * Creates the run record (new run: `data.config` given) or re-queues an existing run to a larger
 * target, then adds the epochs job. Job data is validated here and again by the worker.
 */
export async function enqueueEpochs(queue: Queue, redis: Redis, keys: Keys, input: EpochsJobInput,
  opts: { attempts?: number; backoffMs?: number } = {}): Promise<EnqueueResult> {
  const data = parseEpochsJob(input);
  const runs = new RunStore(redis, keys);
  let fromEpoch = 0;
  if (data.config !== undefined) {
    await runs.create({
      runId: data.runId, config: data.config, configHash: configHash(data.config), seed: data.config.seed,
      targetEpochs: data.epochs, sweepId: data.sweepId,
    });
  } else {
    const run = await runs.require(data.runId);
    if (run.status === 'running' || run.status === 'queued') {
      throw new FoxhuntError('JOB_INVALID', `run ${data.runId} is ${run.status}; wait for it or cancel it first`, { where: 'run' });
    }
    if (data.epochs <= run.committedEpoch) {
      throw new FoxhuntError('JOB_INVALID', `run ${data.runId} already has ${run.committedEpoch} epochs; --epochs is the target total, give more than that`, { where: '--epochs' });
    }
    fromEpoch = run.committedEpoch;
    await runs.setStatus(data.runId, 'queued', { target_epochs: data.epochs, error: '' });
  }
  const jobId = epochsJobId(data.runId, data.epochs);
  const existing = await queue.getJob(jobId);
  if (existing !== undefined) {
    const state = await existing.getState();
    if (state !== 'completed' && state !== 'failed') {
      throw new FoxhuntError('JOB_INVALID', `job ${jobId} is already ${state}`, { where: 'run' });
    }
    await existing.remove();
  }
  const jobData: EpochsJobInput = { runId: data.runId, epochs: data.epochs };
  if (data.config !== undefined) jobData.config = data.config;
  if (data.sweepId !== undefined) jobData.sweepId = data.sweepId;
  await queue.add(JOB_EPOCHS, jobData, { ...defaultJobOptions(opts), jobId });
  await runs.update(data.runId, { job_id: jobId });
  return { jobId, runId: data.runId, fromEpoch, epochs: data.epochs };
}

export async function enqueuePrecompute(queue: Queue, input: PrecomputeJobInput): Promise<string> {
  const data = parsePrecomputeJob(input);
  const job = await queue.add(JOB_PRECOMPUTE, data, defaultJobOptions());
  return job.id ?? '';
}
