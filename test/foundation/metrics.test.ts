import { describe, expect, it } from 'vitest';
import { buyHoldPolicy, evalSegments, evaluatePolicy, evaluateWithBaselines, flatPolicy, targetPolicy } from '../../src/env/evaluate.js';
import { computeMetrics, maxDrawdown, sharpe, sortino } from '../../src/env/metrics.js';
import { esParams, handMarket } from './helpers.js';

const SQRT252 = Math.sqrt(252);

describe('metrics, hand-computed', () => {
  it('Sharpe: mean/std ddof 1 x sqrt(252); null with zero std or < 2 sessions', () => {
    expect(sharpe([1, 2, 3])).toBeCloseTo(2 * SQRT252, 12);
    expect(sharpe([5, 5, 5])).toBeNull();
    expect(sharpe([3])).toBeNull();
    expect(sharpe([])).toBeNull();
    expect(sharpe([-1, -3])).toBeCloseTo((-2 / Math.SQRT2) * SQRT252, 12);
  });

  it('Sortino: mean / sqrt(mean(min(x,0)^2)); null without a losing session', () => {
    expect(sortino([1, -1, 3])).toBeCloseTo(Math.sqrt(3) * SQRT252, 12);
    expect(sortino([1, 2])).toBeNull();
  });

  it('drawdown in $ and % of capital + peak', () => {
    const [dd, pct] = maxDrawdown([100, -50, -100, 200, -30], 1000);
    expect(dd).toBe(150);
    expect(pct).toBeCloseTo((150 / 1100) * 100, 12);
    expect(maxDrawdown([-10, 5], 100)).toEqual([10, 10]);
    expect(maxDrawdown([], 100)).toEqual([0, 0]);
  });

  it('profit factor null with no losing trade, win rate null with no trade', () => {
    const base = { sessionPnl: [10, 20], stepPnl: [10, 20], contractsTraded: 4, bars: 8, initialCapital: 1e5 };
    const m = computeMetrics({ ...base, tradesClosed: 2, tradesWon: 2, grossProfit: 30, grossLoss: 0 });
    expect(m.profit_factor).toBeNull();
    expect(m.trades).toBe(2);
    expect(m.win_rate).toBe(1);
    expect(m.turnover).toBe(0.5);
    const m2 = computeMetrics({ ...base, tradesClosed: 3, tradesWon: 1, grossProfit: 30, grossLoss: 12 });
    expect(m2.profit_factor).toBe(2.5);
    expect(m2.win_rate).toBeCloseTo(1 / 3, 15);
    const m3 = computeMetrics({ ...base, tradesClosed: 0, tradesWon: 0, grossProfit: 0, grossLoss: 0 });
    expect(m3.win_rate).toBeNull();
    expect(m3.total_pnl).toBe(30);
    expect(m3.sessions).toBe(2);
  });
});

describe('evaluation over the validation range', () => {
  // two sessions of three bars
  const m = handMarket({
    open: [100, 100.5, 101.5, 104, 105, 104.5],
    close: [100, 101, 102, 105, 104, 106],
    high: [101, 102, 103, 106, 106, 107],
    low: [99, 100, 101, 103, 103, 104],
    sessionStart: [1, 0, 0, 1, 0, 0],
  });
  const p = esParams();
  const split = { valBegin: 0, valEnd: 6 };

  it('buy-and-hold, one segment: per-session PnL, trades, drawdown, turnover', () => {
    const r = evaluatePolicy(m, p, split, buyHoldPolicy(p), { segments: 1, initialCapital: 1e5 });
    // session A: buy 100.75 (-14.75) + 25, then 25 + 25 -> 60.25
    // session B: flatten at 102 (-14.75), rebuy 104.25 (-14.75) + 50, then -50, then 25 + 75, flatten -14.75 -> 55.75
    expect([...r.sessionPnl]).toEqual([60.25, 55.75]);
    const mt = r.metrics;
    expect(mt.total_pnl).toBe(116);
    expect(mt.trades).toBe(2);
    expect(mt.win_rate).toBe(1);
    expect(mt.profit_factor).toBeNull();
    expect(mt.max_dd).toBe(50);
    expect(mt.turnover).toBeCloseTo(4 / 6, 15);
    expect(mt.sessions).toBe(2);
    expect(mt.sharpe).toBeCloseTo((58 / Math.sqrt(2 * 2.25 ** 2)) * SQRT252, 10);
  });

  it('flat earns nothing and has null ratios', () => {
    const mt = evaluatePolicy(m, p, split, flatPolicy(p), { segments: 2, initialCapital: 1e5 }).metrics;
    expect(mt).toMatchObject({ sharpe: null, sortino: null, profit_factor: null, win_rate: null, total_pnl: 0, trades: 0, max_dd: 0, turnover: 0 });
  });

  it('a single session gives a null Sharpe', () => {
    const mt = evaluatePolicy(m, p, { valBegin: 3, valEnd: 6 }, buyHoldPolicy(p), { segments: 4, initialCapital: 1e5 }).metrics;
    expect(mt.sessions).toBe(1);
    expect(mt.sharpe).toBeNull();
    // start flat at bar 3: buy at 105.25 (-14.75) - 50, then 25 + 75, flatten -14.75
    expect(mt.total_pnl).toBe(-64.75 + 100 - 14.75);
  });

  it('cuts segments on session boundaries, each starting flat', () => {
    expect(evalSegments(m.sessionStart, 0, 6, 2)).toEqual([[0, 3], [3, 6]]);
    expect(evalSegments(m.sessionStart, 0, 6, 9)).toEqual([[0, 3], [3, 6]]);
    expect(evalSegments(m.sessionStart, 1, 6, 1)).toEqual([[1, 6]]);
    const r = evaluateWithBaselines(m, p, split, targetPolicy(p, (t) => (t === 3 ? 1 : 0)), { segments: 2, initialCapital: 1e5 });
    // one trade: at bar 3 buy at 105.25 -> mark 104: -64.75; close at 104.25 (gap +25, cost -14.75)
    expect(r.val.total_pnl).toBe(-64.75 + 25 - 14.75);
    expect(r.val.trades).toBe(1);
    expect(r.val.profit_factor).toBe(0);
    expect(r.flat.total_pnl).toBe(0);
    expect(r.buy_hold.trades).toBe(2);
  });
});
