/**
 * The gathering first layer (FH_L1_GATHER, kernels/l1_gather.cuh): with the paired layout on a Hopper GPU the replay
 * gather writes each sample's bars and account features only, layer 1 of the s and s' rows is one warpgroup-MMA
 * launch that reads each row's market window from the feature matrix, and dW1's market columns gather the same way
 * (split over the samples, summed in split order). The variants (1: blocks; 2, 3: clusters of two, four sharing each
 * W slice) must train as the paired layout does: the same losses within bf16 tolerance, and an update of the weights
 * that differs from the paired one's by a tenth of the update at most (a wrong dW1 tile, mask row or s' row
 * would move W1 by the order of the update); so must the transposed dW1 tile (FH_L1G_DW_SWAP=1, hidden1 a multiple of
 * 256). The shapes the kernels take: window F a multiple of 256, hidden1 a multiple of 128.
 */
import { describe, expect, test } from 'vitest';
import type { FhConfig } from '../../src/native/binding.js';
import { loadNative } from '../../src/native/binding.js';
import type { RunConfig } from '../../src/config/schema.js';
import { expectEpochLossesClose } from './driver.js';
import { info, market, nativeConfig, nativeMarket, params, runEpoch, tinyConfig, withEnv, withTrainer } from '../native/helpers.js';

function cudaConfig(cfg: RunConfig, overrides: Partial<FhConfig> = {}): FhConfig {
  // hard target copies (the target cache needs them; the paired layout needs the cache), bf16 mode
  return nativeConfig(cfg, { backend: 1, use_graphs: 1, deterministic: 0, target_update_every: 3, tau: 0, ...overrides });
}

describe('the gathering first layer', () => {
  // a window of 16 bars of 16 features (256 market columns), hidden1 128 or 256; short episodes, so that some samples
  // of every batch end inside the n steps (their s' rows differ from the paired layout's, and the loss must not read
  // them)
  const base = { FH_TARGET_CACHE: '1', FH_PAIRED: undefined, FH_L1_GATHER: undefined, FH_L1G_DW_SWAP: undefined };
  const norm = (a: Float32Array, b: Float32Array) => Math.sqrt(a.reduce((t, x, i) => t + (x - (b[i] ?? NaN)) ** 2, 0));

  // [FH_L1_GATHER, FH_L1G_DW_SWAP, hidden1]: the three forward variants, and the transposed dW1 tile (hidden1 256)
  const cases: [string, string | undefined, number][] = [['1', undefined, 128], ['2', undefined, 128],
    ['3', undefined, 128], ['1', '1', 256]];
  for (const [variant, swap, hidden1] of cases) {
    const name = `variant ${variant}${swap ? ', dW1 transposed' : ''}`;
    test(`${name}: the paired layout's losses and, within a tenth, its update`, () => {
      const c = tinyConfig(['agent.atoms=51', 'env.episode_len=12', 'env.window=16', `agent.hidden1=${hidden1}`]);
      const mc = nativeMarket(market(c));
      // lr 1e-6: the bf16 shadows the forwards read stay the initial weights, so both runs train on (nearly) the same
      // batches and their losses differ only by layer 1's sums taken in another order, while the fp32 weights move
      // by Adam's update, a smooth function of the gradients: a wrong dW1 tile, mask row or s' row would change
      // W1's part of it by the order of the part itself
      const gpu = loadNative('cuda');
      const run = (l1g: string | undefined) =>
        withEnv({ ...base, FH_L1_GATHER: l1g, FH_L1G_DW_SWAP: swap }, () =>
          withTrainer(gpu, cudaConfig(c, { lr: 1e-6 }), mc, (h) => {
            const engine = info(gpu, h).engine;
            const before = params(gpu, h, 0);
            const stats = [runEpoch(gpu, h)];
            return { engine, before, after: params(gpu, h, 0), stats };
          }));
      const on = run(variant);
      const off = run(undefined);
      expect(on.engine).toContain('L1 gathering (');
      expect(on.engine).toContain({ '1': '(blocks', '2': 'clusters of two', '3': 'clusters of four' }[variant]);
      if (swap) expect(on.engine).toContain('splits transposed)');
      else expect(on.engine).not.toContain('transposed');
      expect(off.engine).toContain("paired s/s'");
      expect(off.engine).not.toContain('L1 gathering');
      for (const s of on.stats) expect(s.host_syncs).toBe(1);
      expectEpochLossesClose(on.stats, off.stats, 2e-3);
      expect(norm(on.before, off.before), 'same initial weights').toBe(0);
      const update = norm(off.after, off.before);
      expect(update).toBeGreaterThan(0);
      expect(norm(on.after, off.after), `|w - w_paired| against the update ${update}`).toBeLessThan(0.1 * update);
    });
  }

  test('a shape the kernels do not take leaves the paired layout on and says why', () => {
    const gpu = loadNative('cuda');
    const odd = tinyConfig(['agent.atoms=51', 'env.episode_len=12', 'env.window=8']); // 128 market columns
    withEnv({ ...base, FH_L1_GATHER: '1' }, () => withTrainer(gpu, cudaConfig(odd), nativeMarket(market(odd)), (h) => {
      const engine = info(gpu, h).engine;
      expect(engine).toContain("paired s/s'");
      expect(engine).toContain('L1 gathering off');
      expect(engine).not.toContain('L1 gathering (');
      expect(Number.isFinite(runEpoch(gpu, h).loss_mean)).toBe(true);
    }));
  });
});
