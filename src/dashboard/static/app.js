// foxhunt dashboard client: refreshes the live part of a page and draws uPlot charts from the
// JSON API. Plain browser JS, no build step. Charts are kept in window.fhCharts (name → uPlot).
(function () {
  'use strict';
  const pollMs = Number(document.body.dataset.pollMs) || 2000;
  const charts = (window.fhCharts = {});
  const PALETTE = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#4b5563', '#ca8a04'];
  const METRICS = ['sharpe', 'sortino', 'max_dd', 'max_dd_pct', 'profit_factor', 'total_pnl', 'trades', 'win_rate', 'turnover', 'sessions'];
  const GROUPS = [
    { id: 'loss', title: 'loss', series: ['loss/mean', 'loss/last'] },
    { id: 'grad', title: 'gradient norm', series: ['grad/norm_mean', 'grad/norm_max'] },
    { id: 'q', title: 'Q statistics', series: ['q/avg_max', 'q/min', 'q/max', 'q/mean'] },
    { id: 'qvar', title: 'Q variance', series: ['q/var'] },
    { id: 'explore', title: 'ε and β', series: ['explore/epsilon', 'per/beta'] },
  ].concat(METRICS.map((m) => ({ id: 'val_' + m, title: 'validation ' + m + ' vs flat and buy & hold', series: ['val/' + m, 'flat/' + m, 'bh/' + m] })))
    .concat([
      { id: 'time', title: 'phase timings (ms)', series: ['time/collect_ms', 'time/train_ms', 'time/eval_ms', 'time/total_ms'] },
      { id: 'perf', title: 'throughput (per s)', series: ['perf/env_steps_per_s', 'perf/samples_per_s'] },
    ]);

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  async function getJson(url) {
    const r = await fetch(url, { credentials: 'same-origin', headers: { accept: 'application/json' } });
    if (!r.ok) throw new Error(url + ': ' + r.status);
    return r.json();
  }

  function makeChart(container, id, title, names, data, opts) {
    const box = el('div', { class: 'chart', 'data-chart': id });
    box.appendChild(el('h3', {}, title));
    container.appendChild(box);
    const width = Math.max(320, Math.min(560, (container.clientWidth || 1100) / 2 - 24));
    const series = [{ label: (opts && opts.xLabel) || 'epoch' }].concat(names.map((n, i) => Object.assign({
      label: n, stroke: PALETTE[i % PALETTE.length], width: 1.5, spanGaps: false,
    }, (opts && opts.seriesOpts) || {})));
    const u = new uPlot({
      width, height: 220, series,
      scales: { x: Object.assign({ time: false }, (opts && opts.xScale) || {}) },
      axes: [Object.assign({ label: (opts && opts.xLabel) || 'epoch' }, opts && opts.xValues ? { values: opts.xValues } : {}), {}],
      legend: { live: true },
    }, data, box);
    charts[id] = u;
    return u;
  }

  // ---- run page: every epoch scalar, appended as epochs commit ----
  async function runCharts(root) {
    const runId = root.dataset.run;
    const first = await getJson('/api/runs/' + encodeURIComponent(runId));
    const epochs = first.epochs;
    const names = new Set();
    for (const e of epochs) for (const k of Object.keys(e.scalars)) names.add(k);
    if (names.size === 0) for (const g of GROUPS) for (const s of g.series) names.add(s);
    const groups = GROUPS.map((g) => Object.assign({}, g));
    const grouped = new Set(groups.flatMap((g) => g.series).concat(['epoch']));
    for (const n of [...names].sort()) if (!grouped.has(n)) groups.push({ id: n.replace(/\W/g, '_'), title: n, series: [n] });
    const state = { last: 0, x: [], cols: new Map() };
    for (const g of groups) for (const s of g.series) state.cols.set(s, []);
    function append(list) {
      for (const e of list) {
        if (e.epoch <= state.last) continue;
        state.last = e.epoch;
        state.x.push(e.epoch);
        for (const [name, col] of state.cols) {
          const v = e.scalars[name];
          col.push(typeof v === 'number' ? v : null);
        }
      }
    }
    append(epochs);
    const dataOf = (g) => [state.x].concat(g.series.map((s) => state.cols.get(s)));
    for (const g of groups) makeChart(root, g.id, g.title, g.series, dataOf(g));
    window.fhRunData = state;
    setInterval(async () => {
      try {
        const next = await getJson('/api/runs/' + encodeURIComponent(runId) + '?after=' + state.last);
        if (next.epochs.length === 0) return;
        append(next.epochs);
        for (const g of groups) charts[g.id].setData(dataOf(g));
      } catch (err) { console.warn(err); }
    }, pollMs);
  }

  // ---- sweep page: the metric against each parameter ----
  async function sweepCharts(root) {
    const id = root.dataset.sweep;
    async function draw(view) {
      const metric = view.sweep.metric;
      const space = view.sweep.spec.space || {};
      for (const key of Object.keys(space).sort()) {
        const dim = space[key];
        const pts = view.leaderboard.filter((r) => r.metric !== null && r.params[key] !== undefined);
        let cats = null;
        if (pts.some((r) => typeof r.params[key] !== 'number')) cats = [...new Set(pts.map((r) => String(r.params[key])))].sort();
        const xy = pts.map((r) => [cats ? cats.indexOf(String(r.params[key])) : r.params[key], r.metric]).sort((a, b) => a[0] - b[0]);
        const data = [xy.map((p) => p[0]), xy.map((p) => p[1])];
        const cid = 'param_' + key.replace(/\W/g, '_');
        if (charts[cid]) { charts[cid].setData(data); continue; }
        // pad the x range so points on its ends (and repeated x values) are all drawn
        const log = dim.kind === 'log_uniform';
        const range = (u, min, max) => {
          if (min === null || max === null) return [0, 1];
          if (log) return [min / 1.5, max * 1.5];
          const pad = max > min ? (max - min) * 0.08 : Math.abs(min) * 0.1 || 0.5;
          return [min - pad, max + pad];
        };
        makeChart(root, cid, metric + ' vs ' + key + (cats ? ' (' + cats.join(', ') + ')' : ''), [metric], data, {
          xLabel: key,
          xScale: log ? { distr: 3, range } : { range },
          xValues: log ? (u, vals) => vals.map((v) => (v === null ? '' : Number(v).toExponential(0))) : null,
          seriesOpts: { paths: () => null, points: { show: true, size: 7, fill: PALETTE[0] } },
        });
      }
    }
    await draw(await getJson('/api/sweeps/' + encodeURIComponent(id)));
    setInterval(async () => {
      try { await draw(await getJson('/api/sweeps/' + encodeURIComponent(id))); } catch (err) { console.warn(err); }
    }, pollMs * 2);
  }

  // ---- every page: refresh the live part ----
  const live = document.getElementById('live');
  if (live) {
    setInterval(async () => {
      try {
        const r = await fetch(location.pathname + '?fragment=1', { credentials: 'same-origin' });
        if (r.ok) live.innerHTML = await r.text();
      } catch (err) { console.warn(err); }
    }, pollMs);
  }
  const runRoot = document.getElementById('charts');
  if (runRoot) runCharts(runRoot).then(() => { document.body.dataset.chartsReady = '1'; }, (e) => console.error(e));
  const sweepRoot = document.getElementById('sweep-charts');
  if (sweepRoot) sweepCharts(sweepRoot).then(() => { document.body.dataset.chartsReady = '1'; }, (e) => console.error(e));
})();
