// A whole sweep through real BullMQ queues and Redis, with in-process workers that commit
// synthetic epochs through the fleet's fenced commit and call the trial hook exactly as the
// worker does. Checks: trials are runs with sweep_id, the cap holds, prune decisions match the
// reference ASHA over the reported metrics, a failed trial does not fail the sweep, the sweep
// completes with the best run, resume after lost jobs finishes the sweep, a sweep cancelled before its
// sweep job ran starts nothing, and a trial whose last epoch commits as its sweep is cancelled stays completed.
import { randomBytes } from 'node:crypto';
import { Queue, UnrecoverableError, Worker } from 'bullmq';
import type { Job } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bullConnection } from '../../src/queue/connection.js';
import { parseEpochsJob } from '../../src/queue/schemas.js';
import { commitEpoch } from '../../src/redis/commit.js';
import { Keys } from '../../src/redis/keys.js';
import { RunStore } from '../../src/redis/runs.js';
import { configHash } from '../../src/config/load.js';
import { cancelSweepState, decisionLog } from '../../src/sweep/asha.js';
import { onTrialEnd, onTrialEpoch, trialEpoch } from '../../src/sweep/hooks.js';
import { processSweepJob, SWEEP_JOB, sweepJobId } from '../../src/sweep/processor.js';
import { resumeSweep } from '../../src/sweep/resume.js';
import { cancelSweep } from '../../src/sweep/cancel.js';
import { addTrials, requireSweep, sweepRecordOf } from '../../src/sweep/runner.js';
import { parseSweepSpec } from '../../src/sweep/spec.js';
import { SweepStore } from '../../src/sweep/store.js';
import { referenceAsha } from './reference.js';
import type { Report } from './reference.js';
import { deleteKeys } from '../../src/redis/scan.js';

const url = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const tag = randomBytes(4).toString('hex');
const keys = new Keys(`fhtest-${tag}`);
let redis: Redis;
const opened: { close(): Promise<unknown> }[] = [];
const queues: Queue[] = [];

function metricFor(runId: string, lr: number, epoch: number): number | null {
  if (runId.endsWith('t005')) return null; // a trial that never gets a Sharpe
  const h = [...`${runId}:${epoch}`].reduce((a, c) => (a * 31 + c.charCodeAt(0)) >>> 0, 7);
  return -Math.abs(Math.log10(lr) + 3.3) + 0.05 * epoch + ((h % 1000) / 1000 - 0.5) * 0.1;
}

/** What foxhunt-worker does per epochs job, with synthetic scalars instead of the trainer. */
function simulatedWorker(queue: Queue, id: string, opts: { failRun?: string; maxActive: { now: number; max: number } }): Worker {
  const queueName = queue.name;
  const runs = new RunStore(redis, keys);
  const w = new Worker(queueName, async (job: Job, token?: string) => {
    const data = parseEpochsJob(job.data);
    let run = await runs.get(data.runId);
    if (run === null) {
      await runs.create({ runId: data.runId, config: data.config, configHash: configHash(data.config!), seed: 1, targetEpochs: data.epochs, sweepId: data.sweepId });
      run = await runs.require(data.runId);
    }
    if (run.status === 'pruned' || run.status === 'cancelled') return 'ended';
    await runs.setStatus(data.runId, 'running', { worker: id });
    opts.maxActive.now++;
    opts.maxActive.max = Math.max(opts.maxActive.max, opts.maxActive.now);
    try {
      const lr = (run.config as { agent: { lr: number } }).agent.lr;
      for (let epoch = run.committedEpoch + 1; epoch <= data.epochs; epoch++) {
        if (data.runId === opts.failRun && epoch === 1) throw new UnrecoverableError('[DIVERGED] synthetic divergence');
        await new Promise((r) => setTimeout(r, 5));
        const scalars = { 'epoch': epoch, 'val/sharpe': metricFor(data.runId, lr, epoch), 'time/total_ms': 5 };
        const res = await commitEpoch(redis, keys, {
          runId: data.runId, queueName, jobId: job.id!, token: token!, epoch, scalars, checkpoint: null,
          configHash: run.configHash, workerId: id, statusAfter: epoch === data.epochs ? 'completed' : 'running',
        });
        if (!res.ok) return `refused ${res.reason}`;
        if (await onTrialEpoch({ redis, keys, queue, runId: data.runId, sweepId: data.sweepId!, epoch, scalars }) === 'stop') return 'stopped';
      }
      return 'completed';
    } catch (err) {
      await runs.setStatus(data.runId, 'failed', { error: String(err) });
      throw err;
    } finally {
      opts.maxActive.now--;
    }
  }, { connection: bullConnection(url), concurrency: 1 });
  opened.push(w);
  return w;
}

async function waitFor(cond: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

beforeAll(() => {
  redis = new Redis(url);
  process.env['FOXHUNT_SWEEP_CHECK_MS'] = '500';
});

afterAll(async () => {
  for (const o of opened.reverse()) await o.close().catch(() => undefined);
  for (const q of queues) { await q.obliterate({ force: true }).catch(() => undefined); await q.close(); }
  await deleteKeys(redis, `${keys.prefix}:*`);
  await redis.quit();
});

function spec(trials: number): ReturnType<typeof parseSweepSpec> {
  return parseSweepSpec({
    name: 'flow', trials, max_epochs: 9, concurrency: 3,
    sampler: { kind: 'halton', seed: 3 }, asha: { grace_epochs: 1, eta: 3 },
    set: ['env.n_envs=8'],
    space: { 'agent.lr': { kind: 'log_uniform', low: 1e-5, high: 1e-2 } },
  }, 'flow.toml', '.');
}

async function reportsInArrivalOrder(sweepId: string, rungs: number[]): Promise<Report[]> {
  const runs = new RunStore(redis, keys);
  const log = await decisionLog(redis, new SweepStore(redis, keys.prefix).keys(sweepId));
  const out: Report[] = [];
  for (const d of log) {
    if (!rungs.includes(d.rung)) continue;
    const entry = (await runs.epochs(d.run, d.rung - 1)).find((e) => e.epoch === d.rung);
    expect(entry, `${d.run} committed its rung ${d.rung}`).toBeDefined();
    out.push({ run: d.run, rung: d.rung, metric: (entry?.scalars['val/sharpe'] ?? null) as number | null });
  }
  return out;
}

describe('a sweep end to end on simulated workers', () => {
  it('completes 12 trials with ASHA decisions matching the reference, the cap held and a failed trial tolerated', async () => {
    const epochsQ = new Queue(`fhtest-epochs-${tag}`, { connection: bullConnection(url) });
    const sweepsQ = new Queue(`fhtest-sweeps-${tag}`, { connection: bullConnection(url) });
    queues.push(epochsQ, sweepsQ);
    const store = new SweepStore(redis, keys.prefix);
    const s = spec(12);
    const id = `flow-${tag}`;
    const rec = sweepRecordOf(id, s);
    expect(await store.create(rec)).toBe(true);
    const failRun = `${id}.t002`;
    const active = { now: 0, max: 0 };
    simulatedWorker(epochsQ, 'w1', { failRun, maxActive: active });
    simulatedWorker(epochsQ, 'w2', { failRun, maxActive: active });
    opened.push(new Worker(sweepsQ.name, async (job) => processSweepJob(job, { redis, keys, queue: epochsQ, sweepsQueue: sweepsQ }), { connection: bullConnection(url) }));
    await sweepsQ.add(SWEEP_JOB, { sweepId: id }, { jobId: sweepJobId(id) });

    // The release script marks the sweep completed atomically; finishSweep writes its result (best) right
    // after (resume mends a crash in between): wait for both.
    await waitFor(async () => { const r = await store.get(id); return r?.status === 'completed' && r.best !== null; },
      60_000, 'the sweep to complete and record its best run');
    const done = await store.get(id);
    const board = await store.leaderboard(id, 'max');
    expect(board).toHaveLength(12);
    const runs = new RunStore(redis, keys);
    for (const row of board) {
      const run = await runs.require(row.runId);
      expect(run.sweepId).toBe(id);
      expect(['completed', 'pruned', 'failed']).toContain(row.status);
      if (row.status === 'completed') expect(run.committedEpoch).toBe(9);
      if (row.status === 'pruned') { expect(s.rungs).toContain(run.committedEpoch); expect(run.status).toBe('pruned'); }
    }
    expect(board.find((r) => r.runId === failRun)?.status).toBe('failed');
    expect(active.max).toBeLessThanOrEqual(2);

    // the decisions equal the reference ASHA over the metrics the trials reported at each rung
    const reports = await reportsInArrivalOrder(id, s.rungs);
    const ref = referenceAsha(reports, 3, 'max');
    const log = await decisionLog(redis, store.keys(id));
    expect(log.length).toBe(reports.length);
    for (const d of log) expect(d.decision, `${d.run}@${d.rung}`).toBe(ref.get(`${d.run}:${d.rung}`));
    for (const row of board) {
      const prunedByRef = [...ref].some(([k, v]) => k.startsWith(`${row.runId}:`) && v === 'prune');
      if (row.status !== 'failed') expect(row.status === 'pruned', row.runId).toBe(prunedByRef);
    }
    expect(board.filter((r) => r.status === 'pruned').length).toBeGreaterThanOrEqual(3);
    // the trial with no metric is pruned at its first rung (null is the worst), unless it came first
    expect(board.find((r) => r.runId.endsWith('t005'))?.epochs).toBeLessThan(9);

    // the result: the best run with its checkpoint pointer is the leaderboard's first row
    expect(done?.best?.runId).toBe(board[0]?.runId);
    expect(board[0]?.status).toBe('completed');
    expect(done?.best?.checkpoint).toEqual({ runId: board[0]?.runId, epoch: 9 });
    expect((done?.best?.config as { agent: { lr: number } }).agent.lr).toBe(board[0]?.params['agent.lr']);
  });

  it('resume re-enqueues trials whose jobs were lost and finishes the sweep', async () => {
    const epochsQ = new Queue(`fhtest-epochs2-${tag}`, { connection: bullConnection(url) });
    const sweepsQ = new Queue(`fhtest-sweeps2-${tag}`, { connection: bullConnection(url) });
    queues.push(epochsQ, sweepsQ);
    const store = new SweepStore(redis, keys.prefix);
    const s = spec(6);
    const id = `resume-${tag}`;
    await store.create(sweepRecordOf(id, s));
    // the sweep job ran (trials added, first 3 enqueued), then everything in the epochs queue was lost
    await processSweepJob({ data: { sweepId: id } }, { redis, keys, queue: epochsQ, sweepsQueue: sweepsQ });
    expect(await epochsQ.count()).toBe(3);
    await epochsQ.obliterate({ force: true });
    const r = await resumeSweep({ redis, keys, queue: epochsQ }, id);
    expect(r.reenqueued).toHaveLength(3);
    expect(await epochsQ.count()).toBe(3);
    // resuming again changes nothing
    expect((await resumeSweep({ redis, keys, queue: epochsQ }, id)).reenqueued).toHaveLength(0);
    const active = { now: 0, max: 0 };
    simulatedWorker(epochsQ, 'w3', { maxActive: active });
    await waitFor(async () => (await store.get(id))?.status === 'completed', 60_000, 'the resumed sweep to complete');
    const board = await store.leaderboard(id, 'max');
    expect(board.every((b) => b.status === 'completed' || b.status === 'pruned')).toBe(true);
    // a trial end reported twice changes nothing
    await onTrialEnd({ redis, keys, queue: epochsQ, runId: board[0]!.runId, sweepId: id, status: 'failed' });
    expect((await store.leaderboard(id, 'max'))[0]?.status).toBe(board[0]?.status);
  });

  it('a sweep cancelled before its sweep job ran starts nothing, and trials added after the cancel are cancelled', async () => {
    const epochsQ = new Queue(`fhtest-epochs3-${tag}`, { connection: bullConnection(url) });
    const sweepsQ = new Queue(`fhtest-sweeps3-${tag}`, { connection: bullConnection(url) });
    queues.push(epochsQ, sweepsQ);
    const store = new SweepStore(redis, keys.prefix);
    const id = `cancel-early-${tag}`;
    await store.create(sweepRecordOf(id, spec(6)));
    const running = await requireSweep(store, id); // what a sweep job read just before the cancel
    const r = await cancelSweep({ redis, keys, queue: epochsQ }, id);
    expect(r).toMatchObject({ again: false, trials: 0, pending: 0, runs: [], best: null });
    // the sweep job adds the trials after the cancel: each is cancelled at once, none pending
    expect(await addTrials(store, running)).toBe(6);
    const k = store.keys(id);
    expect(Object.values(await redis.hgetall(k.status))).toEqual(Array(6).fill('cancelled'));
    expect(await redis.llen(k.pending)).toBe(0);
    // the sweep job itself then does nothing: no epochs job, no further check
    const report = await processSweepJob({ data: { sweepId: id } }, { redis, keys, queue: epochsQ, sweepsQueue: sweepsQ });
    expect(report).toMatchObject({ status: 'cancelled', started: [], reenqueued: [] });
    expect(await epochsQ.count()).toBe(0);
    expect(await sweepsQ.count()).toBe(0);
    expect((await store.get(id))?.status).toBe('cancelled');
  });

  // The race the fleet test met: the commit of a trial's last epoch makes its run completed, and the sweep is cancelled
  // before the trial's hook releases its slot. Whichever of the hook and the cancel's pass over the runs comes first,
  // the trial ends completed with its last metric (not cancelled), and the run stays completed.
  for (const order of ['cancel first', 'hook first'] as const) {
    it(`a trial whose last epoch commits as the sweep is cancelled stays completed (${order})`, async () => {
      const epochsQ = new Queue(`fhtest-epochs4-${tag}`, { connection: bullConnection(url) });
      const sweepsQ = new Queue(`fhtest-sweeps4-${tag}`, { connection: bullConnection(url) });
      queues.push(epochsQ, sweepsQ);
      const store = new SweepStore(redis, keys.prefix);
      const runs = new RunStore(redis, keys);
      const s = spec(5);
      const id = `cancel-race-${order.split(' ')[0]}-${tag}`;
      await store.create(sweepRecordOf(id, s));
      await processSweepJob({ data: { sweepId: id } }, { redis, keys, queue: epochsQ, sweepsQueue: sweepsQ });
      const k = store.keys(id);
      const queued = Object.entries(await redis.hgetall(k.status)).filter(([, st]) => st === 'queued').map(([r]) => r);
      expect(queued).toHaveLength(3);
      const runId = queued.sort()[0]!;
      const trial = (await store.trials(id)).find((t) => t.runId === runId)!;
      if (await runs.get(runId) === null) {
        const config = await store.trialConfig(id, runId);
        await runs.create({ runId, config, configHash: trial.configHash, seed: 1, targetEpochs: s.max_epochs, sweepId: id });
      }
      await runs.setStatus(runId, 'completed'); // what the commit of epoch max_epochs does
      const scalars = { 'epoch': s.max_epochs, 'val/sharpe': 0.75, 'time/total_ms': 5 };
      const hook = () => trialEpoch({ redis, keys, queue: epochsQ, runId, sweepId: id, epoch: s.max_epochs, scalars });
      if (order === 'cancel first') {
        const r = await cancelSweep({ redis, keys, queue: epochsQ }, id);
        expect(r.held.sort()).toEqual(queued.sort());
        expect(r.completed).toEqual([runId]);
        expect(r.runs.map((x) => x.runId).sort()).toEqual(queued.filter((q) => q !== runId).sort());
        expect(await hook()).toMatchObject({ action: 'stop', status: 'completed' });
      } else {
        // the cancel script, then the hook, before the cancel's pass over the runs
        expect((await cancelSweepState(redis, k)).held.sort()).toEqual(queued.sort());
        expect(await hook()).toMatchObject({ action: 'stop', status: 'completed' });
        expect((await cancelSweep({ redis, keys, queue: epochsQ }, id)).again).toBe(true);
      }
      expect((await runs.require(runId)).status).toBe('completed');
      const board = await store.leaderboard(id, 'max');
      expect(board.find((b) => b.runId === runId)).toMatchObject({ status: 'completed', epochs: s.max_epochs, metric: 0.75 });
      expect(board.filter((b) => b.runId !== runId).every((b) => b.status === 'cancelled')).toBe(true);
      expect((await store.get(id))?.status).toBe('cancelled');
    });
  }
});
