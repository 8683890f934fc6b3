import { describe, expect, it } from 'vitest';
import { parseRunConfig } from '../../src/config/load.js';
import { makeSplit, walkForwardSplits } from '../../src/data/split.js';
import { generateSynthetic } from '../../src/data/synthetic.js';
import type { Bars } from '../../src/data/types.js';
import { sliceBars } from '../../src/data/types.js';
import { evaluatePolicy } from '../../src/env/evaluate.js';
import type { Policy } from '../../src/env/evaluate.js';
import { actionForTarget, envParams, marketView, resolveRewardScale } from '../../src/env/reference.js';
import { ATR_PERIOD, wilderAtr } from '../../src/features/atr.js';
import { prepareMarket } from '../../src/features/prepare.js';
import { applyNormaliser, CLIP, computeRawV1, fitNormaliser, N_FEATURES_V1 } from '../../src/features/v1.js';

const F = N_FEATURES_V1;
const syn = (market: 'null' | 'edge', days: number, seed = 1): Bars =>
  generateSynthetic(parseRunConfig({ data: { synthetic: { market, days, bars_per_day: 390, seed } } }).data.synthetic, { tick_size: 0.25, symbol: 'ES' }).bars;

/** A copy of the bars with everything after bar t replaced by another market's bars. */
function changedAfter(b: Bars, other: Bars, t: number): Bars {
  const c = sliceBars(b, 0, b.close.length);
  for (const k of ['open', 'high', 'low', 'close', 'volume'] as const) c[k].set(other[k].subarray(t + 1), t + 1);
  return c;
}

describe('features v1', () => {
  const bars = syn('null', 6);
  const other = syn('edge', 6, 99);
  const t = 1000;

  it('ATR: Wilder(14), the mean of true ranges for the first bars, floored at a tick', () => {
    const atr = wilderAtr(bars, 0.25);
    const tr = (i: number): number => i === 0 ? bars.high[0]! - bars.low[0]!
      : Math.max(bars.high[i]! - bars.low[i]!, Math.abs(bars.high[i]! - bars.close[i - 1]!), Math.abs(bars.low[i]! - bars.close[i - 1]!));
    expect(atr[2]).toBeCloseTo(Math.max(0.25, (tr(0) + tr(1) + tr(2)) / 3), 12);
    let raw = 0;
    for (let i = 0; i < ATR_PERIOD; i++) raw += tr(i);
    raw /= ATR_PERIOD;
    raw = (13 * raw + tr(ATR_PERIOD)) / 14;
    expect(atr[ATR_PERIOD]).toBeCloseTo(Math.max(raw, 0.25), 12);
    expect(Math.min(...atr)).toBeGreaterThanOrEqual(0.25);
  });

  it('no look-ahead: changing bars after t leaves features (and ATR) up to t unchanged', () => {
    const changed = changedAfter(bars, other, t);
    const a0 = wilderAtr(bars, 0.25);
    const a1 = wilderAtr(changed, 0.25);
    expect([...a1.subarray(0, t + 1)]).toEqual([...a0.subarray(0, t + 1)]);
    const f0 = computeRawV1(bars, a0);
    const f1 = computeRawV1(changed, a1);
    expect([...f1.subarray(0, (t + 1) * F)]).toEqual([...f0.subarray(0, (t + 1) * F)]);
    expect([...f1.subarray((t + 1) * F, (t + 2) * F)]).not.toEqual([...f0.subarray((t + 1) * F, (t + 2) * F)]);
    // the same normaliser applied to both keeps it that way
    const norm = fitNormaliser(f0, F, 0, 500);
    expect([...applyNormaliser(f1, F, norm).subarray(0, (t + 1) * F)]).toEqual([...applyNormaliser(f0, F, norm).subarray(0, (t + 1) * F)]);
  });

  it('the leak canary does look ahead (so the test above can fail)', () => {
    const changed = changedAfter(bars, other, t);
    const f0 = computeRawV1(bars, wilderAtr(bars, 0.25), true);
    const f1 = computeRawV1(changed, wilderAtr(changed, 0.25), true);
    expect(f1[t * F]).not.toBe(f0[t * F]);
    expect(f0[t * F]).toBeCloseTo(Math.log(bars.close[t + 1]! / bars.close[t]!), 12);
  });

  it('the normaliser is fit on the train range only', () => {
    const trainEnd = 1200;
    const raw = computeRawV1(bars, wilderAtr(bars, 0.25));
    const changed = changedAfter(bars, other, trainEnd - 1);
    const rawChanged = computeRawV1(changed, wilderAtr(changed, 0.25));
    const n0 = fitNormaliser(raw, F, 0, trainEnd);
    const n1 = fitNormaliser(rawChanged, F, 0, trainEnd);
    expect([...n1.mean]).toEqual([...n0.mean]);
    expect([...n1.std]).toEqual([...n0.std]);
    // on the train range the unclipped z-scores have mean ~0 and std ~1
    const z = applyNormaliser(raw, F, n0);
    for (const f of [0, 6, 13]) {
      let s = 0; let ss = 0;
      for (let i = 0; i < trainEnd; i++) { s += z[i * F + f]!; ss += z[i * F + f]! ** 2; }
      expect(Math.abs(s / trainEnd)).toBeLessThan(0.05);
      expect(Math.abs(ss / trainEnd - 1)).toBeLessThan(0.1);
    }
    expect(z.reduce((a, v) => Math.max(a, Math.abs(v)), 0)).toBeLessThanOrEqual(CLIP);
    // a norm window fits on the last bars of train only
    const nw = fitNormaliser(raw, F, 0, trainEnd, 100);
    expect([nw.fitBegin, nw.fitEnd]).toEqual([trainEnd - 100, trainEnd]);
  });

  it('leak canary makes the validation Sharpe jump on the null market; without it, none', () => {
    const base = { data: { synthetic: { market: 'null', days: 30, bars_per_day: 390 } }, split: { embargo_bars: 390 }, env: { window: 4 } };
    const sharpeOf = (leak: boolean): number => {
      const cfg = parseRunConfig({ ...base, features: { leak_canary: leak } });
      const pm = prepareMarket(cfg);
      const m = marketView(pm);
      const p = envParams(cfg, resolveRewardScale(cfg, pm.atr, pm.split.trainBegin, pm.split.trainEnd));
      const long = actionForTarget(p, 1);
      const short = actionForTarget(p, -1);
      // trade the sign of feature 0 of the newest row of the observation
      const policy: Policy = {
        needsObs: true,
        act(obs, _c, n, out) {
          const D = p.window * pm.nFeatures + 8;
          for (let e = 0; e < n; e++) {
            const x = obs![e * D + (p.window - 1) * pm.nFeatures]!;
            const a = x > 0 ? long : short;
            out[3 * e] = a[0]; out[3 * e + 1] = a[1]; out[3 * e + 2] = 0;
          }
        },
      };
      return evaluatePolicy(m, p, pm.split, policy, { segments: 4, initialCapital: 1e5 }).metrics.sharpe ?? 0;
    };
    expect(sharpeOf(true)).toBeGreaterThan(20);
    expect(sharpeOf(false)).toBeLessThan(2);
  });
});

describe('splits', () => {
  it('train, embargo, validation by time, validation on a session open', () => {
    const b = syn('null', 20);
    const cfg = parseRunConfig({ split: { val_fraction: 0.2, embargo_bars: 390 } }).split;
    const s = makeSplit(b.close.length, cfg, b.sessionStart, 10);
    expect(s.trainBegin).toBe(0);
    expect(s.valEnd).toBe(b.close.length);
    expect(b.sessionStart[s.valBegin]).toBe(1);
    expect(s.valBegin - s.trainEnd).toBe(390);
    expect(s.valEnd - s.valBegin).toBe(4 * 390);
    const withTest = makeSplit(b.close.length, { val_fraction: 0.2, test_fraction: 0.1, embargo_bars: 390 }, b.sessionStart, 10);
    expect(withTest.testEnd).toBe(b.close.length);
    expect(withTest.testBegin! - withTest.valEnd).toBeGreaterThanOrEqual(390);
    expect(withTest.valBegin - withTest.trainEnd).toBe(390);
  });

  it('a split that leaves no train range fails naming the field', () => {
    expect(() => makeSplit(1000, { val_fraction: 0.5, test_fraction: 0, embargo_bars: 600 }, undefined, 10))
      .toThrow(expect.objectContaining({ code: 'CONFIG_INVALID', where: 'split.embargo_bars' }));
  });

  it('walk-forward folds: expanding train, contiguous validation blocks, embargo between', () => {
    const folds = walkForwardSplits(1000, 3, 0.1, 20);
    expect(folds.map((f) => [f.trainEnd, f.valBegin, f.valEnd])).toEqual([[680, 700, 800], [780, 800, 900], [880, 900, 1000]]);
  });
});
