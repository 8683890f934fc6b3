import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { parseRunConfig } from '../../src/config/load.js';
import type { RunConfig } from '../../src/config/schema.js';
import { makeSplit } from '../../src/data/split.js';
import { generateSynthetic, oracleTargets } from '../../src/data/synthetic.js';
import type { Bars } from '../../src/data/types.js';
import { evaluateWithBaselines, targetPolicy } from '../../src/env/evaluate.js';
import { envParams, resolveRewardScale } from '../../src/env/reference.js';
import type { MarketView } from '../../src/env/reference.js';
import { wilderAtr } from '../../src/features/atr.js';

function cfgFor(market: 'null' | 'edge' | 'intraday', seed: number, days: number, over: object = {}): RunConfig {
  return parseRunConfig({
    data: { synthetic: { market, seed, days, bars_per_day: 390 } },
    split: { embargo_bars: 390 },
    env: { window: 8 },
    ...over,
  });
}

function hashBars(b: Bars): string {
  const h = createHash('sha256');
  for (const a of [b.ts, b.open, b.high, b.low, b.close, b.volume, b.sessionStart]) h.update(Buffer.from(a.buffer, a.byteOffset, a.byteLength));
  return h.digest('hex');
}

/** Evaluate a target function of the bar cursor on the validation range of a synthetic market. */
function run(cfg: RunConfig, target: (b: Bars, regime: Int8Array) => (t: number) => number) {
  const { bars, regime } = generateSynthetic(cfg.data.synthetic, cfg.instrument);
  const atr = wilderAtr(bars, cfg.instrument.tick_size);
  const split = makeSplit(bars.close.length, cfg.split, bars.sessionStart, cfg.env.window + 2);
  const m: MarketView = {
    features: new Float32Array(bars.close.length), nFeatures: 1, open: bars.open, high: bars.high, low: bars.low,
    close: bars.close, atr, sessionStart: bars.sessionStart, nBars: bars.close.length, trainBegin: split.trainBegin, trainEnd: split.trainEnd,
  };
  const p = envParams(cfg, resolveRewardScale(cfg, atr, split.trainBegin, split.trainEnd));
  return evaluateWithBaselines(m, p, split, targetPolicy(p, target(bars, regime)), { segments: 8, initialCapital: 1e5 });
}

const momentum = (lookback: number, minMove: number) => (b: Bars) => (t: number): number => {
  const d = (b.close[t] as number) - (b.close[Math.max(0, t - lookback)] as number);
  return Math.abs(d) < minMove ? 0 : Math.sign(d);
};

describe('synthetic markets', () => {
  it('are deterministic in their seed and differ across seeds and markets', () => {
    const a = generateSynthetic(cfgFor('edge', 3, 5).data.synthetic, { tick_size: 0.25, symbol: 'ES' });
    const b = generateSynthetic(cfgFor('edge', 3, 5).data.synthetic, { tick_size: 0.25, symbol: 'ES' });
    const c = generateSynthetic(cfgFor('edge', 4, 5).data.synthetic, { tick_size: 0.25, symbol: 'ES' });
    const d = generateSynthetic(cfgFor('null', 3, 5).data.synthetic, { tick_size: 0.25, symbol: 'ES' });
    expect(hashBars(a.bars)).toBe(hashBars(b.bars));
    expect([...a.regime]).toEqual([...b.regime]);
    expect(hashBars(c.bars)).not.toBe(hashBars(a.bars));
    expect(hashBars(d.bars)).not.toBe(hashBars(a.bars));
  });

  for (const market of ['null', 'edge', 'intraday'] as const) {
    it(`${market}: valid bars on the tick grid, sessions of bars_per_day with a gap between`, () => {
      const { bars } = generateSynthetic(parseRunConfig({ data: { synthetic: { market, days: 6, bars_per_day: 1380 } } }).data.synthetic, { tick_size: 0.25, symbol: 'ES' });
      expect(bars.close.length).toBe(6 * 1380);
      let sessions = 0;
      const bad: string[] = [];
      for (let i = 0; i < bars.close.length; i++) {
        const [o, h, l, c] = [bars.open[i]!, bars.high[i]!, bars.low[i]!, bars.close[i]!];
        if (![o, h, l, c].every((v) => Number.isInteger(v / 0.25))) bad.push(`${i}: off the tick grid`);
        if (h < Math.max(o, c) || l > Math.min(o, c) || !(l > 0)) bad.push(`${i}: bad OHLC ${o} ${h} ${l} ${c}`);
        if (!(bars.volume[i]! >= 0)) bad.push(`${i}: volume`);
        if (bars.sessionStart[i] === 1) {
          sessions++;
          if (i > 0 && bars.ts[i]! - bars.ts[i - 1]! <= 30n * 60_000_000_000n) bad.push(`${i}: session without a gap`);
        } else {
          if (bars.ts[i]! - bars.ts[i - 1]! !== 60_000_000_000n) bad.push(`${i}: not one minute after the previous bar`);
          if (bars.open[i] !== bars.close[i - 1]) bad.push(`${i}: intra-session gap`);
        }
      }
      expect(bad.slice(0, 5)).toEqual([]);
      expect(sessions).toBe(6);
    });
  }

  it('intraday: volatility smile (open and close busier than midday)', () => {
    const { bars } = generateSynthetic(cfgFor('intraday', 1, 30).data.synthetic, { tick_size: 0.25, symbol: 'ES' });
    let edge = 0; let edgeN = 0; let mid = 0; let midN = 0;
    for (let i = 0; i < bars.close.length; i++) {
      const m = i % 390;
      const r = (bars.close[i]! - bars.open[i]!) ** 2;
      if (m < 40 || m >= 350) { edge += r; edgeN++; } else if (m >= 175 && m < 215) { mid += r; midN++; }
    }
    expect(edge / edgeN).toBeGreaterThan(3 * (mid / midN));
  });

  it('edge: the documented oracle earns a clearly positive after-cost validation Sharpe; momentum captures part', () => {
    const r = run(cfgFor('edge', 1, 60), (_b, regime) => {
      const o = oracleTargets(regime, 1);
      return (t) => o[t]!;
    });
    expect(r.val.sharpe).not.toBeNull();
    expect(r.val.sharpe!).toBeGreaterThan(5);
    expect(r.val.total_pnl).toBeGreaterThan(0);
    expect(r.val.trades).toBeGreaterThan(20);
    const mom = run(cfgFor('edge', 1, 60), momentum(30, 2));
    expect(mom.val.sharpe!).toBeGreaterThan(1);
    expect(mom.val.sharpe!).toBeLessThan(r.val.sharpe!);
  });

  it('null: no edge. Momentum before costs averages ~0 over seeds and loses after costs', () => {
    const sharpes: number[] = [];
    for (let seed = 1; seed <= 8; seed++) {
      const free = run(cfgFor('null', seed, 60, { instrument: { commission: 0, slippage_ticks: 0 } }), momentum(30, 2));
      sharpes.push(free.val.sharpe ?? 0);
      const paid = run(cfgFor('null', seed, 60), momentum(30, 2));
      expect(paid.val.total_pnl).toBeLessThan(free.val.total_pnl);
      expect(paid.val.sharpe!).toBeLessThan(1);
    }
    // 12 validation sessions per seed: one seed's Sharpe has sd ~ sqrt(252/12) ~ 4.6; the mean of 8 ~ 1.6
    const mean = sharpes.reduce((a, b) => a + b, 0) / sharpes.length;
    expect(Math.abs(mean)).toBeLessThan(5);
    // and the oracle of a null market (no regime) is flat
    const o = run(cfgFor('null', 1, 20), (_b, regime) => (t) => regime[t]!);
    expect(o.val.trades).toBe(0);
  });
});
