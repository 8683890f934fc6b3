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
                        int64_t* begin, int64_t* end) {
  std::vector<int64_t> starts;
  starts.push_back(val_begin);
  for (int64_t b = val_begin + 1; b < val_end; ++b)
    if (session_start[b] == 1) starts.push_back(b);
  const int64_t S = (int64_t)starts.size();
  int64_t n = segments < S ? segments : S;
  if (n < 1) n = 1;
  int32_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t a = i * S / n;
    const int64_t b = (i + 1) * S / n;
    const int64_t lo = starts[(size_t)a];
    const int64_t hi = b < S ? starts[(size_t)b] : val_end;
    if (hi - lo >= 1) {
      begin[count] = lo;
      end[count] = hi;
      ++count;
    }
  }
  return count;
}

void fh_compute_metrics(const double* session_pnl, int32_t n_sessions, const double* step_pnl, int64_t n_step_pnl,
                        const fh_trade_totals& tt, int64_t bars, double initial_capital, fh_metrics* out) {
  const double nan = NAN;
  const double annual = sqrt(252.0);
  /* equity path: total and drawdown */
  double total = 0.0;
  for (int64_t i = 0; i < n_step_pnl; ++i) total += step_pnl[i];
  double equity = 0.0, peak = 0.0, dd = 0.0, dd_pct = 0.0;
  for (int64_t i = 0; i < n_step_pnl; ++i) {
    equity += step_pnl[i];
    if (equity > peak) peak = equity;
    const double d = peak - equity;
    if (d > dd) dd = d;
    const double pct = d / (initial_capital + peak) * 100.0;
    if (pct > dd_pct) dd_pct = pct;
  }
  /* Sharpe: mean / std (ddof 1) * sqrt(252) */
  out->sharpe = nan;
  if (n_sessions >= 2) {
    double sum = 0.0;
    for (int32_t i = 0; i < n_sessions; ++i) sum += session_pnl[i];
    const double mean = sum / n_sessions;
    double ss = 0.0;
    for (int32_t i = 0; i < n_sessions; ++i) ss += (session_pnl[i] - mean) * (session_pnl[i] - mean);
    const double sd = sqrt(ss / (n_sessions - 1));
    if (sd > 0.0) out->sharpe = mean / sd * annual;
  }
  /* Sortino: mean / sqrt(mean(min(x,0)^2)) * sqrt(252) */
  out->sortino = nan;
  if (n_sessions >= 1) {
    double sum = 0.0, down = 0.0;
    for (int32_t i = 0; i < n_sessions; ++i) {
      const double v = session_pnl[i];
      sum += v;
      if (v < 0.0) down += v * v;
    }
    if (down > 0.0) out->sortino = sum / n_sessions / sqrt(down / n_sessions) * annual;
  }
  out->max_drawdown = dd;
  out->max_drawdown_pct = dd_pct;
  out->profit_factor = tt.gross_loss > 0.0 ? tt.gross_profit / tt.gross_loss : nan;
  out->total_pnl = total;
  out->trades = (double)tt.trades;
  out->win_rate = tt.trades > 0 ? (double)tt.wins / (double)tt.trades : nan;
  out->turnover = bars > 0 ? (double)tt.traded / (double)bars : 0.0;
  out->sessions = (double)n_sessions;
}
