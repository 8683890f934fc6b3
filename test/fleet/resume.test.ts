/**
 * Crash, stop and stall: a run survives losing its worker with every epoch committed exactly once
 * and scalars equal to an uninterrupted run.
 *   - SIGKILL the worker after epoch 2 of 6 commits; another worker resumes from the checkpoint.
 *   - SIGTERM mid-run: the epoch in flight commits, the job is released to wait, exit code 0.
 *   - A stalled worker (SIGSTOP past its lock) comes back after another took the job: its late
 *     commit is refused by the fence.
 */
import { Job } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { enqueueEpochs } from '../../src/queue/queues.js';
import { RunStore } from '../../src/redis/runs.js';
import { deterministic, fleetEnv, referenceRun, startWorker, tinyConfig, waitUntil } from './helpers.js';
import type { FleetEnv } from './helpers.js';

const EPOCHS = 6;
const reference = referenceRun(EPOCHS);
let env: FleetEnv;

afterEach(async () => env.cleanup());

async function committed(e: FleetEnv, runId: string, atLeast: number): Promise<number> {
  const runs = new RunStore(e.redis, e.keys);
  return waitUntil(`epoch ${atLeast} of ${runId}`, async () => {
    const r = await runs.require(runId);
    return r.committedEpoch >= atLeast ? r.committedEpoch : null;
  }, 90_000, 10);
}

async function completed(e: FleetEnv, runId: string) {
  const runs = new RunStore(e.redis, e.keys);
  return waitUntil(`run ${runId} to complete`, async () => {
    const r = await runs.require(runId);
    return r.status === 'completed' ? r : null;
  }, 120_000);
}

async function expectExactlyOnce(e: FleetEnv, runId: string): Promise<{ epoch: number; worker: string }[]> {
  const entries = await new RunStore(e.redis, e.keys).epochs(runId);
  expect(entries.map((x) => x.epoch)).toEqual([1, 2, 3, 4, 5, 6]);
  expect(entries.map((x) => deterministic(x.scalars))).toEqual(reference);
  return entries.map((x) => ({ epoch: x.epoch, worker: x.worker }));
}

describe('resume after losing a worker', () => {
  it('SIGKILL after epoch 2 of 6: another worker resumes from the checkpoint, each epoch once, same scalars', async () => {
    env = fleetEnv();
    const a = startWorker(env);
    await enqueueEpochs(env.queue, env.redis, env.keys, { runId: 'kill', epochs: EPOCHS, config: tinyConfig() });
    const at = await committed(env, 'kill', 2);
    a.kill('SIGKILL');
    expect((await a.exited).signal).toBe('SIGKILL');
    const b = startWorker(env);
    const run = await completed(env, 'kill');
    expect(run.committedEpoch).toBe(EPOCHS);
    const entries = await expectExactlyOnce(env, 'kill');
    const bId = entries[entries.length - 1]?.worker ?? '';
    expect(bId).toContain(`:${b.proc.pid}`);
    // a committed epochs 1..k (k >= the epoch seen before the kill: a commit may have landed
    // between that read and the kill), b every epoch after k
    const aId = entries[0]?.worker ?? '';
    expect(aId).toContain(`:${a.proc.pid}`);
    const k = entries.filter((x) => x.worker === aId).length;
    expect(k).toBeGreaterThanOrEqual(at);
    expect(entries.map((x) => x.worker)).toEqual(entries.map((x) => (x.epoch <= k ? aId : bId)));
  });

  it('SIGTERM mid-run: the epoch in flight commits, the job is released, exit 0; another worker finishes', async () => {
    env = fleetEnv();
    const a = startWorker(env);
    const res = await enqueueEpochs(env.queue, env.redis, env.keys, { runId: 'term', epochs: EPOCHS, config: tinyConfig() });
    const at = await committed(env, 'term', 2);
    a.kill('SIGTERM');
    expect((await a.exited).code).toBe(0);
    expect(a.log.some((l) => /releasing the job/.test(l))).toBe(true);
    const run = await new RunStore(env.redis, env.keys).require('term');
    // What the worker had committed when it handled the SIGTERM (`at` was read before, and the
    // worker may have committed more since). Epochs are pipelined: at that moment one epoch may
    // be committing (in Redis already, not yet logged) while the next trains in the child; both
    // are in flight and are committed, and no epoch is started after it. The release names the last.
    const stopLine = a.log.findIndex((l) => /"msg":"stopping at the next epoch boundary"/.test(l));
    expect(stopLine, a.log.join('\n')).toBeGreaterThanOrEqual(0);
    const committedBefore = a.log.slice(0, stopLine).filter((l) => /"msg":"epoch committed"/.test(l))
      .map((l) => (JSON.parse(l) as { epoch: number }).epoch);
    const atStop = Math.max(0, ...committedBefore);
    expect(at).toBeLessThanOrEqual(atStop + 1);
    expect(run.committedEpoch).toBeGreaterThanOrEqual(at);
    expect(run.committedEpoch).toBeGreaterThanOrEqual(atStop + 1);
    expect(run.committedEpoch).toBeLessThanOrEqual(atStop + 2);
    // epoch `at` was in Redis but not logged at the stop: it was committing, the next one training
    if (at === atStop + 1) expect(run.committedEpoch).toBe(at + 1);
    expect(run.committedEpoch).toBeLessThan(EPOCHS);
    const release = a.log.find((l) => /"msg":"stopping: epoch committed, releasing the job"/.test(l));
    expect((JSON.parse(release ?? '{}') as { epoch?: number }).epoch).toBe(run.committedEpoch);
    expect(run.status).toBe('queued');
    const job = await Job.fromId(env.queue, res.jobId);
    expect(await job?.getState()).toBe('waiting');
    const released = run.committedEpoch;

    startWorker(env);
    await completed(env, 'term');
    const entries = await expectExactlyOnce(env, 'term');
    expect(new Set(entries.filter((x) => x.epoch <= released).map((x) => x.worker)).size).toBe(1);
    expect(entries[EPOCHS - 1]?.worker).not.toBe(entries[0]?.worker);
  });

  it('a stalled worker that wakes after another took its job cannot commit (fenced); each epoch once', async () => {
    env = fleetEnv();
    const a = startWorker(env);
    await enqueueEpochs(env.queue, env.redis, env.keys, { runId: 'stall', epochs: EPOCHS, config: tinyConfig() });
    await committed(env, 'stall', 2);
    a.kill('SIGSTOP');
    const b = startWorker(env);
    try {
      await b.waitFor(/"msg":"training"/, 60_000);
      await committed(env, 'stall', 4);
    } finally {
      a.kill('SIGCONT');
    }
    await a.waitFor(/"reason":"lost_lock".*commit refused by the fence/, 30_000);
    await completed(env, 'stall');
    await expectExactlyOnce(env, 'stall');
  });
});
