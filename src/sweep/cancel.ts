/**
 * `foxhunt sweep-cancel`: ends a running sweep at once. The cancel script (lua/cancel.lua) marks
 * the sweep and every trial that has not ended cancelled and empties the slots and the pending
 * list, so no hook, check or resume starts a trial of it again. Then every cancelled trial's run is
 * cancelled (cancelRun): a queued job is removed, a training one stops at its next epoch boundary
 * (the fenced commit refuses it; the trial hook stops it too), and a job that slips through (a hook
 * that was enqueueing a trial at that moment) is refused by the worker before it trains
 * (trialCancelled). A trial whose last epoch was being committed when the cancel came has a completed run: it
 * stays completed (so does its hook). The sweep's best run so far is recorded, as when a sweep completes. Running it
 * again on a cancelled sweep repeats the runs' part (it mends a cancel that was interrupted).
 */
import { FoxhuntError } from '../errors.js';
import { cancelRun, removeQueuedJob } from '../queue/cancel.js';
import type { CancelRunResult } from '../queue/cancel.js';
import { epochsJobId } from '../queue/queues.js';
import { RunStore } from '../redis/runs.js';
import { cancelSweepState } from './asha.js';
import { trialEpoch } from './hooks.js';
import { finishSweep, requireSweep } from './runner.js';
import type { SweepContext } from './runner.js';
import { SweepStore } from './store.js';
import type { BestRun } from './store.js';

export interface SweepCancelReport {
  sweepId: string;
  /** True when the sweep was already cancelled (this call only repeated the runs' part). */
  again: boolean;
  /** Trials that held a slot when the sweep was cancelled (this call; [] when again). */
  held: string[];
  /** Pending trials cancelled before they started (this call). */
  pending: number;
  /** The sweep's trials (0 when it was cancelled before its sweep job had added them). */
  trials: number;
  /** The runs this call cancelled, with what became of their jobs. */
  runs: CancelRunResult[];
  /** Trials that held a slot whose last epoch was committed before the cancel reached their run: completed. */
  completed: string[];
  /** Trial jobs removed from the queue that had no run record yet. */
  jobsRemoved: string[];
  /** The sweep's metric, and its best run so far (the leaderboard's first row), as a completed sweep records it. */
  metric: string;
  best: BestRun | null;
}

export async function cancelSweep(ctx: SweepContext, sweepId: string): Promise<SweepCancelReport> {
  const store = new SweepStore(ctx.redis, ctx.keys.prefix);
  const rec = await requireSweep(store, sweepId);
  const k = store.keys(sweepId);
  const state = await cancelSweepState(ctx.redis, k);
  if (state.before !== 'running' && state.before !== 'cancelled') {
    throw new FoxhuntError('JOB_INVALID', `sweep ${sweepId} is already ${state.before || 'ended'}; only a running sweep can be cancelled`, { where: sweepId });
  }
  const runs = new RunStore(ctx.redis, ctx.keys);
  const status = await ctx.redis.hgetall(k.status);
  const trials = await store.trials(sweepId);
  const report: SweepCancelReport = {
    sweepId, again: state.before === 'cancelled', held: state.held, pending: state.pending, trials: trials.length, runs: [],
    completed: [], jobsRemoved: [], metric: rec.metric, best: null,
  };
  for (const t of trials) {
    if (status[t.runId] !== 'cancelled') continue;
    if (await runs.get(t.runId) !== null) {
      const r = await cancelRun(ctx.redis, ctx.keys, ctx.queue, t.runId);
      // a training trial whose epoch hook saw the trial cancelled first has already stopped its run: this cancel
      // stopped it all the same
      const byHook = !report.again && r.before === 'cancelled' && state.held.includes(t.runId);
      if (r.cancelled || byHook) {
        report.runs.push(r);
      } else if (r.before === 'completed' && state.held.includes(t.runId)) {
        // its last epoch was committed between the cancel script and here: that epoch's report is replayed, as resume
        // replays a lost one, and the trial hook ends the trial completed with the epoch's metric
        const last = await runs.epoch(t.runId, rec.maxEpochs);
        if (last !== undefined) {
          await trialEpoch({ redis: ctx.redis, keys: ctx.keys, queue: ctx.queue, runId: t.runId, sweepId, epoch: last.epoch,
            scalars: last.scalars });
        } else {
          await store.completeCancelledTrial(sweepId, t.runId);
        }
        report.completed.push(t.runId);
      }
      continue;
    }
    // no run record: a job may still be in the queue (or about to be, or taken in between: the worker refuses those)
    if (await removeQueuedJob(ctx.queue, epochsJobId(t.runId, rec.maxEpochs)) === 'removed') report.jobsRemoved.push(t.runId);
  }
  report.best = await finishSweep(ctx, sweepId);
  return report;
}
