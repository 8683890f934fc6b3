/**
 * The paired batch layout (kernels/net_kernels.cuh fh_pair_layout, kernels/collect.cu replay_gather_pair): in bf16
 * mode with the target cache, a batch's s and s' share their market rows in one block per sample, and layer 1 reads
 * the s run and the s' run of each block against two copies of W1 with the columns placed to match (w1s, w1n).
 * Checked through the CUDA-only test entry fh_test_trainer_pair_gather (native/src/cuda/trainer_cuda.cu) on a trainer
 * after real epochs: both runs of every block equal the usual gather's rows bit for bit (s' wherever no episode ended
 * inside the n steps), and the placed W1 copies equal the online shadow's W1 after the optimiser's steps and after
 * set_params. Training with the layout agrees with FH_PAIRED=0 within bf16 tolerance, and without the s' runs'
 * first-layer ReLU mask (the default) as with it (FH_PAIR_SN_MASK=1).
 */
import koffi from 'koffi';
import { describe, expect, test } from 'vitest';
import { FhStatus, loadNative } from '../../src/native/binding.js';
import type { FhConfig, NativeLib, TrainerHandle } from '../../src/native/binding.js';
import type { RunConfig } from '../../src/config/schema.js';
import { expectEpochLossesClose } from './driver.js';
import { info, market, nativeConfig, nativeMarket, params, runEpoch, tinyConfig, withEnv, withTrainer } from '../native/helpers.js';

type CheckFn = (h: TrainerHandle, out: Float64Array) => number;

let checkFn: CheckFn | null = null;
function check(l: NativeLib): CheckFn {
  // a CUDA-only test entry outside foxhunt.h, declared on the library file loadNative opened
  checkFn ??= koffi.load(l.path).func('fh_status fh_test_trainer_pair_gather(fh_trainer *t, double *out)') as CheckFn;
  return checkFn;
}

interface PairCheck { on: boolean; samples: number; sDiff: number; nextDiff: number; ended: number; w1Diff: number }

function pairCheck(l: NativeLib, h: TrainerHandle): PairCheck {
  const out = new Float64Array(6);
  expect(check(l)(h, out), l.fh_trainer_last_error(h) ?? '').toBe(FhStatus.OK);
  return {
    on: out[0] === 1, samples: out[1] ?? NaN, sDiff: out[2] ?? NaN, nextDiff: out[3] ?? NaN, ended: out[4] ?? NaN,
    w1Diff: out[5] ?? NaN,
  };
}

function cudaConfig(cfg: RunConfig, overrides: Partial<FhConfig> = {}): FhConfig {
  // hard target copies (the target cache needs them), bf16 mode
  return nativeConfig(cfg, { backend: 1, use_graphs: 1, deterministic: 0, target_update_every: 3, tau: 0, ...overrides });
}

describe('the paired batch layout', () => {
  // short episodes: several samples of every batch end an episode inside the n steps; a window of 8 bars (the tiny
  // config's 2 would make a block longer than the two rows it replaces, and the trainer keeps the usual layout then)
  const cfg = tinyConfig(['agent.atoms=51', 'env.episode_len=12', 'env.window=8']);
  const m = nativeMarket(market(cfg));
  const env = { FH_TARGET_CACHE: '1', FH_PAIRED: undefined };

  test("its blocks hold the usual gather's s and s' rows bit for bit; W1's placed copies follow the shadow", () => {
    const gpu = loadNative('cuda');
    withEnv(env, () => withTrainer(gpu, cudaConfig(cfg), m, (h) => {
      expect(info(gpu, h).engine).toContain("paired s/s'");
      for (let e = 0; e < 2; e++) {
        const s = runEpoch(gpu, h);
        expect(Number.isFinite(s.loss_mean)).toBe(true);
        expect(s.host_syncs).toBe(1);
      }
      const c = pairCheck(gpu, h);
      expect(c.on).toBe(true);
      expect(c.samples).toBe(info(gpu, h).batch_size);
      expect(c.sDiff, 's rows').toBe(0);
      expect(c.nextDiff, "s' rows (no episode end inside the n steps)").toBe(0);
      expect(c.ended, 'samples whose episode ended').toBeGreaterThan(0);
      expect(c.ended).toBeLessThan(c.samples);
      expect(c.w1Diff, 'placed W1 copies after the optimiser').toBe(0);

      // new online weights through set_params: the placed copies follow at once
      const P = Number(info(gpu, h).n_params);
      const w = new Float32Array(P);
      expect(gpu.fh_trainer_get_params(h, 0, w, P)).toBe(FhStatus.OK);
      expect(gpu.fh_trainer_set_params(h, 0, w.map((x) => 0.5 * x), P)).toBe(FhStatus.OK);
      expect(pairCheck(gpu, h).w1Diff, 'placed W1 copies after set_params').toBe(0);
    }));
  });

  test('train steps with the layout == without it (FH_PAIRED=0) within bf16 tolerance', () => {
    // lr 1e-12: the weights stay (in bf16) the initial ones, so both runs train on (nearly) the same batches and the
    // losses differ only by the s rows' first-layer sums, taken in another column order
    const gpu = loadNative('cuda');
    const run = (paired: string | undefined) =>
      withEnv({ ...env, FH_PAIRED: paired }, () => withTrainer(gpu, cudaConfig(cfg, { lr: 1e-12 }), m, (h) => {
        const engine = info(gpu, h).engine;
        const stats = [1, 2].map(() => runEpoch(gpu, h));
        return { engine, stats, check: pairCheck(gpu, h) };
      }));
    const on = run(undefined);
    const off = run('0');
    expect(on.engine).toContain("paired s/s'");
    expect(off.engine).not.toContain("paired s/s'");
    expect(on.check.on).toBe(true);
    expect(off.check.on).toBe(false);
    expectEpochLossesClose(on.stats, off.stats, 2e-3);
  });

  test("without the s' rows' first-layer ReLU mask (the default) it trains as with it (FH_PAIR_SN_MASK=1)", () => {
    // the backward reads the masks of the s rows only, so leaving out the s' rows' mask changes nothing but the
    // GEMM's epilogue; a wrong mask row (another half's, or none) would change an epoch's update of the weights by
    // the order of the update itself, so the check is against a twentieth of it (on the H200 the two are equal)
    const gpu = loadNative('cuda');
    const run = (variant: string | undefined) =>
      withEnv({ ...env, FH_PAIR_SN_MASK: variant }, () => withTrainer(gpu, cudaConfig(cfg), m, (h) => {
        const before = params(gpu, h, 0);
        const stats = runEpoch(gpu, h);
        return { engine: info(gpu, h).engine, before, after: params(gpu, h, 0), stats };
      }));
    const base = run(undefined);
    const masked = run('1');
    expect(base.engine).toContain("paired s/s'");
    const norm = (a: Float32Array, b: Float32Array) => Math.sqrt(a.reduce((t, x, i) => t + (x - (b[i] ?? NaN)) ** 2, 0));
    const update = norm(base.after, base.before);
    expect(update).toBeGreaterThan(0);
    expect(norm(masked.before, base.before), 'same initial weights').toBe(0);
    const off = norm(masked.after, base.after);
    expect(off, `|w - w_masked| against the epoch's update ${update}`).toBeLessThan(0.05 * update);
    expectEpochLossesClose([masked.stats], [base.stats], 2e-2);
  });
});
