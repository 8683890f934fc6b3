// Sweeps on the real fleet: `foxhunt sweep` + two `foxhunt-worker --cpu` processes training the
// tiny config. A 12-trial sweep completes while one worker is SIGKILLed mid-sweep (no trial is
// lost, no epoch is written twice), its prune decisions equal a reference ASHA over the metrics
// the trials reported, `foxhunt sweep-resume` finishes a sweep whose queued jobs were lost, and
// `foxhunt sweep-cancel` ends a sweep mid-way: nothing starts again, nothing trains on.
import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { libraryExists } from '../../src/native/paths.js';
import { bullConnection } from '../../src/queue/connection.js';
import { enqueueEpochs } from '../../src/queue/queues.js';
import { parseRunConfig } from '../../src/config/load.js';
import { Keys } from '../../src/redis/keys.js';
import { RunStore } from '../../src/redis/runs.js';
import { decisionLog } from '../../src/sweep/asha.js';
import { SweepStore } from '../../src/sweep/store.js';
import type { LeaderboardRow } from '../../src/sweep/store.js';
import { referenceAsha } from './reference.js';
import type { Report } from './reference.js';
import { deleteKeys } from '../../src/redis/scan.js';

const run = promisify(execFile);
const url = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const tag = randomBytes(4).toString('hex');
const keys = new Keys(`fhtest-${tag}`);
const artifacts = join('test-artifacts', 'sweep');
const env: NodeJS.ProcessEnv = {
  ...process.env,
  REDIS_URL: url,
  FOXHUNT_PREFIX: keys.prefix,
  FOXHUNT_EPOCHS_QUEUE: `fhtest-epochs-${tag}`,
  FOXHUNT_SWEEPS_QUEUE: `fhtest-sweeps-${tag}`,
  FOXHUNT_CACHE_DIR: join('test-artifacts', 'sweep', 'fxcache'),
  FOXHUNT_LOCK_MS: '3000',
  FOXHUNT_STALLED_MS: '1500',
  FOXHUNT_SWEEP_CHECK_MS: '2000',
  FOXHUNT_LOG_LEVEL: 'info',
};
const workers: ChildProcess[] = [];
let redis: Redis;
const native = libraryExists('cpu');

function startWorker(name: string): ChildProcess {
  const log = openSync(join(artifacts, `${tag}-${name}.log`), 'a');
  // its own process group, so a SIGKILL takes its trainer child with it
  const p = spawn(process.execPath, ['bin/foxhunt-worker.js', '--cpu', '--health-port', '-1'], { env, detached: true, stdio: ['ignore', log, log] });
  workers.push(p);
  return p;
}

function kill(p: ChildProcess, signal: NodeJS.Signals): void {
  if (p.pid !== undefined && p.exitCode === null) {
    try { process.kill(-p.pid, signal); } catch { /* already gone */ }
  }
}

async function foxhunt(...args: string[]): Promise<string> {
  const { stdout } = await run(process.execPath, ['bin/foxhunt.js', ...args], { env });
  return stdout;
}

async function waitFor(cond: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}`);
}

async function checkStreams(rows: LeaderboardRow[]): Promise<void> {
  const runs = new RunStore(redis, keys);
  for (const r of rows) {
    const rec = await runs.require(r.runId);
    const epochs = (await runs.epochs(r.runId)).map((e) => e.epoch);
    // every committed epoch exactly once, in order, none missing
    expect(epochs, r.runId).toEqual(Array.from({ length: rec.committedEpoch }, (_, i) => i + 1));
  }
}

beforeAll(() => {
  mkdirSync(artifacts, { recursive: true });
  redis = new Redis(url);
});

afterAll(async () => {
  for (const w of workers) kill(w, 'SIGKILL');
  for (const name of [env['FOXHUNT_EPOCHS_QUEUE'], env['FOXHUNT_SWEEPS_QUEUE']]) {
    const q = new Queue(name as string, { connection: bullConnection(url) });
    await q.obliterate({ force: true }).catch(() => undefined);
    await q.close();
  }
  await deleteKeys(redis, `${keys.prefix}:*`);
  await redis.quit();
});

describe.skipIf(!native)('sweeps on foxhunt-worker processes (CPU backend, tiny config)', () => {
  it('a 12-trial sweep survives a SIGKILLed worker, completes, and prunes exactly as reference ASHA', async () => {
    const id = `fleet-${tag}`;
    const dry = JSON.parse(await foxhunt('sweep', 'config/sweeps/example.toml', '--dry-run', '--json', '--id', id)) as { trials: unknown[] };
    expect(dry.trials).toHaveLength(12);
    const store = new SweepStore(redis, keys.prefix);
    expect(await store.get(id)).toBeNull(); // a dry run enqueues nothing

    const w1 = startWorker('w1');
    startWorker('w2');
    await foxhunt('sweep', 'config/sweeps/example.toml', '--id', id);
    // kill w1 while it holds a trial's job (the run record names it as the worker training it)
    const runs = new RunStore(redis, keys);
    const w1Id = `:${w1.pid}`;
    let victim = '';
    await waitFor(async () => {
      const done = Object.values(await redis.hgetall(store.keys(id).epochs)).length;
      if (done < 2) return false;
      for (const r of await runs.list(50)) {
        if (r.sweepId === id && r.status === 'running' && (r.worker ?? '').endsWith(w1Id)) { victim = r.runId; return true; }
      }
      return false;
    }, 60_000, 'w1 training a trial mid-sweep');
    kill(w1, 'SIGKILL');
    const killedAt = Date.now();

    // completed is set atomically by the release script, the best run by finishSweep right after: wait for both
    await waitFor(async () => { const r = await store.get(id); return r?.status === 'completed' && r.best !== null; },
      150_000, 'the sweep to complete on the surviving worker and record its best run');
    const status = JSON.parse(await foxhunt('sweep-status', id, '--json')) as { sweep: { best: { runId: string; checkpoint: unknown } }; leaderboard: LeaderboardRow[] };
    const board = status.leaderboard;
    expect(board).toHaveLength(12);
    // no trial lost or failed: every trial completed or was pruned
    expect(board.map((r) => r.status).sort()).toEqual(board.map((r) => (r.status === 'pruned' ? 'pruned' : 'completed')).sort());
    await checkStreams(board);
    for (const r of board) expect(r.epochs).toBe(r.status === 'completed' ? 6 : r.epochs);

    // the trial w1 was training when it died was finished by the other worker
    const v = board.find((r) => r.runId === victim);
    expect(['completed', 'pruned']).toContain(v?.status);
    // prune decisions = reference ASHA over the metrics each trial reported at each rung
    const log = await decisionLog(redis, store.keys(id));
    const reports: Report[] = [];
    for (const d of log) {
      const e = (await runs.epochs(d.run)).find((x) => x.epoch === d.rung);
      reports.push({ run: d.run, rung: d.rung, metric: (e?.scalars['val/sharpe'] ?? null) as number | null });
    }
    const ref = referenceAsha(reports, 3, 'max');
    for (const d of log) expect(d.decision, `${d.run}@${d.rung}`).toBe(ref.get(`${d.run}:${d.rung}`));
    for (const r of board) {
      const pruned = [...ref].some(([k, v]) => k.startsWith(`${r.runId}:`) && v === 'prune');
      expect(r.status === 'pruned', r.runId).toBe(pruned);
      if (pruned) expect([1, 3]).toContain(r.epochs);
    }
    // every trial reached rung 1 and was decided there
    expect(log.filter((d) => d.rung === 1)).toHaveLength(12);
    expect(board.filter((r) => r.status === 'pruned').length).toBeGreaterThanOrEqual(3);
    expect(status.sweep.best.runId).toBe(board[0]?.runId);
    expect(status.sweep.best.checkpoint).toEqual({ runId: board[0]?.runId, epoch: 6 });
    process.stdout.write(`sweep ${id}: ${victim} was training on the killed worker; the sweep completed ${((Date.now() - killedAt) / 1000).toFixed(1)} s after the SIGKILL\n`);
  }, 240_000);

  it('sweep-resume finishes a sweep whose queued jobs were lost', async () => {
    for (const w of workers) kill(w, 'SIGKILL');
    const id = `resume-${tag}`;
    const store = new SweepStore(redis, keys.prefix);
    await foxhunt('sweep', 'config/sweeps/example.toml', '--id', id);
    const w = startWorker('w3');
    await waitFor(async () => Object.values(await redis.hgetall(store.keys(id).epochs)).length >= 2, 60_000, 'two trials to start');
    // interruption: the worker dies and both queues are wiped (jobs lost, no sweep check left)
    kill(w, 'SIGKILL');
    for (const name of [env['FOXHUNT_EPOCHS_QUEUE'], env['FOXHUNT_SWEEPS_QUEUE']]) {
      const q = new Queue(name as string, { connection: bullConnection(url) });
      await q.obliterate({ force: true });
      await q.close();
    }
    expect((await store.get(id))?.status).toBe('running');
    const report = JSON.parse(await foxhunt('sweep-resume', id, '--json')) as { reenqueued: string[]; started: string[] };
    expect(report.reenqueued.length + report.started.length).toBeGreaterThan(0);
    startWorker('w4');
    await waitFor(async () => (await store.get(id))?.status === 'completed', 150_000, 'the resumed sweep to complete');
    const board = await store.leaderboard(id, 'max');
    expect(board).toHaveLength(12);
    // every trial completed or was pruned (the others, with their status, if not)
    expect(board.filter((r) => r.status !== 'completed' && r.status !== 'pruned').map((r) => `${r.runId} ${r.status} at epoch ${r.epochs}`)).toEqual([]);
    await checkStreams(board);
  }, 240_000);

  it('sweep-cancel stops the training trial, removes the queued ones and starts no trial again', async () => {
    for (const w of workers) kill(w, 'SIGKILL');
    const id = `cancel-${tag}`;
    const store = new SweepStore(redis, keys.prefix);
    const runs = new RunStore(redis, keys);
    await foxhunt('sweep', 'config/sweeps/example.toml', '--id', id);
    startWorker('w5');
    // one worker: one trial training (an epoch committed), three more queued behind it, eight pending
    await waitFor(async () => Object.values(await redis.hgetall(store.keys(id).epochs)).length >= 1 &&
      (await runs.list(100)).some((r) => r.sweepId === id && r.status === 'running'), 60_000, 'a trial training mid-sweep');
    const report = JSON.parse(await foxhunt('sweep-cancel', id, '--json')) as {
      again: boolean; held: string[]; pending: number; runs: { runId: string; job: string; committedEpoch: number }[];
      completed: string[]; jobsRemoved: string[];
    };
    expect(report.again).toBe(false);
    expect(report.held).toHaveLength(4); // the concurrency cap
    expect(report.pending).toBeGreaterThan(0);
    // every slot's trial had a run: its queued job removed, the one a worker holds left to stop at its next epoch. The
    // cancel script marks the trials before their jobs are removed, so the worker, freed when the training trial stops,
    // may take a queued job first: it then ends it untrained (trialCancelled), and the cancel finds no job to remove.
    // The training trial may have been committing its last epoch as the cancel came: its run completed, and so did it
    expect([...report.runs.map((r) => r.runId), ...report.completed].sort()).toEqual([...report.held].sort());
    expect(report.completed.length).toBeLessThanOrEqual(1);
    const queuedAtCancel = report.runs.filter((r) => r.committedEpoch === 0);
    expect(queuedAtCancel.length).toBeGreaterThanOrEqual(3);
    const rec = await store.get(id);
    expect(rec?.status).toBe('cancelled');
    expect(rec?.finishedMs).toBeGreaterThan(0);

    // the training trial stops at its next epoch boundary; no run of the sweep is left queued or running
    const sweepRuns = async () => (await runs.list(200)).filter((r) => r.sweepId === id);
    await waitFor(async () => (await sweepRuns()).every((r) => r.status !== 'running' && r.status !== 'queued'),
      60_000, 'every run of the cancelled sweep to stop');
    const before = new Map((await sweepRuns()).map((r) => [r.runId, r.committedEpoch]));
    await new Promise((r) => setTimeout(r, 2 * Number(env['FOXHUNT_SWEEP_CHECK_MS'])));
    const after = await sweepRuns();
    expect(after.map((r) => r.runId).sort(), 'no trial started after the cancel').toEqual([...before.keys()].sort());
    for (const r of after) expect(r.committedEpoch, r.runId).toBe(before.get(r.runId));
    for (const r of after) expect(['completed', 'pruned', 'cancelled'], r.runId).toContain(r.status);
    // the queued ones never trained, whether the cancel removed their jobs or the worker refused them
    for (const q of queuedAtCancel) expect(before.get(q.runId), q.runId).toBe(0);
    const board = await store.leaderboard(id, 'max');
    expect(board).toHaveLength(12);
    expect(board.filter((r) => r.status === 'cancelled').length).toBeGreaterThanOrEqual(report.pending + 1);
    for (const r of board) expect(['completed', 'pruned', 'cancelled'], r.runId).toContain(r.status);
    await checkStreams(board.filter((r) => before.has(r.runId)));
    const epochsQ = new Queue(env['FOXHUNT_EPOCHS_QUEUE'] as string, { connection: bullConnection(url) });
    try {
      const live = await epochsQ.getJobs(['waiting', 'active', 'delayed', 'prioritized']);
      expect(live.filter((j) => String(j.id).startsWith(`${id}.`)).map((j) => j.id)).toEqual([]);

      // a trial job enqueued while the sweep was being cancelled (a hook's race) trains nothing on the worker
      const never = board.find((r) => r.status === 'cancelled' && !before.has(r.runId));
      expect(never, 'a pending trial that never started').toBeDefined();
      const config = parseRunConfig(await store.trialConfig(id, never!.runId), never!.runId);
      const job = await enqueueEpochs(epochsQ, redis, keys, { runId: never!.runId, epochs: 6, config, sweepId: id });
      await waitFor(async () => (await (await epochsQ.getJob(job.jobId))?.getState()) === 'completed', 30_000, 'the late trial job to end');
      expect(((await epochsQ.getJob(job.jobId))?.returnvalue as { outcome: string }).outcome).toBe('cancelled');
      const late = await runs.require(never!.runId);
      expect([late.status, late.committedEpoch]).toEqual(['cancelled', 0]);
    } finally {
      await epochsQ.close();
    }

    // again: nothing more to cancel; resume does not restart it; a completed sweep cannot be cancelled
    const again = JSON.parse(await foxhunt('sweep-cancel', id, '--json')) as { again: boolean; runs: unknown[] };
    expect(again).toMatchObject({ again: true, runs: [] });
    const resumed = JSON.parse(await foxhunt('sweep-resume', id, '--json')) as { status: string; reenqueued: string[]; started: string[] };
    expect(resumed).toMatchObject({ status: 'cancelled', reenqueued: [], started: [] });
    await expect(foxhunt('sweep-cancel', `fleet-${tag}`)).rejects.toThrow(/already completed/);
  }, 180_000);
});

if (!native) {
  it('sweeps on foxhunt-worker processes', () => {
    process.stdout.write(`skipped: no CPU native library (${existsSync('native/build') ? 'native/build has none' : 'run npm run build:native'})\n`);
  });
}
