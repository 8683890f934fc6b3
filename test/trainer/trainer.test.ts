/** NativeTrainer on the real CPU library: epochs, async behaviour, checkpoints, errors. */
import { describe, expect, it } from 'vitest';
import { FhStatus } from '../../src/native/binding.js';
import { errorCodeForStatus, NativeTrainer, TrainerError } from '../../src/native/trainer.js';
import { flattenScalars } from '../../src/trainer/scalars.js';
import type { Scalars } from '../../src/trainer/scalars.js';
import { testMarket, tinyConfig } from './market.js';

async function rejection(p: Promise<unknown>): Promise<TrainerError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(TrainerError);
    return err as TrainerError;
  }
  throw new Error('expected a rejection');
}

/** Scalars that must agree between two runs of the same state (everything but timings). */
function stateScalars(s: Scalars): Scalars {
  return Object.fromEntries(Object.entries(s).filter(([k]) => !k.startsWith('time/') && !k.startsWith('perf/')));
}

describe('NativeTrainer', () => {
  const cfg = tinyConfig();
  const market = testMarket(cfg);

  it('creates, reports info and runs epochs one at a time', async () => {
    const t = await NativeTrainer.create(cfg, market, { backend: 'cpu' });
    try {
      const info = t.info();
      expect(info.backend).toBe('cpu');
      expect(info.obsDim).toBe(cfg.env.window * market.nFeatures + 8);
      expect(info.batchSize).toBe(cfg.train.batch_size);
      expect(info.nParams).toBeGreaterThan(0);
      expect(info.libSha256).toMatch(/^[0-9a-f]{64}$/);
      expect(info.configHash).toMatch(/^[0-9a-f]{16}$/);
      const [a, b] = await Promise.all([t.runEpoch(), t.runEpoch()]);
      expect([a.epoch, b.epoch]).toEqual([1, 2]);
      const steps = cfg.env.n_envs * cfg.env.episode_len;
      expect(a.env_steps).toBe(steps);
      expect(b.env_steps).toBe(2 * steps);
      expect(b.global_step).toBe(2 * cfg.train.steps_per_epoch);
      expect(b.host_syncs).toBe(0);
      expect(b.loss_mean).not.toBeNull();
      expect(b.total_ms).toBeGreaterThan(0);
    } finally {
      t.close();
    }
  });

  it('keeps the event loop running during an epoch', async () => {
    const slow = tinyConfig(['train.steps_per_epoch=128']);
    const t = await NativeTrainer.create(slow, testMarket(slow), { backend: 'cpu' });
    try {
      let ticks = 0;
      const timer = setInterval(() => { ticks++; }, 5);
      const started = performance.now();
      const stats = await t.runEpoch();
      const wall = performance.now() - started;
      clearInterval(timer);
      expect(stats.total_ms, 'the epoch must be long enough to measure').toBeGreaterThan(50);
      // A blocked loop would give at most one tick; a free one about wall/5 (we allow a busy machine).
      expect(ticks).toBeGreaterThan(Math.max(3, wall / 5 / 5));
    } finally {
      t.close();
    }
  });

  it('resumes from a checkpoint exactly, and rejects corrupt checkpoints', async () => {
    const a = await NativeTrainer.create(cfg, market, { backend: 'cpu' });
    const b = await NativeTrainer.create(cfg, market, { backend: 'cpu' });
    try {
      await a.runEpoch();
      const ckpt = await a.saveCheckpoint();
      expect(ckpt.subarray(0, 4).toString('latin1')).toBe('FHCK');
      const straight = flattenScalars(await a.runEpoch());
      await b.loadCheckpoint(ckpt);
      const resumed = flattenScalars(await b.runEpoch());
      expect(resumed['epoch']).toBe(2);
      expect(stateScalars(resumed)).toEqual(stateScalars(straight));

      const flipped = Buffer.from(ckpt);
      const mid = Math.floor(flipped.length / 2);
      flipped[mid] = (flipped[mid] as number) ^ 0x40;
      const e1 = await rejection(b.loadCheckpoint(flipped));
      expect(e1.code).toBe('CHECKPOINT_INVALID');
      expect(e1.retryable).toBe(false);
      const e2 = await rejection(b.loadCheckpoint(ckpt.subarray(0, ckpt.length - 7)));
      expect(e2.code).toBe('CHECKPOINT_INVALID');
      // the handle is still usable after a refused load
      expect((await b.runEpoch()).epoch).toBe(3);
    } finally {
      a.close();
      b.close();
    }
  });

  it('gives CONFIG_INVALID naming the field for a bad config', async () => {
    const bad = tinyConfig();
    bad.agent.hidden1 = 0; // past zod, as a hand-edited job could be
    const err = await rejection(NativeTrainer.create(bad, market, { backend: 'cpu' }));
    expect(err.code).toBe('CONFIG_INVALID');
    expect(err.retryable).toBe(false);
    expect(err.status).toBe(FhStatus.ERR_INVALID_CONFIG);
    expect(err.message).toMatch(/hidden1/);
    expect(err.where).toBe('agent.hidden1');
  });

  it('gives DATA_INVALID for a NaN feature', async () => {
    const m = testMarket(cfg);
    const features = m.features.slice();
    features[market.split.trainBegin * market.nFeatures + 100 * market.nFeatures + 3] = Number.NaN;
    const err = await rejection(NativeTrainer.create(cfg, { ...m, features }, { backend: 'cpu' }));
    expect(err.code).toBe('DATA_INVALID');
    expect(err.retryable).toBe(false);
    expect(err.message.length).toBeGreaterThan('cannot create trainer: '.length);
  });

  it('gives DIVERGED naming the epoch when the loss stops being finite', async () => {
    // rewards of pnl / 1e-300 overflow float32: the first train step sees an infinite target
    const c = tinyConfig(['env.reward_scale=1e-300']);
    const t = await NativeTrainer.create(c, market, { backend: 'cpu' });
    try {
      const err = await rejection(t.runEpoch());
      expect(err.code).toBe('DIVERGED');
      expect(err.retryable).toBe(false);
      expect(err.message).toMatch(/epoch 1\b/);
    } finally {
      t.close();
    }
  });

  it('gives DIVERGED (not a crash) for an infinite target with C51 atoms', async () => {
    // the C51 projection must not turn a NaN/Inf target into an out-of-range atom index
    const c = tinyConfig(['env.reward_scale=1e-300', 'agent.atoms=51']);
    const t = await NativeTrainer.create(c, market, { backend: 'cpu' });
    try {
      const err = await rejection(t.runEpoch());
      expect(err.code).toBe('DIVERGED');
      expect(err.message).toMatch(/epoch 1\b/);
    } finally {
      t.close();
    }
  });

  it('close() is idempotent: accepted calls finish, later calls reject, the handle is freed after', async () => {
    const t = await NativeTrainer.create(cfg, market, { backend: 'cpu' });
    const first = t.runEpoch();
    const second = t.runEpoch();
    t.close();
    t.close();
    expect(t.closed).toBe(true);
    const late = await rejection(t.runEpoch());
    expect(late.message).toMatch(/closed/);
    expect((await first).epoch).toBe(1);
    expect((await second).epoch).toBe(2);
    await expect(t.saveCheckpoint()).rejects.toThrow(/closed/);
  });

  it('maps every status to the catalogue', () => {
    expect(errorCodeForStatus(FhStatus.ERR_INVALID_CONFIG)).toBe('CONFIG_INVALID');
    expect(errorCodeForStatus(FhStatus.ERR_INVALID_DATA)).toBe('DATA_INVALID');
    expect(errorCodeForStatus(FhStatus.ERR_OUT_OF_MEMORY)).toBe('OUT_OF_MEMORY');
    expect(errorCodeForStatus(FhStatus.ERR_CHECKPOINT)).toBe('CHECKPOINT_INVALID');
    expect(errorCodeForStatus(FhStatus.ERR_DIVERGED)).toBe('DIVERGED');
    expect(errorCodeForStatus(FhStatus.ERR_DEVICE)).toBe('DEVICE_FAULT');
    expect(errorCodeForStatus(FhStatus.ERR_UNSUPPORTED)).toBe('UNSUPPORTED');
    expect(errorCodeForStatus(FhStatus.ERR_INVALID_ARGUMENT)).toBe('INTERNAL');
    expect(new TrainerError('DIVERGED', 5, 'x').retryable).toBe(false);
    expect(new TrainerError('DEVICE_FAULT', 6, 'x').retryable).toBe(true);
  });
});
