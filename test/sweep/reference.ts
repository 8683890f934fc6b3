// Reference ASHA for tests: replays the reports at each rung in arrival order with the rule
// "continue iff fewer than ceil(n / eta) of the n trials at the rung so far are strictly better".
export type Decision = 'continue' | 'prune';

export interface Report { run: string; rung: number; metric: number | null }

export function referenceAsha(reports: readonly Report[], eta: number, goal: 'max' | 'min'): Map<string, Decision> {
  const seen = new Map<number, number[]>();
  const out = new Map<string, Decision>();
  for (const r of reports) {
    const score = r.metric === null ? -Infinity : goal === 'max' ? r.metric : -r.metric;
    const at = seen.get(r.rung) ?? [];
    at.push(score);
    seen.set(r.rung, at);
    const better = at.filter((s) => s > score).length;
    out.set(`${r.run}:${r.rung}`, better < Math.ceil(at.length / eta) ? 'continue' : 'prune');
  }
  return out;
}
