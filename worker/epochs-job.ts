/**
 * The epochs job: train run R from its committed epoch up to the job's target, one epoch at a
 * time in the trainer child, committing each through the fenced script. Also the precompute job.
 *
 * Outcomes: completed (target reached), ended early (run cancelled, or pruned by its sweep),
 * released (SIGTERM: the epoch in flight is committed, the job goes back to wait), or an error:
 * non-retryable codes become UnrecoverableError, the rest are retried with backoff.
 */
import { WaitingError } from 'bullmq';
import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { configHash, parseRunConfig } from '../src/config/load.js';
import { FoxhuntError } from '../src/errors.js';
import { parseEpochsJob, parsePrecomputeJob, checkDataPaths } from '../src/queue/schemas.js';
import { toJobError } from '../src/queue/retry.js';
import { CheckpointStore } from '../src/redis/checkpoints.js';
import { commitEpoch } from '../src/redis/commit.js';
import type { Keys } from '../src/redis/keys.js';
import { RunStore } from '../src/redis/runs.js';
import type { Scalars } from '../src/trainer/scalars.js';
import { TrainerProcess } from './trainer-process.js';
import type { ChildEpoch } from './trainer-process.js';

export interface JobContext {
  redis: Redis;
  keys: Keys;
  workerId: string;
  queueName: string;
  gpuIndex: number | null;
  backend: 'cpu' | 'cuda';
  keepLast: number;
  log: Logger;
  /** True once SIGTERM asked the worker to stop at the next epoch boundary. */
  stopping(): boolean;
  /** What the heartbeat reports as the current work. */
  setCurrent(cur: { jobId: string; runId: string; epoch: number | null } | null): void;
}

export type EpochsJobResult =
  | { outcome: 'completed'; runId: string; epochs: number }
  | { outcome: 'cancelled' | 'pruned'; runId: string; epochs: number };

interface SweepHooks {
  onTrialEpoch(args: { redis: Redis; keys: Keys; runId: string; sweepId: string; epoch: number; scalars: Scalars }): Promise<'continue' | 'stop'>;
  onTrialEnd?(args: { redis: Redis; keys: Keys; runId: string; sweepId: string; status: 'failed' | 'completed' }): Promise<void>;
  trialCancelled?(args: { redis: Redis; keys: Keys; runId: string; sweepId: string }): Promise<boolean>;
  closeHooks?(): Promise<void>;
}

let sweepHooks: SweepHooks | null | undefined;

/** src/sweep/hooks.ts (onTrialEpoch, onTrialEnd), when that module exists. */
async function loadSweepHooks(log: Logger): Promise<SweepHooks | null> {
  if (sweepHooks !== undefined) return sweepHooks;
  try {
    const spec = '../src/sweep/hooks.js';
    const mod = (await import(spec)) as Partial<SweepHooks>;
    sweepHooks = typeof mod.onTrialEpoch === 'function' ? mod as SweepHooks : null;
  } catch (err) {
    log.warn({ err: (err as Error).message }, 'src/sweep/hooks.ts not available: sweep trials run without pruning');
    sweepHooks = null;
  }
  return sweepHooks;
}

/** Closes what the sweep hooks opened (worker shutdown). */
export async function closeSweepHooks(): Promise<void> {
  await sweepHooks?.closeHooks?.();
}

async function trialEnded(ctx: JobContext, runId: string, sweepId: string | null, log: Logger): Promise<void> {
  if (sweepId === null) return;
  const hooks = await loadSweepHooks(log);
  await hooks?.onTrialEnd?.({ redis: ctx.redis, keys: ctx.keys, runId, sweepId, status: 'failed' })
    .catch((err: unknown) => log.warn({ err: (err as Error).message }, 'sweep onTrialEnd failed'));
}

/** Process one epochs job. Errors come out already mapped to the retry policy. */
export async function processEpochsJob(job: Job, token: string, ctx: JobContext): Promise<EpochsJobResult> {
  try {
    return await runEpochsJob(job, token, ctx);
  } catch (err) {
    if (err instanceof WaitingError) throw err;
    throw toJobError(err);
  }
}

async function runEpochsJob(job: Job, token: string, ctx: JobContext): Promise<EpochsJobResult> {
  const data = parseEpochsJob(job.data);
  const jobId = job.id ?? '';
  const runs = new RunStore(ctx.redis, ctx.keys);
  const log = ctx.log.child({ jobId, runId: data.runId });

  let run = await runs.get(data.runId);
  if (run === null) {
    if (data.config === undefined) throw new FoxhuntError('NOT_FOUND', `run ${data.runId} does not exist and the job has no config`, { where: 'data.runId' });
    await runs.create({ runId: data.runId, config: data.config, configHash: configHash(data.config), seed: data.config.seed, targetEpochs: data.epochs, sweepId: data.sweepId })
      .catch((err: unknown) => { if (!(err instanceof FoxhuntError && err.code === 'JOB_INVALID')) throw err; });
    run = await runs.require(data.runId);
  }
  if (data.config !== undefined && configHash(data.config) !== run.configHash) {
    throw new FoxhuntError('JOB_INVALID', `the job's config does not match run ${data.runId}'s config (hash ${run.configHash.slice(0, 12)})`, { where: 'data.config' });
  }
  if (run.status === 'cancelled' || run.status === 'pruned') {
    log.info({ status: run.status }, 'run has ended; nothing to do');
    return { outcome: run.status, runId: data.runId, epochs: run.committedEpoch };
  }
  const sweepId = run.sweepId ?? data.sweepId ?? null;
  if (sweepId !== null && await (await loadSweepHooks(log))?.trialCancelled?.({ redis: ctx.redis, keys: ctx.keys, runId: data.runId, sweepId })) {
    // enqueued while its sweep was being cancelled (foxhunt sweep-cancel)
    await runs.setStatus(data.runId, 'cancelled');
    log.info({ sweepId }, 'the sweep cancelled this trial; nothing to do');
    return { outcome: 'cancelled', runId: data.runId, epochs: run.committedEpoch };
  }
  const cfg = parseRunConfig(run.config, `run ${data.runId}`);
  checkDataPaths(cfg, undefined, 'run.config');
  if (run.committedEpoch >= data.epochs) {
    await runs.setStatus(data.runId, 'completed');
    return { outcome: 'completed', runId: data.runId, epochs: run.committedEpoch };
  }

  let checkpoint: Buffer | null = null;
  if (run.committedEpoch > 0) {
    const store = new CheckpointStore(ctx.redis, ctx.keys);
    const meta = await store.meta(data.runId, run.committedEpoch);
    if (meta === null) throw new FoxhuntError('CHECKPOINT_INVALID', `run ${data.runId} has no checkpoint of its committed epoch ${run.committedEpoch}`, { where: data.runId });
    checkpoint = await store.read(data.runId, meta);
  }

  await runs.setStatus(data.runId, 'running', { worker: ctx.workerId, job_id: jobId, target_epochs: data.epochs });
  ctx.setCurrent({ jobId, runId: data.runId, epoch: run.committedEpoch });
  const childCfg = structuredClone(cfg);
  if (ctx.gpuIndex !== null) childCfg.gpu.device = 0; // CUDA_VISIBLE_DEVICES leaves the child one device
  const trainer = new TrainerProcess({ gpuIndex: ctx.gpuIndex, backend: ctx.backend });
  try {
    const info = await trainer.init(childCfg, checkpoint);
    await runs.update(data.runId, { lib_sha256: info.libSha256, backend: info.backend, engine: info.engine });
    log.info({ from: run.committedEpoch, to: data.epochs, backend: info.backend, device: info.deviceName, childPid: trainer.pid }, 'training');
    // Pipelined: the child trains epoch e+1 while epoch e is being committed (checkpoints of the
    // reference workload take longer to store than an epoch takes on a GPU). An epoch in flight
    // when the job ends early is abandoned with the child; one in flight at SIGTERM is finished
    // and committed before the job is released.
    const request = (): Promise<ChildEpoch> => {
      const p = trainer.runEpoch();
      p.catch(() => undefined); // handled where it is awaited; no unhandled rejection meanwhile
      return p;
    };
    let next: Promise<ChildEpoch> | null = request();
    for (let epoch = run.committedEpoch + 1; next !== null; epoch++) {
      const res: ChildEpoch = await next;
      next = epoch < data.epochs && !ctx.stopping() ? request() : null;
      if (res.epoch !== epoch) log.warn({ expected: epoch, trainer: res.epoch }, 'trainer epoch counter differs from the run');
      const scalars: Scalars = { ...res.scalars, epoch };
      const commit = await commitEpoch(ctx.redis, ctx.keys, {
        runId: data.runId, queueName: ctx.queueName, jobId, token, epoch, scalars, checkpoint: res.checkpoint,
        configHash: run.configHash, workerId: ctx.workerId, keepLast: ctx.keepLast,
        statusAfter: epoch === data.epochs ? 'completed' : 'running',
      });
      if (!commit.ok) {
        if (commit.reason === 'ended') {
          const now = await runs.require(data.runId);
          log.info({ epoch, status: now.status }, 'run ended while training; stopping');
          if (now.status === 'cancelled') await trialEnded(ctx, data.runId, sweepId, log);
          return { outcome: now.status === 'pruned' ? 'pruned' : 'cancelled', runId: data.runId, epochs: now.committedEpoch };
        }
        log.warn({ epoch, reason: commit.reason, committedEpoch: commit.committedEpoch }, 'commit refused by the fence');
        throw new FoxhuntError('LOST_LOCK', `epoch ${epoch} not committed (${commit.reason}; committed epoch is ${commit.committedEpoch}): another worker owns this job now`);
      }
      ctx.setCurrent({ jobId, runId: data.runId, epoch });
      await job.updateProgress({ epoch, epochs: data.epochs }).catch(() => undefined);
      log.info({ epoch, valSharpe: scalars['val/sharpe'], ms: scalars['time/total_ms'] }, 'epoch committed');

      if (sweepId !== null) {
        const hooks = await loadSweepHooks(log);
        if (hooks !== null && await hooks.onTrialEpoch({ redis: ctx.redis, keys: ctx.keys, runId: data.runId, sweepId, epoch, scalars }) === 'stop') {
          const now = await runs.require(data.runId);
          log.info({ epoch, status: now.status }, 'the sweep ended this trial');
          const outcome = now.status === 'pruned' || now.status === 'cancelled' ? now.status : 'completed';
          return { outcome, runId: data.runId, epochs: epoch };
        }
      }
      if (epoch < data.epochs && next === null) {
        log.info({ epoch }, 'stopping: epoch committed, releasing the job');
        await runs.setStatus(data.runId, 'queued');
        await job.moveToWait(token);
        throw new WaitingError();
      }
    }
    return { outcome: 'completed', runId: data.runId, epochs: data.epochs };
  } catch (err) {
    if (!(err instanceof WaitingError) && !(err instanceof FoxhuntError && err.code === 'LOST_LOCK')) {
      const retry = err instanceof FoxhuntError ? err.retryable : true;
      const attemptsLeft = (job.opts.attempts ?? 1) - job.attemptsMade - 1 > 0;
      const status = retry && attemptsLeft ? 'queued' : 'failed';
      await runs.setStatus(data.runId, status, { error: err instanceof Error ? err.message : String(err) }).catch(() => undefined);
      if (status === 'failed') await trialEnded(ctx, data.runId, run.sweepId ?? data.sweepId ?? null, log);
    }
    throw err;
  } finally {
    ctx.setCurrent(null);
    await trainer.close();
  }
}

/** The precompute job: fill the fxcache for a config, in a child process. */
export async function processPrecomputeJob(job: Job, ctx: JobContext): Promise<{ cacheKey: string; cacheHit: boolean; bars: number }> {
  const trainer = new TrainerProcess({ gpuIndex: null, backend: 'cpu' });
  try {
    const data = parsePrecomputeJob(job.data);
    const res = await trainer.precompute(data.config);
    ctx.log.info({ jobId: job.id, ...res }, 'precomputed features');
    return res;
  } catch (err) {
    throw toJobError(err);
  } finally {
    await trainer.close();
  }
}
