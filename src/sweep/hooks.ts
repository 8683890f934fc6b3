/**
 * What the worker calls for a trial (a run with a sweep id):
 *   onTrialEpoch  after each committed epoch. At a rung it runs the ASHA script, which records the
 *                 trial's metric and decides at once; a pruned trial gets run status `pruned` and the
 *                 reply { action: 'stop' }, and the worker ends the job without training further.
 *                 At max_epochs the trial is completed. Either way, free slots go to pending trials.
 *                 Returns 'continue' | 'stop' (trialEpoch gives the details).
 *   onTrialEnd    when a trial's job ends without reaching max_epochs for another reason
 *                 (failed for good, cancelled): the trial is `failed`, the sweep goes on.
 *   trialCancelled before a trial's job trains: true when the trial was cancelled with its sweep
 *                 (foxhunt sweep-cancel), and the worker then ends the job without training.
 *                 A trial of a cancelled sweep that is training stops at its next epoch.
 */
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { Keys } from '../redis/keys.js';
import { RunStore } from '../redis/runs.js';
import { bullConnection } from '../queue/connection.js';
import { epochsQueueName, sweepsQueueName } from '../queue/names.js';
import { decideAtRung, releaseTrial } from './asha.js';
import type { RungDecision } from './asha.js';
import { enqueueAll, finishSweep } from './runner.js';
import type { SweepContext } from './runner.js';
import { SweepStore } from './store.js';

export interface TrialEpochArgs {
  redis: Redis;
  runId: string;
  sweepId: string;
  /** 1-based index of the epoch just committed */
  epoch: number;
  scalars: Record<string, number | null>;
  /** defaults: new Keys() and the epochs queue on REDIS_URL */
  keys?: Keys;
  queue?: Queue;
}

export interface TrialEpochResult {
  /** stop: the trial is over (pruned, completed, or cancelled with its sweep); the worker trains no further epoch of it */
  action: 'continue' | 'stop';
  status: 'running' | 'pruned' | 'completed' | 'failed' | 'cancelled' | 'unknown';
  decision?: RungDecision;
}

let sharedQueue: Queue | undefined;
let sharedSweeps: Queue | undefined;

/** The sweeps queue on REDIS_URL, opened once per process (the sweep job's delayed checks). */
export function sharedSweepsQueue(): Queue {
  sharedSweeps ??= new Queue(sweepsQueueName(), { connection: bullConnection() });
  return sharedSweeps;
}

/** The epochs queue on REDIS_URL, opened once per process. */
export function sharedEpochsQueue(): Queue {
  sharedQueue ??= new Queue(epochsQueueName(), { connection: bullConnection() });
  return sharedQueue;
}

/** Closes the queues the hooks and the sweep processor opened on their own (worker shutdown). */
export async function closeHooks(): Promise<void> {
  const queues = [sharedQueue, sharedSweeps];
  sharedQueue = undefined;
  sharedSweeps = undefined;
  for (const q of queues) {
    try { await q?.close(); } catch { /* closing the other one still matters */ }
  }
}

function contextOf(a: { redis: Redis; keys?: Keys; queue?: Queue }): SweepContext {
  return { redis: a.redis, keys: a.keys ?? new Keys(), queue: a.queue ?? sharedEpochsQueue() };
}

/**
 * The worker's hook after each committed epoch of a trial: 'stop' when the trial is over (pruned
 * at this rung, or completed), else 'continue'.
 */
export async function onTrialEpoch(args: TrialEpochArgs): Promise<'continue' | 'stop'> {
  return (await trialEpoch(args)).action;
}

/** onTrialEpoch with the details (status, the rung decision). */
export async function trialEpoch(args: TrialEpochArgs): Promise<TrialEpochResult> {
  const ctx = contextOf(args);
  const store = new SweepStore(ctx.redis, ctx.keys.prefix);
  const rec = await store.get(args.sweepId);
  if (rec === null) return { action: 'continue', status: 'unknown' };
  const k = store.keys(rec.id);
  const status = await store.trialStatus(rec.id, args.runId);
  if (status === null) return { action: 'continue', status: 'unknown' };
  const metricOf = (scalars: Record<string, number | null>): number | null => {
    const raw = scalars[rec.metric];
    return typeof raw === 'number' && Number.isFinite(raw) ? raw : null;
  };
  const metric = metricOf(args.scalars);
  if ((status === 'cancelled' || status === 'completed') && args.epoch >= rec.maxEpochs) {
    // the sweep was cancelled while this, the trial's last epoch, was being committed: the commit made the run
    // completed, and the trial is completed with its metric (sweep-cancel, finding the run completed, replays this
    // report from the run's stream, so it may come twice)
    await store.recordEpoch(rec.id, args.runId, args.epoch, metric);
    if (status === 'cancelled') await store.completeCancelledTrial(rec.id, args.runId);
    return { action: 'stop', status: 'completed' };
  }
  if (status === 'cancelled') {
    // the sweep was cancelled: the run ends as cancelled too (sweep-cancel does the same; this covers a cancel
    // interrupted before it reached the run)
    await new RunStore(ctx.redis, ctx.keys).setStatus(args.runId, 'cancelled');
    return { action: 'stop', status };
  }
  if (status === 'pruned' || status === 'completed' || status === 'failed') {
    return { action: 'stop', status };
  }

  // Every rung up to this epoch gets its decision, in order: a report lost earlier (a crash
  // between commit and hook) is caught up from the run's stream.
  const runs = new RunStore(ctx.redis, ctx.keys);
  for (const rung of rec.rungs.filter((r) => r <= args.epoch && r < rec.maxEpochs)) {
    let m = metric;
    if (rung !== args.epoch) {
      if (await ctx.redis.hexists(k.decisions, `${args.runId}:${rung}`) === 1) continue;
      const entry = await runs.epoch(args.runId, rung);
      if (entry === undefined) continue;
      m = metricOf(entry.scalars);
    }
    const decision = await decideAtRung(ctx.redis, k, {
      runId: args.runId, rung, metric: m, goal: rec.goal, eta: rec.eta, concurrency: rec.concurrency,
    });
    if (decision.decision === 'prune') {
      await runs.setStatus(args.runId, 'pruned');
      await enqueueAll(ctx, rec, decision.enqueue);
      if (decision.sweepDone) await finishSweep(ctx, rec.id);
      return { action: 'stop', status: 'pruned', decision };
    }
    if (decision.decision === 'ended') return { action: 'stop', status: 'unknown', decision };
    if (rung === args.epoch) return { action: 'continue', status: 'running', decision };
  }

  await store.recordEpoch(rec.id, args.runId, args.epoch, metric);
  if (args.epoch >= rec.maxEpochs) {
    const r = await releaseTrial(ctx.redis, k, { runId: args.runId, status: 'completed', concurrency: rec.concurrency });
    await enqueueAll(ctx, rec, r.enqueue);
    if (r.sweepDone) await finishSweep(ctx, rec.id);
    return { action: 'stop', status: 'completed' };
  }
  return { action: 'continue', status: 'running' };
}

/**
 * The worker's check before it trains a trial: true when the trial was cancelled with its sweep, so
 * that a job enqueued while the sweep was being cancelled trains nothing.
 */
export async function trialCancelled(args: { redis: Redis; runId: string; sweepId: string; keys?: Keys }): Promise<boolean> {
  const store = new SweepStore(args.redis, (args.keys ?? new Keys()).prefix);
  return await store.trialStatus(args.sweepId, args.runId) === 'cancelled';
}

export interface TrialEndArgs {
  redis: Redis;
  runId: string;
  sweepId: string;
  /** failed: failed for good (no retry left) or cancelled */
  status: 'failed' | 'completed';
  keys?: Keys;
  queue?: Queue;
}

/** A trial's job ended for good without the epoch hook finishing it: release its slot. */
export async function onTrialEnd(args: TrialEndArgs): Promise<void> {
  const ctx = contextOf(args);
  const store = new SweepStore(ctx.redis, ctx.keys.prefix);
  const rec = await store.get(args.sweepId);
  if (rec === null) return;
  const r = await releaseTrial(ctx.redis, store.keys(rec.id), { runId: args.runId, status: args.status, concurrency: rec.concurrency });
  await enqueueAll(ctx, rec, r.enqueue);
  if (r.sweepDone) await finishSweep(ctx, rec.id);
}
