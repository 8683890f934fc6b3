/*
 * eval.cpp — greedy evaluation over the validation range (DESIGN §4 "Evaluation").
 *
 * The range is cut into contiguous segments on session boundaries (fh_val_segments); all segments
 * run in parallel, each starting flat at its first bar and flattened at its last close. A step's PnL
 * is booked to bar t+1 (so to the session of t+1), the final flatten to the segment's last bar.
 * k (the in-episode step feature) cycles 0..T-1 so observations stay in the training distribution.
 * Policies: 0 greedy online net, 1 flat, 2 buy & hold (+max_contracts every step).
 */
#include <string.h>

#include "metrics.h"
#include "trainer.h"

void fh_cpu_eval_prepare(fh_trainer* t) {
  const int64_t n = t->val_end - t->val_begin;
  t->session_of.resize((size_t)n);
  t->n_sessions = fh_val_sessions(t->session_start.data(), t->val_begin, t->val_end, t->session_of.data());
  std::vector<int64_t> starts((size_t)t->cfg.eval_segments);
  const int32_t count =
      fh_val_segments(t->session_start.data(), t->val_begin, t->val_end, t->cfg.eval_segments, starts.data());
  t->seg_start.assign(starts.begin(), starts.begin() + count);
  t->seg_start.push_back(t->val_end);
}

void fh_cpu_evaluate(fh_trainer* t, int policy, fh_metrics* out) {
  const int32_t S = (int32_t)t->seg_start.size() - 1;
  const int64_t nval = t->val_end - t->val_begin;
  const int32_t D = t->D;
  const int32_t T = t->cfg.episode_len;
  std::vector<double> bar_pnl((size_t)nval, 0.0);
  std::vector<fh_env_state> st((size_t)S);
  std::vector<fh_trade_totals> tt((size_t)S);
  std::vector<int32_t> act((size_t)S * 3);
  std::vector<int32_t> active;
  std::vector<float> obs;
  for (int32_t k = 0; k < S; ++k) {
    fh_env_state& s = st[(size_t)k];
    memset(&s, 0, sizeof s);
    s.t = t->seg_start[(size_t)k];
  }
  const int32_t mid = (t->cfg.branch_sizes[0] - 1) / 2;
  for (int64_t step = 0;; ++step) {
    active.clear();
    for (int32_t k = 0; k < S; ++k)
      if (st[(size_t)k].t + 1 < t->seg_start[(size_t)k + 1]) active.push_back(k);
    if (active.empty()) break;
    const int32_t na = (int32_t)active.size();
    for (int32_t i = 0; i < na; ++i) st[(size_t)active[(size_t)i]].k = (int32_t)(step % T);
    if (policy == 0) {
      obs.resize((size_t)na * D);
      t->pool->run(na, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i)
          fh_env_observe(t->mv, t->ep, st[(size_t)active[(size_t)i]], obs.data() + i * D);
      });
      fh_cpu_greedy_actions(t, obs.data(), na, act.data());
    } else {
      for (int32_t i = 0; i < na; ++i) {
        act[(size_t)i * 3 + 0] = policy == 1 ? mid : t->cfg.branch_sizes[0] - 1;
        act[(size_t)i * 3 + 1] = policy == 1 ? 0 : t->cfg.branch_sizes[1] - 1;
        act[(size_t)i * 3 + 2] = 0;
      }
    }
    t->pool->run(na, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int32_t k = active[(size_t)i];
        fh_env_state& s = st[(size_t)k];
        fh_trade_totals& acc = tt[(size_t)k];
        fh_step_result r;
        const int32_t* a = act.data() + i * 3;
        fh_env_step(t->mv, t->ep, s, a[0], a[1], a[2], r);
        bar_pnl[(size_t)(s.t - t->val_begin)] += r.pnl;
        acc.trades += r.trades_closed;
        acc.wins += r.trades_won;
        acc.traded += r.traded;
        acc.gross_profit += r.gross_profit;
        acc.gross_loss += r.gross_loss;
        if (s.t + 1 >= t->seg_start[(size_t)k + 1] && s.pos != 0) { /* end of segment: flatten at its last close */
          fh_step_result f;
          fh_step_result_clear(f);
          fh_env_flatten(t->mv, t->ep, s, f);
          bar_pnl[(size_t)(s.t - t->val_begin)] += f.pnl;
          acc.trades += f.trades_closed;
          acc.wins += f.trades_won;
          acc.traded += f.traded;
          acc.gross_profit += f.gross_profit;
          acc.gross_loss += f.gross_loss;
        }
      }
    });
  }
  fh_trade_totals all;
  for (const fh_trade_totals& a : tt) {
    all.trades += a.trades;
    all.wins += a.wins;
    all.traded += a.traded;
    all.gross_profit += a.gross_profit;
    all.gross_loss += a.gross_loss;
  }
  fh_compute_metrics(bar_pnl.data(), t->session_of.data(), nval, t->n_sessions, all, t->cfg.initial_capital, out);
}
