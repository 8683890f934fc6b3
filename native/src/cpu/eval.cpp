/*
 * eval.cpp — greedy evaluation over the validation range (DESIGN §4 "Evaluation"), mirroring
 * src/env/evaluate.ts operation for operation so both give the same metrics to the bit:
 *   - segments on session boundaries, sessions dealt out evenly (fh_val_segments); all segments
 *     step in parallel, each starting flat at its first bar, live while t+1 < its end;
 *   - no episodes: when k reaches T it restarts at 0 and realised/equity restart at 0 (the position
 *     is kept), so the account features stay in their training range;
 *   - a step's PnL is booked to bar t+1 (and its session); after all steps every segment is
 *     flattened at its last close, booked to that bar's flatten slot;
 *   - trade totals accumulate step by step, segments in order, then the flattens in segment order.
 * Policies: 0 greedy online net, 1 flat, 2 buy & hold (+max_contracts every step).
 */
#include <string.h>

#include "metrics.h"
#include "trainer.h"

void fh_cpu_eval_prepare(fh_trainer* t) {
  const int64_t n = t->val_end - t->val_begin;
  t->session_of.resize((size_t)n);
  t->n_sessions = fh_val_sessions(t->session_start.data(), t->val_begin, t->val_end, t->session_of.data());
  std::vector<int64_t> b((size_t)t->cfg.eval_segments), e((size_t)t->cfg.eval_segments);
  const int32_t count =
      fh_val_segments(t->session_start.data(), t->val_begin, t->val_end, t->cfg.eval_segments, b.data(), e.data());
  t->seg_begin.assign(b.begin(), b.begin() + count);
  t->seg_end.assign(e.begin(), e.begin() + count);
}

/* Apply a step result to the running record (evaluate.ts `book`). */
static void book(fh_trainer* t, const fh_step_result& r, int64_t bar, std::vector<double>& step_pnl, int slot,
                 std::vector<double>& session_pnl, fh_trade_totals& tt) {
  const int64_t i = bar - t->val_begin;
  step_pnl[(size_t)(2 * i + slot)] += r.pnl;
  session_pnl[(size_t)t->session_of[(size_t)i]] += r.pnl;
  tt.trades += r.trades_closed;
  tt.wins += r.trades_won;
  tt.gross_profit += r.gross_profit;
  tt.gross_loss += r.gross_loss;
  tt.traded += r.traded;
}

void fh_cpu_evaluate(fh_trainer* t, int policy, fh_metrics* out) {
  const int32_t S = (int32_t)t->seg_begin.size();
  const int64_t nval = t->val_end - t->val_begin;
  const int32_t D = t->D;
  const int32_t T = t->cfg.episode_len;
  std::vector<double> step_pnl((size_t)(2 * nval), 0.0);
  std::vector<double> session_pnl((size_t)t->n_sessions, 0.0);
  fh_trade_totals tt;
  std::vector<fh_env_state> st((size_t)S);
  std::vector<fh_step_result> res((size_t)S);
  std::vector<uint8_t> live((size_t)S);
  std::vector<int32_t> act((size_t)S * 3);
  std::vector<int32_t> active;
  std::vector<float> obs;
  for (int32_t k = 0; k < S; ++k) {
    fh_env_state& s = st[(size_t)k];
    fh_env_start_flat(s, t->seg_begin[(size_t)k]);
    live[(size_t)k] = t->seg_end[(size_t)k] - t->seg_begin[(size_t)k] > 1;
  }
  const int32_t mid = (t->cfg.branch_sizes[0] - 1) / 2;
  for (;;) {
    active.clear();
    for (int32_t k = 0; k < S; ++k)
      if (live[(size_t)k]) active.push_back(k);
    if (active.empty()) break;
    const int32_t na = (int32_t)active.size();
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
        const int32_t* a = act.data() + i * 3;
        fh_env_step(t->mv, t->ep, st[(size_t)k], a[0], a[1], a[2], res[(size_t)k]);
      }
    });
    for (int32_t i = 0; i < na; ++i) { /* book in segment order */
      const int32_t k = active[(size_t)i];
      fh_env_state& s = st[(size_t)k];
      book(t, res[(size_t)k], s.t, step_pnl, 0, session_pnl, tt);
      if (s.k == T) {
        s.k = 0;
        s.realised = 0.0;
        s.equity = 0.0;
      }
      if (s.t == t->seg_end[(size_t)k] - 1) live[(size_t)k] = 0;
    }
  }
  for (int32_t k = 0; k < S; ++k) { /* flatten every segment at its last close */
    fh_step_result f;
    fh_step_result_clear(f);
    fh_env_flatten(t->mv, t->ep, st[(size_t)k], f);
    book(t, f, st[(size_t)k].t, step_pnl, 1, session_pnl, tt);
  }
  fh_compute_metrics(session_pnl.data(), t->n_sessions, step_pnl.data(), 2 * nval, tt, nval, t->cfg.initial_capital,
                     out);
}
