// Test fixtures for the dashboard: runs with epoch streams written directly to Redis, a sweep
// driven through the real sweep code with synthetic epochs, and worker heartbeats.
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Keys } from '../../src/redis/keys.js';
import { RunStore } from '../../src/redis/runs.js';
import { writeHeartbeat } from '../../src/redis/workers.js';
import { trialEpoch } from '../../src/sweep/hooks.js';
import { processSweepJob } from '../../src/sweep/processor.js';
import { sweepRecordOf } from '../../src/sweep/runner.js';
import { parseSweepSpec } from '../../src/sweep/spec.js';
import { SweepStore } from '../../src/sweep/store.js';
import { METRIC_NAMES } from '../../src/trainer/scalars.js';

/** Every scalar name of DESIGN §7 with a deterministic value per (seed, epoch); some nulls. */
export function syntheticScalars(seed: number, epoch: number): Record<string, number | null> {
  const s: Record<string, number | null> = {
    'epoch': epoch, 'step/global': epoch * 64, 'step/env': epoch * 3200,
    'loss/mean': 1 / (epoch + seed), 'loss/last': 0.9 / (epoch + seed), 'grad/norm_mean': 2 + Math.sin(epoch + seed),
    'grad/norm_max': 4 + Math.sin(epoch + seed), 'q/avg_max': 0.1 * epoch, 'q/min': -1 - 0.01 * epoch, 'q/max': 1 + 0.02 * epoch,
    'q/mean': 0.05 * epoch, 'q/var': 0.3, 'explore/epsilon': Math.exp(-epoch / 5), 'per/beta': Math.min(1, 0.4 + 0.1 * epoch),
    'train/batch_size': 64, 'replay/size': Math.min(65536, epoch * 3200),
    'time/collect_ms': 40 + seed, 'time/train_ms': 80 + epoch, 'time/eval_ms': 20, 'time/total_ms': 140 + epoch + seed,
    'perf/env_steps_per_s': 80_000 + 100 * epoch, 'perf/samples_per_s': 50_000, 'perf/host_syncs': 0,
  };
  for (const [p, k] of [['val', 1], ['flat', 0], ['bh', 0.5]] as const) {
    for (const [i, m] of METRIC_NAMES.entries()) s[`${p}/${m}`] = p === 'flat' && m === 'sharpe' ? null : k * (i + 1) * Math.cos(epoch * 0.7 + seed) + (p === 'val' ? 0.1 * epoch : 0);
  }
  return s;
}

/** Writes epochs 1..n of a run straight into its stream and record (what a commit leaves behind). */
export async function seedEpochs(redis: Redis, keys: Keys, runId: string, seed: number, from: number, to: number, done: boolean): Promise<void> {
  const k = keys.run(runId);
  for (let e = from; e <= to; e++) {
    const scalars = syntheticScalars(seed, e);
    await redis.xadd(k.epochs, `${e}-1`, 'scalars', JSON.stringify(scalars), 'worker', 'seed', 'ts', String(Date.now()));
  }
  await redis.hset(k.record, 'committed_epoch', String(to), 'status', done ? 'completed' : 'running', 'backend', 'cpu', 'updated_ms', String(Date.now()));
}

export async function seedRun(redis: Redis, keys: Keys, runId: string, seed: number, epochs: number): Promise<void> {
  await new RunStore(redis, keys).create({ runId, config: { seed, agent: { lr: 1e-4 } }, configHash: `hash-${runId}`, seed, targetEpochs: epochs });
  await seedEpochs(redis, keys, runId, seed, 1, epochs, true);
}

/** A sweep of 6 trials (rungs 1 and 2 of max 4, eta 2) driven to completion with synthetic epochs. */
export async function seedSweep(redis: Redis, keys: Keys, queue: Queue, sweepsQueue: Queue, id: string): Promise<void> {
  const spec = parseSweepSpec({
    name: 'seed', trials: 6, max_epochs: 4, concurrency: 2, sampler: { kind: 'halton', seed: 5 },
    asha: { grace_epochs: 1, eta: 2 },
    space: { 'agent.lr': { kind: 'log_uniform', low: 1e-5, high: 1e-2 }, 'agent.gamma': { kind: 'choice', values: [0.9, 0.99] } },
  }, 'seed.toml', '.');
  const store = new SweepStore(redis, keys.prefix);
  await store.create(sweepRecordOf(id, spec));
  await processSweepJob({ data: { sweepId: id } }, { redis, keys, queue, sweepsQueue });
  const runs = new RunStore(redis, keys);
  for (let guard = 0; guard < 100 && (await store.get(id))?.status === 'running'; guard++) {
    const status = await redis.hgetall(store.keys(id).status);
    const queued = Object.keys(status).filter((r) => status[r] === 'queued').sort();
    for (const runId of queued) {
      const run = await runs.require(runId);
      const e = run.committedEpoch + 1;
      const seed = Number(runId.slice(-1));
      await seedEpochs(redis, keys, runId, seed, e, e, e === 4);
      await trialEpoch({ redis, keys, queue, runId, sweepId: id, epoch: e, scalars: syntheticScalars(seed, e) });
    }
  }
}

export async function seedWorkers(redis: Redis, keys: Keys): Promise<void> {
  const now = Date.now();
  const base = { host: 'gpu-node-1', pid: 4242, gpuMemMb: 143771, driver: '570.86', backend: 'cuda' as const, faults: 0, startedMs: now - 60_000, updatedMs: now };
  await writeHeartbeat(redis, keys, { ...base, workerId: 'gpu-node-1:0', gpuIndex: 0, gpuUuid: 'GPU-aaaa', gpuModel: 'NVIDIA H200', state: 'busy', jobId: 'job-1', runId: 'dash-run-a', epoch: 7, quarantined: false });
  await writeHeartbeat(redis, keys, { ...base, workerId: 'gpu-node-1:1', gpuIndex: 1, gpuUuid: 'GPU-bbbb', gpuModel: 'NVIDIA H200', state: 'idle', jobId: '', runId: '', epoch: null, quarantined: false });
  await writeHeartbeat(redis, keys, { ...base, workerId: 'gpu-node-1:2', gpuIndex: 2, gpuUuid: 'GPU-cccc', gpuModel: 'NVIDIA H200', state: 'quarantined', jobId: '', runId: '', epoch: null, quarantined: true, faults: 3 });
}
