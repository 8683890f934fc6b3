/**
 * The life of a sweep's trials: creating the sweep, adding its trials (deduplicated by config
 * hash), enqueueing a trial as an ordinary epochs job (same queue as every other run), finishing
 * the sweep (best run + checkpoint pointer), and resuming what an interrupted sweep lost.
 */
import { randomBytes } from 'node:crypto';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { parseRunConfig } from '../config/load.js';
import { FoxhuntError } from '../errors.js';
import { Keys } from '../redis/keys.js';
import { RunStore } from '../redis/runs.js';
import { enqueueEpochs, epochsJobId } from '../queue/queues.js';
import { releaseTrial } from './asha.js';
import { SweepStore } from './store.js';
import type { BestRun, SweepRecord } from './store.js';
import { planTrials } from './spec.js';
import type { ResolvedSweepSpec } from './spec.js';

export interface SweepContext {
  redis: Redis;
  keys: Keys;
  /** The epochs queue trials are enqueued on. */
  queue: Queue;
}

const LIVE_STATES = new Set(['waiting', 'active', 'delayed', 'prioritized', 'waiting-children', 'paused']);

export function trialRunId(sweepId: string, index: number): string {
  return `${sweepId}.t${String(index).padStart(3, '0')}`;
}

export function newSweepId(name: string | undefined, now = new Date()): string {
  const stamp = now.toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
  return `${(name ?? 'sweep').slice(0, 48)}-${stamp}-${randomBytes(2).toString('hex')}`;
}

export function sweepRecordOf(id: string, spec: ResolvedSweepSpec, nowMs = Date.now()): SweepRecord {
  return {
    id, name: spec.name ?? id, status: 'running', metric: spec.metric, goal: spec.goal,
    maxEpochs: spec.max_epochs, concurrency: spec.concurrency, trials: spec.trials, eta: spec.asha.eta,
    rungs: spec.rungs, spec, createdMs: nowMs, finishedMs: null, best: null,
  };
}

export async function requireSweep(store: SweepStore, id: string): Promise<SweepRecord> {
  const rec = await store.get(id);
  if (rec === null) throw new FoxhuntError('NOT_FOUND', `no sweep ${id}`, { where: id });
  return rec;
}

/** Adds every planned trial (idempotent: a trial already added, or a duplicate config, is skipped). */
export async function addTrials(store: SweepStore, rec: SweepRecord): Promise<number> {
  let added = 0;
  for (const t of planTrials(rec.spec)) {
    const r = await store.addTrial(rec.id, { runId: trialRunId(rec.id, t.index), index: t.index, params: t.params, configHash: t.configHash, config: t.config });
    if (r.added) added++;
  }
  return added;
}

/** Whether the trial's epochs job is still in the queue (waiting, active, delayed, ...). */
export async function hasLiveJob(queue: Queue, runId: string, maxEpochs: number): Promise<boolean> {
  const job = await queue.getJob(epochsJobId(runId, maxEpochs));
  if (job === undefined) return false;
  return LIVE_STATES.has(await job.getState());
}

/**
 * Enqueues a trial's epochs job (to max_epochs) unless it has a live one: a new run carries its
 * config and the sweep id; an existing run continues from its latest checkpoint.
 */
export async function enqueueTrial(ctx: SweepContext, rec: SweepRecord, runId: string): Promise<'enqueued' | 'live'> {
  if (await hasLiveJob(ctx.queue, runId, rec.maxEpochs)) return 'live';
  const runs = new RunStore(ctx.redis, ctx.keys);
  const run = await runs.get(runId);
  try {
    if (run === null) {
      const config = parseRunConfig(await new SweepStore(ctx.redis, ctx.keys.prefix).trialConfig(rec.id, runId), `trial ${runId}`);
      await enqueueEpochs(ctx.queue, ctx.redis, ctx.keys, { runId, epochs: rec.maxEpochs, config, sweepId: rec.id });
      return 'enqueued';
    }
    if (run.status === 'queued' || run.status === 'running') {
      // the record says a job holds it, but no job is live: that job was lost
      await runs.setStatus(runId, 'failed', { error: 'its job was lost; re-enqueued by the sweep' });
    }
    await enqueueEpochs(ctx.queue, ctx.redis, ctx.keys, { runId, epochs: rec.maxEpochs, sweepId: rec.id });
    return 'enqueued';
  } catch (err) {
    // another process (a hook, a resume) enqueued the same trial at the same moment
    if (err instanceof FoxhuntError && err.code === 'JOB_INVALID' && await hasLiveJob(ctx.queue, runId, rec.maxEpochs)) return 'live';
    throw err;
  }
}

export async function enqueueAll(ctx: SweepContext, rec: SweepRecord, runIds: readonly string[]): Promise<void> {
  for (const id of runIds) await enqueueTrial(ctx, rec, id);
}

/** Writes the sweep's result: the leaderboard's first row with its config hash and latest checkpoint. */
export async function finishSweep(ctx: Pick<SweepContext, 'redis' | 'keys'>, sweepId: string): Promise<BestRun | null> {
  const store = new SweepStore(ctx.redis, ctx.keys.prefix);
  const rec = await requireSweep(store, sweepId);
  const top = (await store.leaderboard(sweepId, rec.goal))[0];
  let best: BestRun | null = null;
  if (top !== undefined) {
    const run = await new RunStore(ctx.redis, ctx.keys).get(top.runId);
    const epoch = run?.committedEpoch ?? 0;
    best = {
      runId: top.runId, params: top.params, metric: top.metric, epochs: top.epochs, configHash: top.configHash,
      config: run?.config ?? await store.trialConfig(sweepId, top.runId),
      checkpoint: epoch > 0 ? { runId: top.runId, epoch } : null,
    };
  }
  await store.setBest(sweepId, best);
  return best;
}

/** Fills free concurrency slots with pending trials and enqueues them; finishes the sweep when nothing is left. */
export async function fillSlots(ctx: SweepContext, rec: SweepRecord): Promise<string[]> {
  const r = await releaseTrial(ctx.redis, new SweepStore(ctx.redis, ctx.keys.prefix).keys(rec.id), { runId: null, status: null, concurrency: rec.concurrency });
  await enqueueAll(ctx, rec, r.enqueue);
  if (r.sweepDone) await finishSweep(ctx, rec.id);
  return r.enqueue;
}

