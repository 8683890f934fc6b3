/*
 * metrics.h — validation metrics of one policy (SPEC 6, fh_metrics in foxhunt.h), the session and
 * segment layout of the validation range, shared by both backends and mirrored by src/env/metrics.ts
 * and src/env/evaluate.ts (same float64 operation order, so the numbers agree to the bit).
 *
 *   session_pnl (n_sessions)  $ per session, each step's PnL added in time order (a step t -> t+1
 *                             belongs to the session of bar t+1; the final flatten to the session
 *                             of the segment's last bar)
 *   step_pnl (n_step_pnl)     the equity path in time order: for each validation bar i, the step
 *                             booked to it, then the flatten booked to it (2 entries per bar)
 *   trade totals              closed trades, wins, gross profit/loss (>= 0), contracts traded,
 *                             accumulated step by step, segments in order within a step, then the
 *                             final flattens in segment order
 */
#ifndef FOXHUNT_NATIVE_METRICS_H
#define FOXHUNT_NATIVE_METRICS_H

#include <stdint.h>

#include "foxhunt.h"

struct fh_trade_totals {
  int64_t trades = 0, wins = 0, traded = 0;
  double gross_profit = 0.0, gross_loss = 0.0;
};

void fh_compute_metrics(const double* session_pnl, int32_t n_sessions, const double* step_pnl, int64_t n_step_pnl,
                        const fh_trade_totals& tt, int64_t bars, double initial_capital, fh_metrics* out);

/* Session index per validation bar (a session starts at val_begin and at every session_start bar
 * after it); returns the number of sessions. */
int32_t fh_val_sessions(const uint8_t* session_start, int64_t val_begin, int64_t val_end, int32_t* session_of);

/* Segments on session boundaries, sessions dealt out evenly: with S sessions starting at
 * starts[0..S) and n = max(1, min(segments, S)), segment i is [starts[i*S/n], starts[(i+1)*S/n])
 * (val_end for the last). Writes begin[k], end[k]; returns the count (<= segments). */
int32_t fh_val_segments(const uint8_t* session_start, int64_t val_begin, int64_t val_end, int32_t segments,
                        int64_t* begin, int64_t* end);

#endif /* FOXHUNT_NATIVE_METRICS_H */
