/**
 * The CUDA greedy evaluation against the CPU backend (npm run test:gpu, on a GPU host): with the same
 * weights, an epoch with no training (fh_config.train_steps = 0: collect, then evaluate) reports the
 * same validation metrics on both backends, and the flat and buy-and-hold baselines are identical to
 * the bit. The CUDA side runs fp32 GEMMs (deterministic mode), so the greedy actions match unless two
 * Q values tie within float rounding; the metrics of such a run are compared exactly too.
 */
import { describe, expect, test } from 'vitest';
import { FhStatus, loadNative } from '../../src/native/binding.js';
import type { FhEpochStats, FhMetrics } from '../../src/native/binding.js';
import { create, info, market, nativeConfig, nativeMarket, rng, runEpoch, tinyConfig } from '../native/helpers.js';

const METRICS = [
  'sharpe', 'sortino', 'max_drawdown', 'max_drawdown_pct', 'profit_factor', 'total_pnl', 'trades', 'win_rate', 'turnover', 'sessions',
] as const;

function same(a: FhMetrics, b: FhMetrics): string[] {
  const diff: string[] = [];
  for (const k of METRICS) {
    const x = a[k];
    const y = b[k];
    if (!(Object.is(x, y) || (Number.isNaN(x) && Number.isNaN(y)))) diff.push(`${k}: cuda ${x} cpu ${y}`);
  }
  return diff;
}

describe('CUDA evaluation vs the CPU backend', () => {
  for (const atoms of [1, 51]) {
    test(`atoms ${atoms}: same weights -> same val, flat and buy-and-hold metrics`, () => {
      const cfg = tinyConfig([`agent.atoms=${atoms}`, 'eval.segments=8']);
      const m = nativeMarket(market(cfg));
      const cpu = loadNative('cpu');
      const gpu = loadNative('cuda');
      const hc = create(cpu, nativeConfig(cfg, { train_steps: 0 }), m);
      const hg = create(gpu, nativeConfig(cfg, { backend: 1, use_graphs: 1, deterministic: 1, train_steps: 0 }), m);
      try {
        const n = Number(info(cpu, hc).n_params);
        expect(Number(info(gpu, hg).n_params)).toBe(n);
        // random weights (scaled so the greedy policy trades), the same on both sides
        const r = rng(atoms * 17 + 1);
        const w = Float32Array.from({ length: n }, () => (r() - 0.5) * 0.2);
        for (const which of [0, 1]) {
          expect(cpu.fh_trainer_set_params(hc, which, w, n)).toBe(FhStatus.OK);
          expect(gpu.fh_trainer_set_params(hg, which, w, n)).toBe(FhStatus.OK);
        }
        const a: FhEpochStats = runEpoch(gpu, hg);
        const b: FhEpochStats = runEpoch(cpu, hc);
        expect(same(a.flat, b.flat)).toEqual([]);
        expect(same(a.buy_hold, b.buy_hold)).toEqual([]);
        expect(b.buy_hold.trades).toBeGreaterThan(0);
        expect(same(a.val, b.val)).toEqual([]);
        expect(b.val.sessions).toBeGreaterThan(2);
        expect(b.val.trades).toBeGreaterThan(0); // the greedy policy acted, so the comparison means something
      } finally {
        cpu.fh_trainer_destroy(hc);
        gpu.fh_trainer_destroy(hg);
      }
    });
  }
});
