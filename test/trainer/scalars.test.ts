import { describe, expect, it } from 'vitest';
import { flattenScalars, formatEpochHeader, formatEpochRow, METRIC_NAMES } from '../../src/trainer/scalars.js';
import type { EpochStats, Metrics } from '../../src/trainer/scalars.js';

function metrics(seed: number): Metrics {
  return {
    sharpe: seed + 0.5, sortino: seed + 0.25, max_dd: 100 * seed, max_dd_pct: seed / 10, profit_factor: 1 + seed / 10,
    total_pnl: 1000 * seed, trades: 10 + seed, win_rate: 0.5, turnover: 0.01, sessions: 20,
  };
}

function stats(): EpochStats {
  return {
    epoch: 3, global_step: 192, env_steps: 9600, loss_mean: 0.123, loss_last: 0.1, grad_norm_mean: 2.5, grad_norm_max: 7,
    q_avg_max: 0.42, q_min: -1, q_max: 1, q_mean: 0.1, q_var: 0.05, epsilon: 0.6, beta: 0.41, batch_size: 64,
    replay_size: 9600, val: metrics(1), flat: metrics(2), buy_hold: metrics(3), collect_ms: 12.5, train_ms: 40.25,
    eval_ms: 3.75, total_ms: 56.5, env_steps_per_s: 256000, samples_per_s: 102400, host_syncs: 0,
  };
}

const DESIGN_NAMES = [
  'epoch', 'step/global', 'step/env', 'loss/mean', 'loss/last', 'grad/norm_mean', 'grad/norm_max',
  'q/avg_max', 'q/min', 'q/max', 'q/mean', 'q/var', 'explore/epsilon', 'per/beta', 'train/batch_size', 'replay/size',
  ...['val', 'flat', 'bh'].flatMap((p) => ['sharpe', 'sortino', 'max_dd', 'max_dd_pct', 'profit_factor', 'total_pnl',
    'trades', 'win_rate', 'turnover', 'sessions'].map((m) => `${p}/${m}`)),
  'time/collect_ms', 'time/train_ms', 'time/eval_ms', 'time/total_ms', 'perf/env_steps_per_s', 'perf/samples_per_s', 'perf/host_syncs',
];

describe('flattenScalars', () => {
  it('gives exactly the DESIGN §7 names', () => {
    expect(Object.keys(flattenScalars(stats())).sort()).toEqual([...DESIGN_NAMES].sort());
    expect(METRIC_NAMES.length).toBe(10);
  });

  it('carries values to the right names', () => {
    const s = flattenScalars(stats());
    expect(s['epoch']).toBe(3);
    expect(s['loss/mean']).toBe(0.123);
    expect(s['val/sharpe']).toBe(1.5);
    expect(s['flat/total_pnl']).toBe(2000);
    expect(s['bh/trades']).toBe(13);
    expect(s['time/train_ms']).toBe(40.25);
    expect(s['perf/host_syncs']).toBe(0);
  });

  it('turns NaN and Inf into null', () => {
    const st = stats();
    st.loss_mean = Number.NaN;
    st.val.sharpe = Number.POSITIVE_INFINITY;
    st.val.profit_factor = null;
    const s = flattenScalars(st);
    expect(s['loss/mean']).toBeNull();
    expect(s['val/sharpe']).toBeNull();
    expect(s['val/profit_factor']).toBeNull();
    expect(JSON.parse(JSON.stringify(s))['loss/mean']).toBeNull();
  });
});

describe('epoch table', () => {
  it('aligns row cells under the header and shows the key values', () => {
    const header = formatEpochHeader();
    const row = formatEpochRow(stats());
    expect(row.length).toBe(header.length);
    expect(header.split(/\s+/).filter(Boolean)).toEqual(
      ['epoch', 'loss', 'gnorm', 'avgmaxQ', 'eps', 'valSharpe', 'PF(trades)', 'maxDD$', 'PnL$', 'coll_ms', 'train_ms', 'eval_ms', 'steps/s']);
    const cells = row.trim().split(/\s+/);
    expect(cells[0]).toBe('3');
    expect(cells[5]).toBe('1.50');
    expect(cells[6]).toBe('1.10(11)');
    expect(cells[8]).toBe('1000');
    expect(cells[12]).toBe('256.0k');
    expect(formatEpochRow(flattenScalars(stats()))).toBe(row);
  });

  it('prints "-" for null metrics', () => {
    const st = stats();
    st.val.sharpe = null;
    expect(formatEpochRow(st).trim().split(/\s+/)[5]).toBe('-');
  });
});
