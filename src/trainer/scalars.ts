/**
 * Epoch scalars: `EpochStats` (the TS mirror of fh_epoch_stats, NaN → null), `flattenScalars` (the
 * namespaced names of DESIGN.md §7, posted to Redis and charted), and the one-line-per-epoch table
 * used by `foxhunt train`, `foxhunt show` and the demo.
 */

/** fh_metrics with "null" metrics (NaN on the C side) as null. */
export interface Metrics {
  sharpe: number | null;
  sortino: number | null;
  max_dd: number | null;
  max_dd_pct: number | null;
  profit_factor: number | null;
  total_pnl: number | null;
  trades: number | null;
  win_rate: number | null;
  turnover: number | null;
  sessions: number | null;
}

export const METRIC_NAMES = [
  'sharpe', 'sortino', 'max_dd', 'max_dd_pct', 'profit_factor', 'total_pnl', 'trades', 'win_rate', 'turnover', 'sessions',
] as const satisfies readonly (keyof Metrics)[];

/** One epoch as fh_epoch_stats reports it (field names as in C, metric names as in the scalars). */
export interface EpochStats {
  epoch: number;
  global_step: number;
  env_steps: number;
  loss_mean: number | null;
  loss_last: number | null;
  grad_norm_mean: number | null;
  grad_norm_max: number | null;
  q_avg_max: number | null;
  q_min: number | null;
  q_max: number | null;
  q_mean: number | null;
  q_var: number | null;
  epsilon: number | null;
  beta: number | null;
  batch_size: number;
  replay_size: number;
  val: Metrics;
  flat: Metrics;
  buy_hold: Metrics;
  collect_ms: number;
  train_ms: number;
  eval_ms: number;
  total_ms: number;
  env_steps_per_s: number | null;
  samples_per_s: number | null;
  host_syncs: number;
}

/** A finite number or null (NaN and ±Inf become null, which JSON and Redis carry). */
export function finiteOrNull(v: unknown): number | null {
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

/** Flattened scalars: `name → value` with null for "no value". */
export type Scalars = Record<string, number | null>;

/** The namespaced scalar names of DESIGN.md §7, in a stable order. */
export function flattenScalars(s: EpochStats): Scalars {
  const out: Scalars = {
    'epoch': s.epoch,
    'step/global': s.global_step,
    'step/env': s.env_steps,
    'loss/mean': s.loss_mean,
    'loss/last': s.loss_last,
    'grad/norm_mean': s.grad_norm_mean,
    'grad/norm_max': s.grad_norm_max,
    'q/avg_max': s.q_avg_max,
    'q/min': s.q_min,
    'q/max': s.q_max,
    'q/mean': s.q_mean,
    'q/var': s.q_var,
    'explore/epsilon': s.epsilon,
    'per/beta': s.beta,
    'train/batch_size': s.batch_size,
    'replay/size': s.replay_size,
  };
  for (const [prefix, m] of [['val', s.val], ['flat', s.flat], ['bh', s.buy_hold]] as const) {
    for (const name of METRIC_NAMES) out[`${prefix}/${name}`] = m[name];
  }
  out['time/collect_ms'] = s.collect_ms;
  out['time/train_ms'] = s.train_ms;
  out['time/eval_ms'] = s.eval_ms;
  out['time/total_ms'] = s.total_ms;
  out['perf/env_steps_per_s'] = s.env_steps_per_s;
  out['perf/samples_per_s'] = s.samples_per_s;
  out['perf/host_syncs'] = s.host_syncs;
  for (const [k, v] of Object.entries(out)) out[k] = finiteOrNull(v);
  return out;
}

/* ---------------------------------------------------------------------------------------------
 * The per-epoch table
 * ------------------------------------------------------------------------------------------- */

interface Column {
  title: string;
  width: number;
  cell(s: Scalars): string;
}

function num(v: number | null | undefined, digits: number): string {
  return v === null || v === undefined ? '-' : v.toFixed(digits);
}

/** Compact magnitude: 1234 → 1.23k, 2.5e6 → 2.50M. */
function compact(v: number | null | undefined): string {
  if (v === null || v === undefined) return '-';
  const a = Math.abs(v);
  if (a >= 1e9) return `${(v / 1e9).toFixed(2)}G`;
  if (a >= 1e6) return `${(v / 1e6).toFixed(2)}M`;
  if (a >= 1e4) return `${(v / 1e3).toFixed(1)}k`;
  return v.toFixed(0);
}

/** Loss and gradient norms span decades: 4 significant digits. */
function sig(v: number | null | undefined): string {
  if (v === null || v === undefined) return '-';
  if (v === 0) return '0';
  const a = Math.abs(v);
  return a >= 1e4 || a < 1e-3 ? v.toExponential(2) : v.toPrecision(4);
}

const COLUMNS: readonly Column[] = [
  { title: 'epoch', width: 5, cell: (s) => num(s['epoch'], 0) },
  { title: 'loss', width: 9, cell: (s) => sig(s['loss/mean']) },
  { title: 'gnorm', width: 9, cell: (s) => sig(s['grad/norm_mean']) },
  { title: 'avgmaxQ', width: 8, cell: (s) => num(s['q/avg_max'], 3) },
  { title: 'eps', width: 5, cell: (s) => num(s['explore/epsilon'], 3) },
  { title: 'valSharpe', width: 9, cell: (s) => num(s['val/sharpe'], 2) },
  { title: 'PF(trades)', width: 12, cell: (s) => `${num(s['val/profit_factor'], 2)}(${num(s['val/trades'], 0)})` },
  { title: 'maxDD$', width: 9, cell: (s) => num(s['val/max_dd'], 0) },
  { title: 'PnL$', width: 9, cell: (s) => num(s['val/total_pnl'], 0) },
  { title: 'coll_ms', width: 8, cell: (s) => num(s['time/collect_ms'], 1) },
  { title: 'train_ms', width: 8, cell: (s) => num(s['time/train_ms'], 1) },
  { title: 'eval_ms', width: 8, cell: (s) => num(s['time/eval_ms'], 1) },
  { title: 'steps/s', width: 8, cell: (s) => compact(s['perf/env_steps_per_s']) },
];

function accepts(x: EpochStats | Scalars): x is EpochStats {
  return typeof (x as Partial<EpochStats>).val === 'object';
}

/** The header line matching `formatEpochRow`. */
export function formatEpochHeader(): string {
  return COLUMNS.map((c) => c.title.padStart(c.width)).join(' ');
}

/** One table row for an epoch, from its stats or its flattened scalars. */
export function formatEpochRow(stats: EpochStats | Scalars): string {
  const s = accepts(stats) ? flattenScalars(stats) : stats;
  return COLUMNS.map((c) => c.cell(s).padStart(c.width)).join(' ');
}
