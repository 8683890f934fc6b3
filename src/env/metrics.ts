/**
 * Validation metrics (SPEC §6, `fh_metrics` in foxhunt.h). `null` where the native side writes NaN:
 * Sharpe with < 2 sessions or zero std, Sortino with no losing session, profit factor with no
 * gross loss, win rate with no trade.
 */

export interface Metrics {
  sharpe: number | null;
  sortino: number | null;
  max_dd: number;
  max_dd_pct: number;
  profit_factor: number | null;
  total_pnl: number;
  trades: number;
  win_rate: number | null;
  turnover: number;
  sessions: number;
}

/** What a simulated policy accumulated, from which the metrics follow. */
export interface PnlRecord {
  /** $ PnL per session, in time order (sessions with no PnL included as 0). */
  sessionPnl: ArrayLike<number>;
  /** $ PnL of each step (and end-of-segment flatten) in time order: the equity path. */
  stepPnl: ArrayLike<number>;
  tradesClosed: number;
  tradesWon: number;
  grossProfit: number;
  grossLoss: number; // >= 0
  contractsTraded: number;
  bars: number;
  initialCapital: number;
}

const ANNUAL = Math.sqrt(252);

/** Per-session mean / std (ddof 1) × √252; null with < 2 sessions or zero std. */
export function sharpe(x: ArrayLike<number>): number | null {
  const n = x.length;
  if (n < 2) return null;
  let sum = 0;
  for (let i = 0; i < n; i++) sum += x[i] as number;
  const mean = sum / n;
  let ss = 0;
  for (let i = 0; i < n; i++) ss += ((x[i] as number) - mean) * ((x[i] as number) - mean);
  const std = Math.sqrt(ss / (n - 1));
  if (!(std > 0)) return null;
  return (mean / std) * ANNUAL;
}

/** mean / sqrt(mean(min(x, 0)²)) × √252; null with no losing session (or no session). */
export function sortino(x: ArrayLike<number>): number | null {
  const n = x.length;
  if (n === 0) return null;
  let sum = 0;
  let down = 0;
  for (let i = 0; i < n; i++) {
    const v = x[i] as number;
    sum += v;
    if (v < 0) down += v * v;
  }
  if (!(down > 0)) return null;
  return (sum / n / Math.sqrt(down / n)) * ANNUAL;
}

/** Max drawdown of the cumulative PnL path starting at 0: [$ (>= 0), % of (capital + peak)]. */
export function maxDrawdown(stepPnl: ArrayLike<number>, initialCapital: number): [number, number] {
  let equity = 0;
  let peak = 0;
  let dd = 0;
  let ddPct = 0;
  for (let i = 0; i < stepPnl.length; i++) {
    equity += stepPnl[i] as number;
    if (equity > peak) peak = equity;
    const d = peak - equity;
    if (d > dd) dd = d;
    const pct = (d / (initialCapital + peak)) * 100;
    if (pct > ddPct) ddPct = pct;
  }
  return [dd, ddPct];
}

export function computeMetrics(r: PnlRecord): Metrics {
  let total = 0;
  for (let i = 0; i < r.stepPnl.length; i++) total += r.stepPnl[i] as number;
  const [dd, ddPct] = maxDrawdown(r.stepPnl, r.initialCapital);
  return {
    sharpe: sharpe(r.sessionPnl),
    sortino: sortino(r.sessionPnl),
    max_dd: dd,
    max_dd_pct: ddPct,
    profit_factor: r.grossLoss > 0 ? r.grossProfit / r.grossLoss : null,
    total_pnl: total,
    trades: r.tradesClosed,
    win_rate: r.tradesClosed > 0 ? r.tradesWon / r.tradesClosed : null,
    turnover: r.bars > 0 ? r.contractsTraded / r.bars : 0,
    sessions: r.sessionPnl.length,
  };
}

export const METRIC_NAMES = [
  'sharpe', 'sortino', 'max_dd', 'max_dd_pct', 'profit_factor', 'total_pnl', 'trades', 'win_rate', 'turnover', 'sessions',
] as const satisfies readonly (keyof Metrics)[];
