/* metrics.cpp — validation metrics, sessions and evaluation segments (see metrics.h). */
#include "metrics.h"

#include <math.h>

#include <vector>

int32_t fh_val_sessions(const uint8_t* session_start, int64_t val_begin, int64_t val_end, int32_t* session_of) {
  int32_t s = 0;
  for (int64_t b = val_begin; b < val_end; ++b) {
    if (b > val_begin && session_start[b] == 1) ++s;
    session_of[b - val_begin] = s;
  }
  return s + 1;
}

int32_t fh_val_segments(const uint8_t* session_start, int64_t val_begin, int64_t val_end, int32_t segments,
                        int64_t* starts) {
  const int64_t n = val_end - val_begin;
  int32_t count = 0;
  starts[count++] = val_begin;
  int64_t b = val_begin + 1;
  for (int32_t k = 1; k < segments; ++k) {
    const int64_t want = val_begin + n * k / segments;
    if (b < want) b = want;
    while (b < val_end && session_start[b] != 1) ++b;
    /* a piece needs at least 2 bars (one step) */
    if (b >= val_end - 1) break;
    if (b - starts[count - 1] >= 2) starts[count++] = b;
    ++b;
  }
  return count;
}

void fh_compute_metrics(const double* bar_pnl, const int32_t* session_of, int64_t n, int32_t n_sessions,
                        const fh_trade_totals& tt, double initial_capital, fh_metrics* out) {
  const double nan = NAN;
  std::vector<double> sess((size_t)n_sessions, 0.0);
  double total = 0.0, peak = 0.0, equity = 0.0, dd = 0.0, dd_pct = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    sess[(size_t)session_of[i]] += bar_pnl[i];
    equity += bar_pnl[i];
    if (equity > peak) peak = equity;
    const double d = peak - equity;
    if (d > dd) dd = d;
    const double pct = d / (initial_capital + peak) * 100.0;
    if (pct > dd_pct) dd_pct = pct;
  }
  total = equity;
  double mean = 0.0;
  for (double x : sess) mean += x;
  mean /= (double)n_sessions;
  double var = 0.0, down = 0.0;
  int64_t losing = 0;
  for (double x : sess) {
    var += (x - mean) * (x - mean);
    if (x < 0.0) {
      down += x * x;
      ++losing;
    }
  }
  const double sd = n_sessions >= 2 ? sqrt(var / (double)(n_sessions - 1)) : 0.0;
  out->sharpe = n_sessions >= 2 && sd > 0.0 ? mean / sd * sqrt(252.0) : nan;
  out->sortino = losing > 0 ? mean / sqrt(down / (double)n_sessions) * sqrt(252.0) : nan;
  out->max_drawdown = dd;
  out->max_drawdown_pct = dd_pct;
  out->profit_factor = tt.gross_loss > 0.0 ? tt.gross_profit / tt.gross_loss : nan;
  out->total_pnl = total;
  out->trades = (double)tt.trades;
  out->win_rate = tt.trades > 0 ? (double)tt.wins / (double)tt.trades : nan;
  out->turnover = n > 0 ? (double)tt.traded / (double)n : 0.0;
  out->sessions = (double)n_sessions;
}
