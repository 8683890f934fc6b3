/**
 * The worker end to end on a real Redis (CPU backend, tiny config): a run completes with exactly
 * one stream entry per epoch equal to a local run; bad job data fails at once, unretried, and the
 * next job completes; a crashing trainer process fails only its attempt, the job is retried and
 * the worker lives on; repeated crashes quarantine the worker.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Job } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { enqueueEpochs, enqueuePrecompute } from '../../src/queue/queues.js';
import { RunStore } from '../../src/redis/runs.js';
import { listWorkers } from '../../src/redis/workers.js';
import { deterministic, fleetEnv, referenceRun, startWorker, tinyConfig, waitUntil } from './helpers.js';
import type { FleetEnv } from './helpers.js';

const EPOCHS = 4;
const reference = referenceRun(EPOCHS);
let env: FleetEnv;

afterEach(async () => env.cleanup());

async function finished(e: FleetEnv, runId: string, timeoutMs = 90_000) {
  const runs = new RunStore(e.redis, e.keys);
  return waitUntil(`run ${runId} to end`, async () => {
    const r = await runs.require(runId);
    return r.status === 'completed' || r.status === 'failed' ? r : null;
  }, timeoutMs);
}

describe('foxhunt-worker', () => {
  it('enqueue → complete: N stream entries equal to a local run with the same seed', async () => {
    env = fleetEnv();
    const w = startWorker(env);
    const res = await enqueueEpochs(env.queue, env.redis, env.keys, { runId: 'run-a', epochs: EPOCHS, config: tinyConfig() });
    const run = await finished(env, res.runId);
    expect(run.status).toBe('completed');
    expect(run.committedEpoch).toBe(EPOCHS);
    expect(run.backend).toBe('cpu');
    expect(run.libSha256).toMatch(/^[0-9a-f]{64}$/);
    expect(run.engine).toMatch(/^cpu fp32, \d+ threads?$/);
    const entries = await new RunStore(env.redis, env.keys).epochs('run-a');
    expect(entries.map((e) => e.epoch)).toEqual([1, 2, 3, 4]);
    expect(entries.map((e) => deterministic(e.scalars))).toEqual(reference);
    expect(run.bestEpoch).not.toBeNull();
    const hb = await listWorkers(env.redis, env.keys);
    expect(hb).toHaveLength(1);
    expect(hb[0]).toMatchObject({ backend: 'cpu', quarantined: false, pid: w.proc.pid });
    w.kill('SIGTERM');
    expect((await w.exited).code).toBe(0);
  });

  it('bad job data fails at once naming the field, is not retried, and the next valid job completes', async () => {
    env = fleetEnv();
    const w = startWorker(env);
    const opts = { attempts: 3, backoff: { type: 'fixed', delay: 100 } };
    const outside = { ...tinyConfig(['data.source="csv"', 'data.path="../outside.csv"']) };
    const bad = [
      { data: { epochs: 2 }, field: /data\.runId/ },
      { data: { runId: 'b2', epochs: 'two' }, field: /data\.epochs: expected number/ },
      { data: { runId: 'b3', epochs: 2, token: 'secret' }, field: /data\.token: unknown key/ },
      { data: { runId: 'b4', epochs: 2, config: outside }, field: /data\.config\.data\.path.*outside the data root/ },
    ];
    const jobs = [];
    for (const b of bad) jobs.push(await env.queue.add('epochs', b.data, opts));
    await enqueueEpochs(env.queue, env.redis, env.keys, { runId: 'good', epochs: 2, config: tinyConfig() });
    const run = await finished(env, 'good');
    expect(run.status).toBe('completed');
    for (let i = 0; i < bad.length; i++) {
      const job = await Job.fromId(env.queue, jobs[i]?.id ?? '');
      expect(await job?.getState()).toBe('failed');
      expect(job?.attemptsMade).toBe(1);
      expect(job?.failedReason).toMatch(bad[i]?.field ?? /never/);
    }
    expect(w.proc.exitCode).toBeNull();
  });

  it('a crash of the trainer process fails that attempt only: the job is retried and completes, the worker lives on', async () => {
    env = fleetEnv();
    const faults = join(env.cacheDir, 'faults');
    writeFileSync(faults, '1');
    const w = startWorker(env, { FOXHUNT_TEST_FAULTS_FILE: faults });
    await enqueueEpochs(env.queue, env.redis, env.keys, { runId: 'crashy', epochs: EPOCHS, config: tinyConfig() }, { attempts: 3, backoffMs: 200 });
    const run = await finished(env, 'crashy');
    expect(run.status).toBe('completed');
    expect(w.log.some((l) => /TRAINER_CRASHED/.test(l) && /SIGSEGV/.test(l))).toBe(true); // the native fault hook
    const job = await waitUntil('job completed', async () => {
      const j = await Job.fromId(env.queue, run.jobId ?? '');
      // re-read once completed: the job may have completed between the read and getState()
      return (await j?.getState()) === 'completed' ? ((await Job.fromId(env.queue, j?.id ?? '')) ?? null) : null;
    });
    expect(job.attemptsMade).toBe(2);
    const entries = await new RunStore(env.redis, env.keys).epochs('crashy');
    expect(entries.map((e) => deterministic(e.scalars))).toEqual(reference);
    expect(w.proc.exitCode).toBeNull();
  });

  it('repeated trainer faults quarantine the worker: it says so and takes no more jobs', async () => {
    env = fleetEnv();
    const faults = join(env.cacheDir, 'faults');
    writeFileSync(faults, '100');
    const w = startWorker(env, { FOXHUNT_TEST_FAULTS_FILE: faults, FOXHUNT_QUARANTINE_AFTER: '2' });
    await enqueueEpochs(env.queue, env.redis, env.keys, { runId: 'q1', epochs: 2, config: tinyConfig() }, { attempts: 10, backoffMs: 100 });
    await w.waitFor(/QUARANTINED/);
    const hb = await waitUntil('quarantined heartbeat', async () => (await listWorkers(env.redis, env.keys)).find((h) => h.quarantined));
    expect(hb.state).toBe('quarantined');
    const run = await new RunStore(env.redis, env.keys).require('q1');
    expect(run.committedEpoch).toBe(0);
    await new Promise((r) => setTimeout(r, 1500));
    expect(w.log.filter((l) => /"trainer fault"/.test(l))).toHaveLength(2);
    expect(w.proc.exitCode).toBeNull();
  });

  it('a precompute job fills the fxcache; a run cancelled mid-training stops at the next epoch', async () => {
    env = fleetEnv();
    startWorker(env);
    const id = await enqueuePrecompute(env.queue, { config: tinyConfig(['seed=7']) });
    const pre = await waitUntil('precompute job', async () => {
      const j = await Job.fromId(env.queue, id);
      // re-read once completed: the job may have completed between the read and getState()
      return (await j?.getState()) === 'completed' ? ((await Job.fromId(env.queue, j?.id ?? '')) ?? null) : null;
    });
    const result = pre.returnvalue as { cacheKey: string; bars: number };
    expect(result.bars).toBeGreaterThan(0);
    expect(existsSync(join(env.cacheDir, `${result.cacheKey}.fxc`))).toBe(true);

    const res = await enqueueEpochs(env.queue, env.redis, env.keys, { runId: 'cx', epochs: 50, config: tinyConfig() });
    const runs = new RunStore(env.redis, env.keys);
    await waitUntil('epoch 1', async () => (await runs.require('cx')).committedEpoch >= 1, 60_000, 20);
    await runs.setStatus('cx', 'cancelled');
    const job = await waitUntil('job to end', async () => {
      const j = await Job.fromId(env.queue, res.jobId);
      // re-read once completed: the job may have completed between the read and getState()
      return (await j?.getState()) === 'completed' ? ((await Job.fromId(env.queue, j?.id ?? '')) ?? null) : null;
    });
    expect((job.returnvalue as { outcome: string }).outcome).toBe('cancelled');
    const run = await runs.require('cx');
    expect(run.status).toBe('cancelled');
    expect(run.committedEpoch).toBeLessThan(50);
    expect((await runs.epochs('cx')).map((e) => e.epoch)).toEqual(Array.from({ length: run.committedEpoch }, (_, i) => i + 1));
  });
});
