/**
 * Server-rendered pages. Each page has a live part (`#live`) that the page's script refreshes by
 * fetching the same URL with `?fragment=1`; run and sweep pages also draw uPlot charts from the
 * JSON API (static/app.js).
 */
import type { Role } from './auth.js';
import type { SweepView, WorkerView } from './data.js';
import type { RunRecord } from '../redis/runs.js';
import type { SweepRecord } from '../sweep/store.js';

export function esc(v: unknown): string {
  return String(v ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c);
}

function fmt(v: number | null | undefined, digits = 3): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '–';
  if (Number.isInteger(v)) return String(v);
  return Math.abs(v) >= 1000 || Math.abs(v) < 1e-3 ? v.toExponential(2) : v.toFixed(digits);
}

function age(ms: number): string {
  if (ms < 1000) return 'now';
  if (ms < 60_000) return `${Math.round(ms / 1000)} s ago`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} min ago`;
  return `${(ms / 3_600_000).toFixed(1)} h ago`;
}

function time(ms: number | null): string {
  return ms === null || !Number.isFinite(ms) || ms === 0 ? '–' : new Date(ms).toISOString().replace('T', ' ').slice(0, 19);
}

export function paramsText(p: Record<string, unknown>): string {
  return Object.keys(p).sort().map((k) => {
    const v = p[k];
    return `${k}=${typeof v === 'number' ? (Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(4)))) : String(v)}`;
  }).join(' ');
}

export interface Shell {
  title: string;
  role: Role;
  active: 'fleet' | 'runs' | 'sweeps';
  body: string;
  script?: string;
  pollMs: number;
}

export function page(s: Shell): string {
  const nav = ([['fleet', '/', 'Fleet'], ['runs', '/runs', 'Runs'], ['sweeps', '/sweeps', 'Sweeps']] as const)
    .map(([id, href, label]) => `<a href="${href}"${s.active === id ? ' class="on"' : ''}>${label}</a>`).join('');
  const queues = s.role === 'admin'
    ? '<a href="/queues">Queues</a><a href="/admin/queues">Queues (admin)</a>'
    : '<a href="/queues">Queues (read-only)</a>';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(s.title)} · foxhunt</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/static/uplot/uPlot.min.css"><link rel="stylesheet" href="/static/style.css">
</head><body data-poll-ms="${s.pollMs}">
<header><b>foxhunt fleet</b><nav>${nav}${queues}</nav><span class="role">${esc(s.role)}</span></header>
<main>${s.body}</main>
<script src="/static/uplot/uPlot.iife.min.js"></script><script src="/static/app.js"></script>
${s.script ? `<script>${s.script}</script>` : ''}
</body></html>`;
}

export interface QueueCounts { name: string; counts: Record<string, number> }

export function fleetFragment(workers: WorkerView[], queues: QueueCounts[]): string {
  const states = ['waiting', 'prioritized', 'active', 'delayed', 'failed', 'completed', 'paused'];
  const q = queues.map((x) => `<tr><td>${esc(x.name)}</td>${states.map((s) => `<td class="n" data-state="${s}">${x.counts[s] ?? 0}</td>`).join('')}</tr>`).join('');
  const w = workers.map((x) => `<tr data-worker="${esc(x.id)}" class="st-${esc(x.state)}">
<td>${esc(x.id)}</td><td>${esc(x.host)}</td><td>${esc(x.gpuIndex)}</td><td>${esc(x.gpuModel)}</td>
<td class="mono">${esc(x.gpuUuid)}</td><td class="n">${x.gpuMemMb === null ? '–' : x.gpuMemMb}</td><td>${esc(x.driver)}</td>
<td>${esc(x.backend)}</td><td>${x.quarantined ? '<b class="bad">quarantined</b>' : esc(x.state)}</td>
<td>${x.runId ? `<a href="/runs/${encodeURIComponent(x.runId)}">${esc(x.runId)}</a>` : '–'}</td><td class="n">${x.epoch ?? '–'}</td>
<td class="mono">${esc(x.jobId || '–')}</td><td class="n">${x.faults}</td><td>${age(x.ageMs)}</td></tr>`).join('');
  const quarantined = workers.filter((x) => x.quarantined);
  return `<h2>Queues</h2><table id="queues"><thead><tr><th>queue</th>${states.map((s) => `<th>${s}</th>`).join('')}</tr></thead><tbody>${q}</tbody></table>
<h2>Workers (${workers.length})</h2>
${quarantined.length > 0 ? `<p class="bad">Quarantined GPUs: ${quarantined.map((x) => `${esc(x.host)} GPU ${esc(x.gpuIndex)} (${esc(x.gpuUuid)})`).join(', ')}</p>` : ''}
<table id="workers"><thead><tr><th>worker</th><th>host</th><th>gpu</th><th>model</th><th>uuid</th><th>mem MB</th><th>driver</th><th>backend</th><th>state</th><th>run</th><th>epoch</th><th>job</th><th>faults</th><th>heartbeat</th></tr></thead>
<tbody>${w || '<tr><td colspan="14">no worker has announced itself</td></tr>'}</tbody></table>`;
}

export function runsFragment(runs: RunRecord[]): string {
  const rows = runs.map((r) => `<tr data-run="${esc(r.runId)}"><td><a href="/runs/${encodeURIComponent(r.runId)}">${esc(r.runId)}</a></td>
<td class="st-${esc(r.status)}">${esc(r.status)}</td><td class="n">${r.committedEpoch} / ${r.targetEpochs}</td>
<td class="n">${fmt(r.bestSharpe)}</td><td class="n">${r.bestEpoch ?? '–'}</td>
<td>${r.sweepId ? `<a href="/sweeps/${encodeURIComponent(r.sweepId)}">${esc(r.sweepId)}</a>` : ''}</td>
<td>${esc(r.backend ?? '')}</td><td>${esc(r.worker ?? '')}</td><td>${time(r.updatedMs)}</td></tr>`).join('');
  return `<table id="runs"><thead><tr><th>run</th><th>status</th><th>epochs</th><th>best val sharpe</th><th>best epoch</th><th>sweep</th><th>backend</th><th>worker</th><th>updated</th></tr></thead>
<tbody>${rows || '<tr><td colspan="9">no runs yet</td></tr>'}</tbody></table>`;
}

export function runFragment(r: RunRecord): string {
  const cells: [string, string][] = [
    ['status', `<span class="st-${esc(r.status)}">${esc(r.status)}</span>`],
    ['epochs', `${r.committedEpoch} / ${r.targetEpochs}`],
    ['best val sharpe', `${fmt(r.bestSharpe)} (epoch ${r.bestEpoch ?? '–'})`],
    ['backend', esc(r.backend ?? '–')], ['engine', esc(r.engine ?? '–')], ['worker', esc(r.worker ?? '–')],
    ['seed', String(r.seed)],
    ['config hash', `<span class="mono">${esc(r.configHash.slice(0, 16))}</span>`],
    ['sweep', r.sweepId ? `<a href="/sweeps/${encodeURIComponent(r.sweepId)}">${esc(r.sweepId)}</a>` : '–'],
    ['error', esc(r.error ?? '')],
  ];
  return `<table class="kv">${cells.map(([k, v]) => `<tr><th>${k}</th><td>${v}</td></tr>`).join('')}</table>`;
}

export function runBody(r: RunRecord): string {
  return `<h1>Run ${esc(r.runId)}</h1><div id="live">${runFragment(r)}</div>
<h2>Epoch scalars</h2><div id="charts" data-run="${esc(r.runId)}"></div>
<details><summary>config</summary><pre>${esc(JSON.stringify(r.config, null, 2))}</pre></details>`;
}

export function sweepsFragment(sweeps: SweepRecord[]): string {
  const rows = sweeps.map((s) => `<tr data-sweep="${esc(s.id)}"><td><a href="/sweeps/${encodeURIComponent(s.id)}">${esc(s.id)}</a></td>
<td class="st-${esc(s.status)}">${esc(s.status)}</td><td class="n">${s.trials}</td><td>${esc(s.metric)} (${esc(s.goal)})</td>
<td class="n">${s.maxEpochs}</td><td>${s.rungs.join(', ') || '–'}</td><td class="n">${s.eta}</td>
<td>${s.best ? `<a href="/runs/${encodeURIComponent(s.best.runId)}">${esc(s.best.runId)}</a> ${fmt(s.best.metric)}` : '–'}</td>
<td>${time(s.createdMs)}</td></tr>`).join('');
  return `<table id="sweeps"><thead><tr><th>sweep</th><th>status</th><th>trials</th><th>metric</th><th>max epochs</th><th>rungs</th><th>η</th><th>best</th><th>created</th></tr></thead>
<tbody>${rows || '<tr><td colspan="9">no sweeps yet</td></tr>'}</tbody></table>`;
}

export function sweepFragment(v: SweepView): string {
  const s = v.sweep;
  const lb = v.leaderboard.map((r) => `<tr data-run="${esc(r.runId)}" data-rank="${r.rank}">
<td class="n">${r.rank}</td><td><a href="/runs/${encodeURIComponent(r.runId)}">${esc(r.runId)}</a></td>
<td class="mono">${esc(paramsText(r.params))}</td><td class="n" data-metric="${r.metric === null ? 'null' : r.metric}">${fmt(r.metric, 4)}</td>
<td class="n">${r.epochs}</td><td class="st-${esc(r.status)}">${esc(r.status)}</td></tr>`).join('');
  const rungs = v.rungs.map((r) => `<tr data-rung="${r.rung}"><td class="n">${r.rung}</td><td class="n">${r.reached}</td><td class="n">${r.continued}</td><td class="n">${r.pruned}</td>
<td><div class="bar"><span style="width:${r.reached === 0 ? 0 : Math.round((100 * r.continued) / r.reached)}%"></span></div></td></tr>`).join('');
  const best = s.best
    ? `<p id="best">Best: <a href="/runs/${encodeURIComponent(s.best.runId)}">${esc(s.best.runId)}</a> ${esc(s.metric)} = ${fmt(s.best.metric, 4)} after ${s.best.epochs} epochs;
checkpoint ${s.best.checkpoint ? `<span class="mono">${esc(s.best.checkpoint.runId)}@${s.best.checkpoint.epoch}</span>` : '–'}; ${esc(paramsText(s.best.params))}</p>`
    : '';
  return `<p>status <b class="st-${esc(s.status)}">${esc(s.status)}</b>${s.finishedMs !== null ? ` at ${time(s.finishedMs)}` : ''} · ${s.trials} trials · ${esc(s.metric)} (${esc(s.goal)}) ·
max ${s.maxEpochs} epochs · rungs ${s.rungs.join(', ') || 'none'} · η ${s.eta} · concurrency ${s.concurrency}</p>${best}
<h2>Leaderboard</h2>
<table id="leaderboard"><thead><tr><th>rank</th><th>run</th><th>params</th><th>${esc(s.metric)}</th><th>epochs</th><th>status</th></tr></thead><tbody>${lb}</tbody></table>
<h2>Rung survival</h2>
<table id="rungs"><thead><tr><th>rung (epochs)</th><th>reached</th><th>continued</th><th>pruned</th><th>survival</th></tr></thead><tbody>${rungs || '<tr><td colspan="5">no rungs</td></tr>'}</tbody></table>`;
}

export function sweepBody(v: SweepView): string {
  return `<h1>Sweep ${esc(v.sweep.id)}</h1><div id="live">${sweepFragment(v)}</div>
<h2>${esc(v.sweep.metric)} against each parameter</h2><div id="sweep-charts" data-sweep="${esc(v.sweep.id)}"></div>`;
}
