/*
 * eval_host.cu — eval.h host side: segments (evalSegments of src/env/evaluate.ts), allocation, and
 * the metrics of the read-back records (computeMetrics of src/env/metrics.ts), summed in the
 * reference's order so both backends report the same numbers.
 */
#include "eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

static fh_status eval_alloc(fh_cuda_eval* ev) {
  const size_t S = (size_t)ev->n_seg, V = (size_t)ev->n_val;
  FH_CUDA_TRY(cudaMalloc(&ev->seg_begin, sizeof(int32_t) * S));
  FH_CUDA_TRY(cudaMalloc(&ev->seg_end, sizeof(int32_t) * S));
  FH_CUDA_TRY(cudaMemcpy(ev->seg_begin, ev->h_seg_begin, sizeof(int32_t) * S, cudaMemcpyHostToDevice));
  FH_CUDA_TRY(cudaMemcpy(ev->seg_end, ev->h_seg_end, sizeof(int32_t) * S, cudaMemcpyHostToDevice));
  FH_CUDA_TRY(cudaMalloc(&ev->state, sizeof(fh_env_state) * S));
  FH_CUDA_TRY(cudaMemset(ev->state, 0, sizeof(fh_env_state) * S));
  FH_CUDA_TRY(cudaMalloc(&ev->bar_rec, sizeof(fh_eval_rec) * V));
  FH_CUDA_TRY(cudaMalloc(&ev->flat_rec, sizeof(fh_eval_rec) * S));
  FH_CUDA_TRY(cudaMallocHost(&ev->h_bar_rec, sizeof(fh_eval_rec) * V));
  FH_CUDA_TRY(cudaMallocHost(&ev->h_flat_rec, sizeof(fh_eval_rec) * S));
  return FH_OK;
}

fh_status fh_cuda_eval_alloc(const fh_config& cfg, const fh_env_params& p, const fh_market* host,
                             const fh_cuda_market& dm, fh_cuda_eval* out) {
  if (!host || !out) return FH_ERR_INVALID_ARGUMENT;
  memset(out, 0, sizeof *out);
  const int64_t vb = host->val_begin, ve = host->val_end;
  if (vb < cfg.window - 1 || ve <= vb || ve > host->n_bars) return FH_ERR_INVALID_DATA;
  out->val_begin = vb;
  out->val_end = ve;
  out->n_val = ve - vb;
  out->obs_dim = cfg.window * host->n_features + FH_ENV_ACCOUNT;
  out->p = p;
  out->view = dm.view;
  int32_t off = 0;
  for (int d = 0; d < FH_MAX_BRANCHES; ++d) {
    out->n_act[d] = cfg.branch_sizes[d];
    out->q_off[d] = off;
    off += cfg.branch_sizes[d];
  }
  /* sessions of the range and their index per bar */
  std::vector<int64_t> starts;
  starts.push_back(vb);
  out->h_session_of = static_cast<int32_t*>(malloc(sizeof(int32_t) * (size_t)out->n_val));
  if (!out->h_session_of) return FH_ERR_OUT_OF_MEMORY;
  int32_t sess = 0;
  for (int64_t i = vb; i < ve; ++i) {
    if (i > vb && host->session_start[i] == 1) {
      starts.push_back(i);
      ++sess;
    }
    out->h_session_of[i - vb] = sess;
  }
  out->n_sessions = sess + 1;
  /* segments: segment i gets sessions floor(i*S/n) .. floor((i+1)*S/n) - 1 */
  const int64_t S = (int64_t)starts.size();
  const int64_t n = cfg.eval_segments < 1 ? 1 : (cfg.eval_segments < S ? cfg.eval_segments : S);
  std::vector<int32_t> bs, es;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t a = (i * S) / n, b = ((i + 1) * S) / n;
    const int64_t begin = starts[(size_t)a];
    const int64_t end = b < S ? starts[(size_t)b] : ve;
    if (end - begin >= 1) {
      bs.push_back((int32_t)begin);
      es.push_back((int32_t)end);
    }
  }
  out->n_seg = (int32_t)bs.size();
  out->h_seg_begin = static_cast<int32_t*>(malloc(sizeof(int32_t) * bs.size()));
  out->h_seg_end = static_cast<int32_t*>(malloc(sizeof(int32_t) * bs.size()));
  if (!out->h_seg_begin || !out->h_seg_end) {
    fh_cuda_eval_free(out);
    return FH_ERR_OUT_OF_MEMORY;
  }
  out->max_steps = 0;
  for (size_t k = 0; k < bs.size(); ++k) {
    out->h_seg_begin[k] = bs[k];
    out->h_seg_end[k] = es[k];
    const int32_t steps = es[k] - bs[k] - 1;
    if (steps > out->max_steps) out->max_steps = steps;
  }
  const fh_status st = eval_alloc(out);
  if (st != FH_OK) fh_cuda_eval_free(out);
  return st;
}

void fh_cuda_eval_free(fh_cuda_eval* ev) {
  if (!ev) return;
  cudaFree(ev->seg_begin);
  cudaFree(ev->seg_end);
  cudaFree(ev->state);
  cudaFree(ev->bar_rec);
  cudaFree(ev->flat_rec);
  cudaFreeHost(ev->h_bar_rec);
  cudaFreeHost(ev->h_flat_rec);
  free(ev->h_seg_begin);
  free(ev->h_seg_end);
  free(ev->h_session_of);
  memset(ev, 0, sizeof *ev);
}

void fh_cuda_eval_finalise(const fh_cuda_eval& ev, const fh_market* host, double initial_capital, fh_metrics* out) {
  (void)host;
  const int64_t V = ev.n_val;
  std::vector<double> session((size_t)ev.n_sessions, 0.0);
  /* flatten records by the bar they are booked to (the segment's last bar) */
  std::vector<const fh_eval_rec*> flat_at((size_t)V, nullptr);
  for (int32_t k = 0; k < ev.n_seg; ++k) flat_at[(size_t)(ev.h_seg_end[k] - 1 - ev.val_begin)] = &ev.h_flat_rec[k];
  /* trade counters in the reference's order: steps (step-major, segment-minor), then flattens */
  double gp = 0.0, gl = 0.0;
  int64_t trades = 0, won = 0, contracts = 0;
  for (int32_t i = 0; i < ev.max_steps; ++i)
    for (int32_t k = 0; k < ev.n_seg; ++k) {
      if (i >= ev.h_seg_end[k] - ev.h_seg_begin[k] - 1) continue;
      const fh_eval_rec& r = ev.h_bar_rec[ev.h_seg_begin[k] + i + 1 - ev.val_begin];
      trades += r.closed;
      won += r.won;
      gp += r.gross_profit;
      gl += r.gross_loss;
      contracts += r.traded;
    }
  for (int32_t k = 0; k < ev.n_seg; ++k) {
    const fh_eval_rec& r = ev.h_flat_rec[k];
    trades += r.closed;
    won += r.won;
    gp += r.gross_profit;
    gl += r.gross_loss;
    contracts += r.traded;
  }
  /* session PnL: each session's bookings in time order, its final flatten last */
  for (int64_t i = 0; i < V; ++i) session[(size_t)ev.h_session_of[i]] += ev.h_bar_rec[i].pnl;
  for (int32_t k = 0; k < ev.n_seg; ++k) {
    const int64_t last = ev.h_seg_end[k] - 1 - ev.val_begin;
    session[(size_t)ev.h_session_of[last]] += ev.h_flat_rec[k].pnl;
  }
  /* the equity path: per bar the step booked to it, then the flatten booked to it */
  double total = 0.0, equity = 0.0, peak = 0.0, dd = 0.0, dd_pct = 0.0;
  for (int64_t i = 0; i < V; ++i) {
    for (int part = 0; part < 2; ++part) {
      const double x = part == 0 ? ev.h_bar_rec[i].pnl : (flat_at[(size_t)i] ? flat_at[(size_t)i]->pnl : 0.0);
      total += x;
      equity += x;
      if (equity > peak) peak = equity;
      const double d = peak - equity;
      if (d > dd) dd = d;
      const double pct = d / (initial_capital + peak) * 100.0;
      if (pct > dd_pct) dd_pct = pct;
    }
  }
  const double annual = sqrt(252.0);
  const size_t ns = session.size();
  double sum = 0.0, down = 0.0;
  for (double x : session) {
    sum += x;
    if (x < 0.0) down += x * x;
  }
  double sharpe = NAN;
  if (ns >= 2) {
    const double mean = sum / (double)ns;
    double ss = 0.0;
    for (double x : session) ss += (x - mean) * (x - mean);
    const double sd = sqrt(ss / (double)(ns - 1));
    if (sd > 0.0) sharpe = mean / sd * annual;
  }
  const double sortino = (ns > 0 && down > 0.0) ? sum / (double)ns / sqrt(down / (double)ns) * annual : NAN;
  out->sharpe = sharpe;
  out->sortino = sortino;
  out->max_drawdown = dd;
  out->max_drawdown_pct = dd_pct;
  out->profit_factor = gl > 0.0 ? gp / gl : NAN;
  out->total_pnl = total;
  out->trades = (double)trades;
  out->win_rate = trades > 0 ? (double)won / (double)trades : NAN;
  out->turnover = V > 0 ? (double)contracts / (double)V : 0.0;
  out->sessions = (double)ns;
}
