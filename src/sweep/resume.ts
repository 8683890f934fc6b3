/**
 * Resuming a sweep: adds any trial not yet added, then for every trial that holds a slot but has
 * no live job it works out what was lost. A committed epoch whose report never reached the sweep
 * is replayed through the epoch hook (so a rung decision or a completion is never skipped); a job
 * that failed for good makes the trial failed; anything else is re-enqueued from its latest
 * checkpoint. Free slots then go to pending trials. Idempotent: running it twice changes nothing.
 */
import { epochsJobId } from '../queue/queues.js';
import { RunStore } from '../redis/runs.js';
import { onTrialEnd, trialEpoch } from './hooks.js';
import { addTrials, enqueueTrial, fillSlots, finishSweep, requireSweep } from './runner.js';
import type { SweepContext } from './runner.js';
import { SweepStore } from './store.js';

export interface ResumeReport {
  sweepId: string;
  added: number;
  replayed: string[];
  failed: string[];
  reenqueued: string[];
  started: string[];
  status: string;
}

async function jobState(ctx: SweepContext, runId: string, maxEpochs: number): Promise<string> {
  const job = await ctx.queue.getJob(epochsJobId(runId, maxEpochs));
  return job === undefined ? 'missing' : await job.getState();
}

const LIVE = new Set(['waiting', 'active', 'delayed', 'prioritized', 'waiting-children', 'paused']);

export async function resumeSweep(ctx: SweepContext, sweepId: string): Promise<ResumeReport> {
  const store = new SweepStore(ctx.redis, ctx.keys.prefix);
  const runs = new RunStore(ctx.redis, ctx.keys);
  let rec = await requireSweep(store, sweepId);
  const report: ResumeReport = { sweepId, added: 0, replayed: [], failed: [], reenqueued: [], started: [], status: rec.status };
  if (rec.status !== 'running') {
    if (rec.status === 'completed' && rec.best === null) await finishSweep(ctx, sweepId);
    return report;
  }
  report.added = await addTrials(store, rec);
  const status = await ctx.redis.hgetall(store.keys(sweepId).status);
  for (const t of await store.trials(sweepId)) {
    if (status[t.runId] !== 'queued') continue;
    const state = await jobState(ctx, t.runId, rec.maxEpochs);
    if (LIVE.has(state)) continue;
    const run = await runs.get(t.runId);
    if (run !== null && run.committedEpoch > 0) {
      const last = await runs.epoch(t.runId, run.committedEpoch);
      if (last !== undefined) {
        const r = await trialEpoch({ redis: ctx.redis, keys: ctx.keys, queue: ctx.queue, runId: t.runId, sweepId, epoch: last.epoch, scalars: last.scalars });
        if (r.action === 'stop') {
          report.replayed.push(t.runId);
          continue;
        }
      }
    }
    if (state === 'failed' || run?.status === 'cancelled') {
      await onTrialEnd({ redis: ctx.redis, keys: ctx.keys, queue: ctx.queue, runId: t.runId, sweepId, status: 'failed' });
      report.failed.push(t.runId);
      continue;
    }
    if (await enqueueTrial(ctx, rec, t.runId) === 'enqueued') report.reenqueued.push(t.runId);
  }
  rec = await requireSweep(store, sweepId);
  if (rec.status === 'running') report.started = await fillSlots(ctx, rec);
  report.status = (await requireSweep(store, sweepId)).status;
  return report;
}
