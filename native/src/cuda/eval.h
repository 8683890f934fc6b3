/*
 * eval.h — greedy evaluation on the device (DESIGN §4 "Evaluation"): the validation range cut into
 * S contiguous segments on session boundaries, all S simulated in parallel, each starting flat at
 * its first bar and flattened at its last close. Step PnL is booked to bar t+1 (so to its session);
 * the final flatten to the segment's last bar. Per-bar PnL and per-segment trade counters stay on
 * the device until one async read-back into pinned memory; the host then finalises fh_metrics.
 *
 * Step i of the evaluation (i = 0 .. max_len-1), for segment k with bars [b_k, e_k):
 *   i <  e_k - b_k - 1  : step from t = b_k + i with the chosen action, PnL -> bar t+1
 *   i == e_k - b_k - 1  : flatten at close[e_k - 1], cost -> bar e_k - 1
 *   i >= e_k - b_k      : nothing
 *
 * Greedy policy, per step (graph-capturable; the orchestration runs the network in between):
 *   fh_launch_eval_observe(ev, m, dtype, obs, ld)  (S, D) observations of the segment cursors
 *   ... online forward + expected Q (S, sum n_d) ...
 *   fh_launch_eval_step(ev, m, q, ldq, i)            greedy argmax, step, book
 * Fixed policies (baselines: flat, buy-and-hold) need no network: fh_launch_eval_fixed runs all
 * steps of all segments in one launch with the same step code.
 * Before a run: fh_launch_eval_reset. After: fh_launch_eval_readback + one event/sync, then
 * fh_cuda_eval_finalise on the host.
 */
#ifndef FH_CUDA_EVAL_H
#define FH_CUDA_EVAL_H

#include "collect.h"

enum fh_eval_policy { FH_EVAL_GREEDY = 0, FH_EVAL_FLAT = 1, FH_EVAL_BUY_HOLD = 2 };

/* Per-segment accumulators (device), read back once. */
struct fh_eval_acc {
  double gross_profit;   /* of closed trades (costs included) */
  double gross_loss;     /* >= 0 */
  int64_t traded;        /* contracts traded */
  int32_t trades;        /* closed trades */
  int32_t wins;
};

struct fh_cuda_eval {
  int32_t n_seg;          /* S actually used (<= eval_segments; fewer when sessions are few) */
  int32_t max_len;        /* steps of a full evaluation = max segment length in bars */
  int32_t obs_dim;
  int64_t val_begin, val_end, n_val;
  fh_env_params p;        /* episode_len as the collection's (account features k/T, bars_held/T) */
  fh_market_view view;    /* the market with train_end = n_bars (no episode ends inside eval) */
  int32_t n_act[FH_MAX_BRANCHES];
  int32_t q_off[FH_MAX_BRANCHES];
  int32_t* seg_begin;     /* (S) device */
  int32_t* seg_end;       /* (S) device */
  int32_t* h_seg_begin;   /* (S) host copy */
  int32_t* h_seg_end;     /* (S) host copy */
  fh_env_state* state;    /* (S) */
  double* bar_pnl;        /* (n_val) $ booked to bar val_begin + i */
  fh_eval_acc* acc;       /* (S) */
  /* pinned host mirrors filled by fh_launch_eval_readback */
  double* h_bar_pnl;      /* (n_val) */
  fh_eval_acc* h_acc;     /* (S) */
};

/* Cuts the validation range of the host market into segments on session boundaries and allocates.
 * Needs m.val_begin >= window - 1 (features are causal: the window may reach before val_begin). */
fh_status fh_cuda_eval_alloc(const fh_config& cfg, const fh_env_params& p, const fh_market* host,
                             const fh_cuda_market& dm, fh_cuda_eval* out);
void fh_cuda_eval_free(fh_cuda_eval* ev);

/* Segments flat at their first bar; zero bar_pnl and acc. */
fh_status fh_launch_eval_reset(const fh_cuda_eval& ev, cudaStream_t s);
/* (S, D) observations of the segment cursors (segments past their end repeat their last bar). */
fh_status fh_launch_eval_observe(const fh_cuda_eval& ev, fh_dtype dtype, void* obs, int32_t ld, cudaStream_t s);
/* Step i with greedy actions from expected Q q (S, sum n_d; row stride ldq). */
fh_status fh_launch_eval_step(const fh_cuda_eval& ev, const float* q, int32_t ldq, int32_t step, cudaStream_t s);
/* A whole evaluation of a fixed policy (FH_EVAL_FLAT or FH_EVAL_BUY_HOLD), reset included. */
fh_status fh_launch_eval_fixed(const fh_cuda_eval& ev, fh_eval_policy policy, cudaStream_t s);
/* Async copies of bar_pnl and acc into the pinned mirrors (record an event after it). */
fh_status fh_launch_eval_readback(const fh_cuda_eval& ev, cudaStream_t s);

/* Host, after the read-back completed: metrics of the pinned mirrors (SPEC 6, fh_metrics). */
void fh_cuda_eval_finalise(const fh_cuda_eval& ev, const fh_market* host, double initial_capital,
                           fh_metrics* out);

#endif /* FH_CUDA_EVAL_H */
