/*
 * eval_host.cu — eval.h host side: segments (evalSegments of src/env/evaluate.ts), allocation, and
 * the metrics of the read-back records (computeMetrics of src/env/metrics.ts), summed in the
 * reference's order so both backends report the same numbers; the greedy evaluation loop of the
 * trainer (fh_eval_run: fused kernel or cuBLASLt loop) and its test entry point fh_cuda_eval_check.
 */
#include "eval.h"

#include "config.h"
#include "env_host.h"
#include "net.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chrono>
#include <functional>
#include <thread>
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
  FH_CUDA_TRY(cudaMallocHost(&ev->h_flat_rec, sizeof(fh_eval_rec) * S));
  const size_t G = (size_t)ev->max_steps * S > 0 ? (size_t)ev->max_steps * S : 1;
  FH_CUDA_TRY(cudaMalloc(&ev->pnl, sizeof(double) * V));
  FH_CUDA_TRY(cudaMalloc(&ev->gross, sizeof(double2) * G));
  FH_CUDA_TRY(cudaMalloc(&ev->counts, sizeof(unsigned long long) * 3));
  FH_CUDA_TRY(cudaMallocHost(&ev->h_pnl, sizeof(double) * V));
  FH_CUDA_TRY(cudaMallocHost(&ev->h_gross, sizeof(double2) * G));
  FH_CUDA_TRY(cudaMallocHost(&ev->h_counts, sizeof(unsigned long long) * 3));
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
  cudaFreeHost(ev->h_flat_rec);
  cudaFree(ev->pnl);
  cudaFree(ev->gross);
  cudaFree(ev->counts);
  cudaFreeHost(ev->h_pnl);
  cudaFreeHost(ev->h_gross);
  cudaFreeHost(ev->h_counts);
  free(ev->h_seg_begin);
  free(ev->h_seg_end);
  free(ev->h_session_of);
  fh_eval_fused_free(&ev->fused);
  memset(ev, 0, sizeof *ev);
}

fh_status fh_eval_fused_profile_print(const fh_cuda_eval& ev, FILE* out, const char* prefix) {
  if (!ev.fused.prof || ev.max_steps <= 0) return FH_OK;
  unsigned long long c[FH_EVAL_NPROF];
  if (cudaMemcpy(c, ev.fused.prof, sizeof c, cudaMemcpyDeviceToHost) != cudaSuccess) return FH_ERR_DEVICE;
  int clk = 0, dev = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, dev);
  fprintf(out, "%sfused profile, block 0, cycles per step (SM clock %d MHz max):", prefix, clk / 1000);
  /* slots 0..8: the phases and the barrier after each; 9: slot 7 up to its block barrier; 10, 11: inside it, warp
   * 0's expected-Q task and the first speculating warp's steps */
  const char* nm[FH_EVAL_NPROF] = {"P1+h1", "L2", "bar", "LH", "bar", "LO", "bar", "EQ+step", "bar",
                                   "(of which EQ)", "(EQ warp)", "(step warp)"};
  unsigned long long tot = 0;
  for (int i = 0; i < FH_EVAL_NPROF; ++i) {
    fprintf(out, " %s %llu", nm[i], c[i] / (unsigned long long)ev.max_steps);
    if (i < 9) tot += c[i];
  }
  fprintf(out, " | total %llu (%d steps)\n", tot / (unsigned long long)ev.max_steps, ev.max_steps);
  fflush(out);
  return FH_OK;
}

/* The evaluation's metrics from the read-back columns. A booking of exactly 0 changes nothing: a double sum that
 * starts at +0 never holds -0 (+0 + -0 = +0, and x + -x rounds to +0), and adding +-0 to any other value leaves its
 * bits; equity, peak and the drawdowns stay, and their maxima were taken at that state already. So a zero booking
 * may be added or skipped alike.
 *
 * The trade counters (integers, summed on the device: any order) and the gross sums, which the reference takes
 * step-major (step i of every segment in segment order, then step i + 1, ..., then the flattens in segment order):
 * the device lays the steps' grosses out in that order (zero past a segment's end, and where a step closes no trade),
 * so they are one pass over consecutive memory here. */
struct fh_trade_sums {
  double gp = 0.0, gl = 0.0;
  int64_t trades = 0, won = 0, contracts = 0;
};
static void fh_eval_trade_sums(const fh_cuda_eval& ev, fh_trade_sums* out) {
  fh_trade_sums t;
  t.trades = (int64_t)ev.h_counts[0];
  t.won = (int64_t)ev.h_counts[1];
  t.contracts = (int64_t)ev.h_counts[2];
  const int64_t n = (int64_t)ev.max_steps * ev.n_seg;
  for (int64_t j = 0; j < n; ++j) {
    t.gp += ev.h_gross[j].x;
    t.gl += ev.h_gross[j].y;
  }
  for (int32_t k = 0; k < ev.n_seg; ++k) {
    const fh_eval_rec& r = ev.h_flat_rec[k];
    t.trades += r.closed;
    t.won += r.won;
    t.contracts += r.traded;
    t.gp += r.gross_profit;
    t.gl += r.gross_loss;
  }
  *out = t;
}

/* The host's mirror of the read-back's split (kernels/eval.cu eval_split_kernel), through the same step record. */
void fh_cuda_eval_split_host(const fh_cuda_eval& ev, const fh_eval_rec* bar_rec, const fh_eval_rec* flat_rec) {
  for (int64_t i = 0; i < ev.n_val; ++i) ev.h_pnl[i] = bar_rec[i].pnl;
  long long c[3] = {0, 0, 0};
  const int64_t n = (int64_t)ev.max_steps * ev.n_seg;
  for (int64_t j = 0; j < n; ++j) {
    const fh_eval_rec* r = fh_eval_step_record(bar_rec, ev.h_seg_begin, ev.h_seg_end, ev.n_seg, ev.val_begin, j);
    ev.h_gross[j] = r ? make_double2(r->gross_profit, r->gross_loss) : make_double2(0.0, 0.0);
    if (r) {
      c[0] += r->closed;
      c[1] += r->won;
      c[2] += r->traded;
    }
  }
  for (int q = 0; q < 3; ++q) ev.h_counts[q] = (unsigned long long)c[q];
  memcpy(ev.h_flat_rec, flat_rec, sizeof(fh_eval_rec) * (size_t)ev.n_seg);
}

/* The equity path's running values: the equity, its peak, the largest drawdown and drawdown percentage. */
struct fh_equity_path {
  double equity = 0.0, peak = 0.0, dd = 0.0, dd_pct = 0.0;
};
/* n bookings xs in order. The drawdown's percentage, d / (capital + peak) * 100, is a division a booking; it is
 * computed only where it can exceed the largest so far: d * 100 >= dd_pct * (capital + peak) * (1 - 1e-9) holds
 * wherever the rounded quotient is larger (the two sides' rounding is ~1e-16 relative), so the maximum is the same
 * value. The running values are locals (by value in and out), and the loop a function of its own, so that they stay
 * in registers (inlined into the finalise, the host compiler kept the equity on the stack: ~2x the time) */
__attribute__((noinline)) static fh_equity_path fh_equity_book(fh_equity_path r, const double* xs, int64_t n,
                                                               double capital) {
  double e = r.equity, p = r.peak, m = r.dd, mp = r.dd_pct;
  for (int64_t i = 0; i < n; ++i) {
    e += xs[i];
    p = e > p ? e : p;
    const double d = p - e;
    m = d > m ? d : m;
    const double q = capital + p;
    if (d > 0.0 && d * 100.0 >= mp * q * (1.0 - 1e-9)) {
      const double pct = d / q * 100.0;
      mp = pct > mp ? pct : mp;
    }
  }
  r.equity = e;
  r.peak = p;
  r.dd = m;
  r.dd_pct = mp;
  return r;
}

/* Session PnL: each session's bookings in bar order (the bars' sessions never decrease, so the current session's sum
 * is kept in a register and stored when the session changes), then each segment's final flatten into the session of
 * its last bar. The bar's own booking is added even where it is 0 (the sums' bits stay, see above). */
static void fh_eval_session_sums(const fh_cuda_eval& ev, std::vector<double>* out) {
  std::vector<double>& session = *out;
  session.assign((size_t)ev.n_sessions, 0.0);
  const int64_t V = ev.n_val;
  int32_t cur = V > 0 ? ev.h_session_of[0] : 0;
  double cur_sum = 0.0;
  for (int64_t i = 0; i < V; ++i) {
    if (ev.h_session_of[i] != cur) {
      session[(size_t)cur] += cur_sum;
      cur = ev.h_session_of[i];
      cur_sum = 0.0;
    }
    cur_sum += ev.h_pnl[i];
  }
  if (V > 0) session[(size_t)cur] += cur_sum;
  for (int32_t s = 0; s < ev.n_seg; ++s) {
    const int64_t last = ev.h_seg_end[s] - 1 - ev.val_begin;
    session[(size_t)ev.h_session_of[last]] += ev.h_flat_rec[s].pnl;
  }
}

/* The parts of the metrics beside each other: the trade sums and the session sums on threads of their own (they read
 * the read-back's columns and write nothing shared), the equity path on the caller's; FH_EVAL_METRICS_THREADS=2: the session
 * sums on the caller's too, =1: everything there (A/B). A part whose thread cannot be had runs on the caller's.
 * FH_EPOCH_TIMING=1 prints each part's time. */
void fh_cuda_eval_finalise(const fh_cuda_eval& ev, const fh_market* host, double initial_capital, fh_metrics* out) {
  (void)host;
  using clk = std::chrono::steady_clock;
  static const int threads =
      fh_env_is("FH_EVAL_METRICS_THREADS", "1") ? 1 : fh_env_is("FH_EVAL_METRICS_THREADS", "2") ? 2 : 3;
  static const bool timing = fh_env_is("FH_EPOCH_TIMING", "1");
  const auto t0 = clk::now();
  const int64_t V = ev.n_val;
  fh_trade_sums ts;
  std::vector<double> session;
  double ms_trades = 0.0, ms_sessions = 0.0;
  auto trades = [&] {
    const auto a = clk::now();
    fh_eval_trade_sums(ev, &ts);
    ms_trades = std::chrono::duration<double, std::milli>(clk::now() - a).count();
  };
  auto sessions = [&] {
    const auto a = clk::now();
    fh_eval_session_sums(ev, &session);
    ms_sessions = std::chrono::duration<double, std::milli>(clk::now() - a).count();
  };
  std::thread w_trades, w_sessions;
  if (threads >= 2) {
    try {
      w_trades = std::thread(trades);
    } catch (...) {
    }
  }
  if (threads >= 3) {
    try {
      w_sessions = std::thread(sessions);
    } catch (...) {
    }
  }
  if (!w_trades.joinable()) trades();
  if (!w_sessions.joinable()) sessions();
  /* the equity path: per bar the step booked to it, then the flatten booked to it (segment k's at its last bar; only
   * where it is not 0), segment by segment (their last bars ascending: consecutive bar ranges) */
  const auto t_eq = clk::now();
  fh_equity_path ep;
  int64_t i = 0;
  for (int32_t k = 0; k < ev.n_seg; ++k) {
    const int64_t last = ev.h_seg_end[k] - 1 - ev.val_begin, end = last + 1 < V ? last + 1 : V;
    if (end > i) {
      ep = fh_equity_book(ep, ev.h_pnl + i, end - i, initial_capital);
      i = end;
    }
    if (last >= 0 && last < V && ev.h_flat_rec[k].pnl != 0.0)
      ep = fh_equity_book(ep, &ev.h_flat_rec[k].pnl, 1, initial_capital);
  }
  if (V > i) ep = fh_equity_book(ep, ev.h_pnl + i, V - i, initial_capital);
  const double equity = ep.equity, dd = ep.dd, dd_pct = ep.dd_pct;
  const double ms_equity = std::chrono::duration<double, std::milli>(clk::now() - t_eq).count();
  if (w_trades.joinable()) w_trades.join();
  if (w_sessions.joinable()) w_sessions.join();
  if (timing)
    fprintf(stderr, "evaluation metrics ms: %.3f in all (%d threads): equity path %.3f, sessions %.3f, trades %.3f\n",
            std::chrono::duration<double, std::milli>(clk::now() - t0).count(), threads, ms_equity, ms_sessions,
            ms_trades);
  const double gp = ts.gp, gl = ts.gl;
  const int64_t trades_n = ts.trades, won = ts.won, contracts = ts.contracts;
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
  out->total_pnl = equity; /* the same additions as the equity path's */
  out->trades = (double)trades_n;
  out->win_rate = trades_n > 0 ? (double)won / (double)trades_n : NAN;
  out->turnover = V > 0 ? (double)contracts / (double)V : 0.0;
  out->sessions = (double)ns;
}

/* ---------------------------------------------------------------- the greedy loop */

fh_status fh_eval_run(const fh_cuda_eval& ev, fh_net* net, cudaStream_t s_own, void* ws_own) {
  const bool own = ev.fused.on && s_own && ws_own;
  cudaStream_t s = own ? s_own : net->pass[1].s;
  void* obs = net->pass[1].x;
  const int32_t D = net->L.D;
  FH_TRY(fh_launch_eval_reset(ev, s));
  if (ev.fused.on) {
    FH_TRY(fh_launch_eval_fused(ev, net, s, own ? ws_own : net->pass[1].ws[0],
                                own && !fh_env_is("FH_EVAL_WHOLE_SM", "0")));
  } else {
    FH_TRY(fh_launch_eval_observe(ev, net->op, obs, D, s));
    const size_t qrow = (size_t)ev.n_seg * net->nq;
    for (int32_t i = 0; i < ev.max_steps; ++i) {
      FH_TRY(fh_net_forward(net, 1, 0, ev.n_seg, 1));
      if (ev.q_log)
        FH_CUDA_TRY(cudaMemcpyAsync(ev.q_log + (size_t)i * qrow, net->pass[1].q, qrow * sizeof(float),
                                    cudaMemcpyDeviceToDevice, s));
      FH_TRY(fh_launch_eval_step_observe(ev, net->pass[1].q, net->nq, i, net->op, obs, D, s));
    }
  }
  return fh_launch_eval_finish(ev, s);
}

/* ---------------------------------------------------------------- test entry point */

static void check_err(char* err, size_t len, const char* what, fh_status st) {
  if (!err || len == 0) return;
  const char* d = fh_cuda_last_error_text();
  snprintf(err, len, "%s: status %d (%s)", what, (int)st, d && d[0] ? d : "no detail");
}

extern "C" FH_API fh_status fh_cuda_eval_check(const fh_config* cfg, const fh_market* market, const float* params,
                                               int64_t n, int32_t fused, fh_metrics* metrics, int32_t* info,
                                               float* q_log, int64_t q_len, char* err, size_t err_len) {
  if (!cfg || !market || !params || !metrics || !info) return FH_ERR_INVALID_ARGUMENT;
  fh_status st = fh_validate_config(cfg, err, err_len);
  if (st != FH_OK) return st;
  st = fh_validate_market(cfg, market, err, err_len);
  if (st != FH_OK) return st;
  if (cudaSetDevice(cfg->device) != cudaSuccess) {
    check_err(err, err_len, "cudaSetDevice", FH_ERR_DEVICE);
    return FH_ERR_DEVICE;
  }
  fh_cuda_market dm{};
  fh_cuda_eval ev{};
  fh_net net{};
  bool have_dm = false, have_ev = false, have_net = false;
  const char* what = "market upload";
  const fh_env_params ep = fh_env_params_from_config(*cfg, fh_resolve_reward_scale(*cfg, *market));
  const int32_t D = cfg->window * market->n_features + FH_ENV_ACCOUNT;
#define CHK(expr, w)              \
  do {                            \
    what = (w);                   \
    st = (expr);                  \
    if (st != FH_OK) goto done;   \
  } while (0)
  CHK(fh_cuda_market_upload(market, &dm), "market upload");
  have_dm = true;
  CHK(fh_cuda_eval_alloc(*cfg, ep, market, dm, &ev), "evaluation allocation");
  have_ev = true;
  CHK(fh_net_create(&net, *cfg, D, ev.n_seg > 0 ? ev.n_seg : 1), "network allocation");
  have_net = true;
  if (n != net.L.total) {
    st = FH_ERR_INVALID_ARGUMENT;
    if (err && err_len) snprintf(err, err_len, "params: n = %lld, the layout has %lld", (long long)n, (long long)net.L.total);
    goto done;
  }
  CHK(cudaMemcpy(net.online, params, (size_t)n * 4, cudaMemcpyHostToDevice) == cudaSuccess ? FH_OK : FH_ERR_DEVICE,
      "params upload");
  CHK(fh_net_sync_shadows(&net, net.pass[1].s), "shadow sync");
  CHK(fh_eval_fused_setup(&ev, &net, fused ? 1 : 0), "fused evaluation setup");
  info[0] = ev.n_seg;
  info[1] = ev.max_steps;
  info[2] = net.nq;
  info[3] = ev.fused.on;
  if (fused && !ev.fused.on && err && err_len) snprintf(err, err_len, "fused evaluation off: %s", ev.fused.why);
  {
    const int64_t need = (int64_t)ev.max_steps * ev.n_seg * net.nq;
    if (q_log && q_len >= need && need > 0) {
      CHK(cudaMalloc(&ev.q_log, (size_t)need * 4) == cudaSuccess ? FH_OK : FH_ERR_OUT_OF_MEMORY, "q_log allocation");
      CHK(cudaMemset(ev.q_log, 0xff, (size_t)need * 4) == cudaSuccess ? FH_OK : FH_ERR_DEVICE, "q_log init");
    }
    if (ev.n_seg > 0) {
      CHK(fh_eval_run(ev, &net), "evaluation");
      CHK(fh_launch_eval_readback(ev, net.pass[1].s), "read-back");
    }
    CHK(cudaStreamSynchronize(net.pass[1].s) == cudaSuccess ? FH_OK : FH_ERR_DEVICE, "evaluation");
    CHK(cudaGetLastError() == cudaSuccess ? FH_OK : FH_ERR_DEVICE, "evaluation");
    if (ev.q_log)
      CHK(cudaMemcpy(q_log, ev.q_log, (size_t)need * 4, cudaMemcpyDeviceToHost) == cudaSuccess ? FH_OK : FH_ERR_DEVICE,
          "q_log read");
    CHK(fh_eval_fused_profile_print(ev, stdout, "      "), "profile read");
    fh_cuda_eval_finalise(ev, market, cfg->initial_capital, metrics);
  }
#undef CHK
done:
  if (st != FH_OK && err && err_len && !err[0]) check_err(err, err_len, what, st);
  if (have_ev && ev.q_log) cudaFree(ev.q_log);
  if (have_net) fh_net_destroy(&net);
  if (have_ev) fh_cuda_eval_free(&ev);
  if (have_dm) fh_cuda_market_free(&dm);
  return st;
}
