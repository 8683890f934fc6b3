/** Plain-text tables of the sweep commands. */
import type { LeaderboardRow } from './store.js';
import type { Params } from './sampler.js';

export function fmtValue(v: unknown): string {
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) return '-';
    if (Number.isInteger(v)) return String(v);
    return Math.abs(v) >= 1e4 || Math.abs(v) < 1e-3 ? v.toExponential(3) : String(Number(v.toPrecision(4)));
  }
  return v === null || v === undefined ? '-' : String(v);
}

export function paramsCell(p: Params): string {
  return Object.keys(p).sort().map((k) => `${k}=${fmtValue(p[k])}`).join(' ');
}

export function table(head: string[], rows: string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string => cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ').trimEnd();
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n') + '\n';
}

export function leaderboardTable(rows: LeaderboardRow[], metric: string): string {
  return table(['rank', 'run', 'params', metric, 'epochs', 'status'],
    rows.map((r) => [String(r.rank), r.runId, paramsCell(r.params), fmtValue(r.metric), String(r.epochs), r.status]));
}
