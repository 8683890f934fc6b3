/**
 * Exact resume: 3 epochs straight give the same scalars (every non-timing field) as 2 epochs, save,
 * load into a NEW handle, 1 epoch; the parameters and the final checkpoint bytes are identical too.
 * The replay ring wraps and the target net updates inside these epochs, so every piece of state
 * (weights, Adam moments, counters, env states, replay rows, priorities) has to round-trip.
 */
import { describe, expect, test } from 'vitest';
import { FhStatus } from '../../src/native/binding.js';
import type { FhEpochStats, TrainerHandle } from '../../src/native/binding.js';
import { create, firstMismatch, lib, market, nativeConfig, nativeMarket, params, runEpochAsync, saveCheckpoint, tinyConfig } from './helpers.js';

const TIMING = new Set(['collect_ms', 'train_ms', 'eval_ms', 'total_ms', 'env_steps_per_s', 'samples_per_s']);

function scalars(s: FhEpochStats): Record<string, unknown> {
  return Object.fromEntries(Object.entries(s).filter(([k]) => !TIMING.has(k)));
}

const CASES = [
  { name: 'plain Q, hard target updates', sets: ['agent.atoms=1', 'agent.target_update_every=15'] },
  { name: 'C51, Polyak target', sets: ['agent.atoms=11', 'agent.v_min=-4', 'agent.v_max=4', 'agent.tau=0.05'] },
];

describe('native checkpoint resume', () => {
  test.each(CASES)('$name: 3 straight == 2 + save/load into a new handle + 1', async ({ sets }) => {
    const cfg = tinyConfig(['env.n_envs=32', 'env.episode_len=20', 'train.steps_per_epoch=25', 'train.batch_size=32',
      'replay.capacity=1280', 'agent.hidden1=32', 'agent.hidden2=32', 'agent.head_hidden=16', ...sets]);
    const l = lib();
    const m = nativeMarket(market(cfg));
    const ncfg = nativeConfig(cfg);
    const a = create(l, ncfg, m);
    const b = create(l, ncfg, m);
    let c: TrainerHandle | null = null;
    try {
      const straight: FhEpochStats[] = [];
      for (let e = 0; e < 3; e++) straight.push(await runEpochAsync(l, a));
      await runEpochAsync(l, b);
      await runEpochAsync(l, b);
      const ckpt = saveCheckpoint(l, b);
      c = create(l, ncfg, m);
      expect(await l.async.fh_trainer_load_checkpoint(c, ckpt, ckpt.length)).toBe(FhStatus.OK);
      const resumed = await runEpochAsync(l, c);
      const last = straight[2] as FhEpochStats;
      expect(resumed.epoch).toBe(3);
      expect(scalars(resumed)).toEqual(scalars(last));
      expect(firstMismatch(params(l, c, 0), params(l, a, 0))).toBeNull();
      expect(firstMismatch(params(l, c, 1), params(l, a, 1))).toBeNull();
      expect(saveCheckpoint(l, c).equals(saveCheckpoint(l, a))).toBe(true);
      // the run really trained and the ring wrapped (60 rows of 32 > 1280 slots)
      expect(last.global_step).toBe(75);
      expect(last.env_steps).toBe(3 * 20 * 32);
      expect(last.replay_size).toBe(1280);
      expect(Number.isFinite(last.loss_mean)).toBe(true);
    } finally {
      l.fh_trainer_destroy(a);
      l.fh_trainer_destroy(b);
      l.fh_trainer_destroy(c);
    }
  });

  test('results do not depend on the thread count (1 vs 2 threads: same scalars and checkpoint)', async () => {
    const cfg = tinyConfig(['env.n_envs=32', 'env.episode_len=20', 'train.steps_per_epoch=25', 'train.batch_size=32',
      'agent.hidden1=48', 'agent.hidden2=40', 'agent.head_hidden=24', 'agent.atoms=5']);
    const l = lib();
    const m = nativeMarket(market(cfg));
    const one = create(l, nativeConfig(cfg, { threads: 1 }), m);
    const two = create(l, nativeConfig(cfg, { threads: 2 }), m);
    try {
      for (let e = 0; e < 2; e++) {
        const [a, b] = await Promise.all([runEpochAsync(l, one), runEpochAsync(l, two)]);
        expect(scalars(b)).toEqual(scalars(a));
      }
      expect(saveCheckpoint(l, two).equals(saveCheckpoint(l, one))).toBe(true);
    } finally {
      l.fh_trainer_destroy(one);
      l.fh_trainer_destroy(two);
    }
  });
});
