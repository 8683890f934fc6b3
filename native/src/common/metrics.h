/*
 * metrics.h — validation metrics of one policy (SPEC 6, fh_metrics in foxhunt.h) from what the
 * evaluation booked, shared by both backends (the CUDA backend copies its per-bar PnL back once).
 *
 * Inputs, over the validation range [val_begin, val_end) of n bars:
 *   bar_pnl (n)      $ booked to bar val_begin + i (a step's PnL goes to the bar it ends on, t+1;
 *                    a segment's final flatten goes to its last bar)
 *   session_of (n)   session index of each bar, 0 .. n_sessions-1 (a session starts at val_begin and
 *                    at every session_start bar after it)
 *   trades           closed trades; wins, gross_profit, gross_loss (>= 0) of them
 *   traded           contracts traded in total
 */
#ifndef FOXHUNT_NATIVE_METRICS_H
#define FOXHUNT_NATIVE_METRICS_H

#include <stdint.h>

#include "foxhunt.h"

struct fh_trade_totals {
  int64_t trades = 0, wins = 0, traded = 0;
  double gross_profit = 0.0, gross_loss = 0.0;
};

void fh_compute_metrics(const double* bar_pnl, const int32_t* session_of, int64_t n, int32_t n_sessions,
                        const fh_trade_totals& tt, double initial_capital, fh_metrics* out);

/* Session index per validation bar; returns the number of sessions. */
int32_t fh_val_sessions(const uint8_t* session_start, int64_t val_begin, int64_t val_end, int32_t* session_of);

/* Cut [val_begin, val_end) into at most `segments` contiguous pieces starting on session starts:
 * boundary k (1..S-1) is the first session start >= val_begin + k*n/S. Writes begin offsets
 * (bar indices) into starts[0..count), count <= segments; piece i ends where piece i+1 begins. */
int32_t fh_val_segments(const uint8_t* session_start, int64_t val_begin, int64_t val_end, int32_t segments,
                        int64_t* starts);

#endif /* FOXHUNT_NATIVE_METRICS_H */
