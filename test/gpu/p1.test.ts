/**
 * The target net's first-layer table (kernels/p1.cuh, native/src/cuda/net.cu fh_target_p1_*): in bf16 mode
 * with hard target updates, target(s')'s first layer of a train step is relu(P1[bar] + b1 + acc W1acc^T)
 * from a per-bar table of the target's market part instead of a GEMM. Checked through the CUDA-only test
 * entry fh_test_trainer_target_p1 (native/src/cuda/trainer_cuda.cu), on a trainer after real epochs:
 * the table equals a rebuild from the target's current weights exactly (it followed every hard update,
 * and a set_params of the target), and the first layer of the last batch's s' rows from the table agrees
 * with the GEMM's within bf16 rounding. The whole train step with the table agrees with the GEMM path
 * (FH_TARGET_P1=0) within bf16 tolerance, and the deterministic (fp32) mode keeps the GEMM.
 */
import koffi from 'koffi';
import { describe, expect, test } from 'vitest';
import type { RunConfig } from '../../src/config/schema.js';
import { FhStatus, loadNative } from '../../src/native/binding.js';
import type { FhConfig, NativeLib, TrainerHandle } from '../../src/native/binding.js';
import { expectEpochLossesClose } from './driver.js';
import { info, market, nativeConfig, nativeMarket, runEpoch, tinyConfig, withEnv, withTrainer } from '../native/helpers.js';

type CheckFn = (h: TrainerHandle, out: Float64Array, why: Buffer, whyLen: number) => number;

let checkFn: CheckFn | null = null;
function check(l: NativeLib): CheckFn {
  // a CUDA-only test entry outside foxhunt.h, declared on the library file loadNative opened
  checkFn ??= koffi.load(l.path).func(
    'fh_status fh_test_trainer_target_p1(fh_trainer *t, double *out, char *why, size_t why_len)') as CheckFn;
  return checkFn;
}

interface TableCheck { on: boolean; tableDiff: number; a1Diff: number; a1Max: number; rows: number; why: string }

function tableCheck(l: NativeLib, h: TrainerHandle): TableCheck {
  const out = new Float64Array(5);
  const why = Buffer.alloc(256);
  const st = check(l)(h, out, why, why.length);
  expect(st, l.fh_trainer_last_error(h) ?? '').toBe(FhStatus.OK);
  return {
    on: out[0] === 1, tableDiff: out[1] ?? NaN, a1Diff: out[2] ?? NaN, a1Max: out[3] ?? NaN, rows: out[4] ?? NaN,
    why: why.toString('utf8').replace(/\0.*$/s, ''),
  };
}

function cudaConfig(cfg: RunConfig, overrides: Partial<FhConfig> = {}): FhConfig {
  // hard target copies every 3 steps: several inside each epoch
  return nativeConfig(cfg, { backend: 1, use_graphs: 1, deterministic: 0, target_update_every: 3, tau: 0, ...overrides });
}

describe("the target's first-layer table", () => {
  const cfg = tinyConfig(['agent.atoms=51']);
  const m = nativeMarket(market(cfg));

  test('follows every hard update and set_params; its first layer == the GEMM within bf16 rounding', () => {
    const gpu = loadNative('cuda');
    withEnv({ FH_TARGET_P1: undefined }, () => withTrainer(gpu, cudaConfig(cfg), m, (h) => {
      expect(info(gpu, h).engine).toContain('target P1 table');
      const fresh = tableCheck(gpu, h);
      expect(fresh.on, fresh.why).toBe(true);
      expect(fresh.tableDiff).toBe(0);
      for (let e = 0; e < 2; e++) {
        const s = runEpoch(gpu, h);
        expect(Number.isFinite(s.loss_mean)).toBe(true);
        expect(s.host_syncs).toBe(1);
      }
      const c = tableCheck(gpu, h);
      expect(c.tableDiff, 'table vs a rebuild from the current target').toBe(0);
      expect(c.rows).toBe(info(gpu, h).batch_size);
      expect(c.a1Max).toBeGreaterThan(0);
      // one bf16 rounding of sums taken in another order: at most ~2 ulps of the largest value
      expect(c.a1Diff).toBeLessThanOrEqual(2 ** -6 * c.a1Max);

      // a new target through set_params: the table follows it at once
      const P = Number(info(gpu, h).n_params);
      const tgt = new Float32Array(P);
      expect(gpu.fh_trainer_get_params(h, 1, tgt, P)).toBe(FhStatus.OK);
      const scaled = tgt.map((x) => 1.5 * x);
      expect(gpu.fh_trainer_set_params(h, 1, scaled, P)).toBe(FhStatus.OK);
      const after = tableCheck(gpu, h);
      expect(after.tableDiff).toBe(0);
      expect(after.a1Diff).toBeLessThanOrEqual(2 ** -6 * after.a1Max);
      expect(after.a1Max).not.toBe(c.a1Max);
    }));
  });

  test('train steps with the table == with the GEMM (FH_TARGET_P1=0) within bf16 tolerance', () => {
    // lr 1e-12: the online net and every hard copy of it stay (in bf16) the initial weights, so both runs train on
    // (nearly) the same batches and the losses differ only by the target's first layer: table vs GEMM
    const gpu = loadNative('cuda');
    const run = (p1: string) => withEnv({ FH_TARGET_P1: p1 }, () => withTrainer(gpu, cudaConfig(cfg, { lr: 1e-12 }), m, (h) => {
      const engine = info(gpu, h).engine;
      const stats = [1, 2].map(() => runEpoch(gpu, h));
      return { engine, stats, check: tableCheck(gpu, h) };
    }));
    const on = run('1');
    const off = run('0');
    expect(on.engine).toContain('target P1 table');
    expect(off.engine).not.toContain('target P1 table');
    expect(on.check.on).toBe(true);
    expect(off.check.on).toBe(false);
    expect(off.check.why).toBe('FH_TARGET_P1=0');
    expectEpochLossesClose(on.stats, off.stats, 2e-3);
  });

  test('the deterministic (fp32) mode and Polyak targets keep the GEMM', () => {
    const gpu = loadNative('cuda');
    withEnv({ FH_TARGET_P1: undefined }, () => {
      const fp32 = withTrainer(gpu, cudaConfig(cfg, { deterministic: 1 }), m, (h) => tableCheck(gpu, h));
      expect(fp32.on).toBe(false);
      expect(fp32.why).toContain('deterministic');
      const polyak = withTrainer(gpu, cudaConfig(cfg, { tau: 0.01 }), m, (h) => tableCheck(gpu, h));
      expect(polyak.on).toBe(false);
      expect(polyak.why).toContain('Polyak');
    });
  });
});
