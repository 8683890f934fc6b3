/*
 * eval.h — greedy evaluation on the device, the same semantics as src/env/evaluate.ts (DESIGN §4
 * "Evaluation"): the validation range is cut into S contiguous segments on session boundaries
 * (sessions dealt out evenly, evalSegments), all S simulated in parallel. Each starts flat at its
 * first bar b, steps t -> t+1 until t = e-1 (steps i = 0 .. e-b-2; segments with e-b <= 1 never
 * step), then is flattened at its last close. No episodes: when k reaches T, k, realised and equity
 * restart at 0. A step's PnL and trade counters are booked to bar t+1; the final flatten separately
 * per segment. Records stay on the device until one async read-back into pinned memory; the host
 * then sums them in the reference's order (steps in step-major, segment-minor order, then the
 * flattens) and finalises fh_metrics (fh_cuda_eval_finalise, a port of src/env/metrics.ts).
 *
 * Greedy policy (graph-capturable; the orchestration runs the network in between):
 *   fh_launch_eval_reset(ev)
 *   for i in 0 .. ev.max_steps-1:
 *     fh_launch_eval_observe(ev, dtype, obs, ld)   (S, D) observations of the segment cursors
 *     ... online forward + expected Q (S, sum n_d) ...
 *     fh_launch_eval_step(ev, q, ldq, i)            greedy argmax (lowest index on ties), step, book
 *   (or: observe once, then per step forward -> fh_launch_eval_step_observe(ev, q, ldq, i, dtype, obs, ld))
 *   fh_launch_eval_finish(ev)                       flatten every segment at its last close
 *   fh_launch_eval_readback(ev) + event;  host: fh_cuda_eval_finalise
 * Fixed policies (baselines flat and buy-and-hold) need no network: fh_launch_eval_fixed runs reset,
 * all steps and the finish of every segment in one launch with the same step code.
 */
#ifndef FH_CUDA_EVAL_H
#define FH_CUDA_EVAL_H

#include "collect.h"

enum fh_eval_policy { FH_EVAL_GREEDY = 0, FH_EVAL_FLAT = 1, FH_EVAL_BUY_HOLD = 2 };

/* One booking: a step (booked to bar t+1) or a segment's final flatten. */
struct fh_eval_rec {
  double pnl;            /* $ */
  double gross_profit;   /* of the trades closed by it (costs included) */
  double gross_loss;     /* >= 0 */
  int32_t traded;        /* contracts */
  int16_t closed;        /* trades closed */
  int16_t won;
};

struct fh_cuda_eval {
  int32_t n_seg;          /* S used (<= eval_segments; fewer when there are fewer sessions) */
  int32_t max_steps;      /* steps of a full evaluation = max over segments of (e - b - 1), >= 0 */
  int32_t obs_dim;
  int64_t val_begin, val_end, n_val;
  int32_t n_sessions;     /* sessions in the validation range */
  fh_env_params p;
  fh_market_view view;    /* device market */
  int32_t n_act[FH_MAX_BRANCHES];
  int32_t q_off[FH_MAX_BRANCHES];
  int32_t* seg_begin;     /* (S) device */
  int32_t* seg_end;       /* (S) device */
  int32_t* h_seg_begin;   /* (S) host */
  int32_t* h_seg_end;     /* (S) host */
  int32_t* h_session_of;  /* (n_val) host: session index of bar val_begin + i */
  fh_env_state* state;    /* (S) */
  fh_eval_rec* bar_rec;   /* (n_val) the step booked to bar val_begin + i (zero where none) */
  fh_eval_rec* flat_rec;  /* (S) the final flatten of each segment */
  fh_eval_rec* h_bar_rec; /* (n_val) pinned mirror */
  fh_eval_rec* h_flat_rec;/* (S) pinned mirror */
};

/* Cuts the validation range of the host market into segments (evalSegments) and allocates.
 * Needs val_begin >= window - 1 (features are causal: the window may reach before val_begin). */
fh_status fh_cuda_eval_alloc(const fh_config& cfg, const fh_env_params& p, const fh_market* host,
                             const fh_cuda_market& dm, fh_cuda_eval* out);
void fh_cuda_eval_free(fh_cuda_eval* ev);

/* Segments flat at their first bar; records zeroed. */
fh_status fh_launch_eval_reset(const fh_cuda_eval& ev, cudaStream_t s);
/* (S, D) observations of the segment cursors (row stride ld). */
fh_status fh_launch_eval_observe(const fh_cuda_eval& ev, fh_dtype dtype, void* obs, int32_t ld, cudaStream_t s);
/* Step i with greedy actions from expected Q q (S, >= sum n_d; row stride ldq). */
fh_status fh_launch_eval_step(const fh_cuda_eval& ev, const float* q, int32_t ldq, int32_t step, cudaStream_t s);
/* Fused: fh_launch_eval_step(i) then fh_launch_eval_observe of the new state, one launch. The loop is
 * then: observe once, per step i forward -> expected Q -> fh_launch_eval_step_observe(q, i, obs). */
fh_status fh_launch_eval_step_observe(const fh_cuda_eval& ev, const float* q, int32_t ldq, int32_t step,
                                      fh_dtype dtype, void* obs, int32_t ld, cudaStream_t s);
/* Flatten every segment at its last close (after the last step). */
fh_status fh_launch_eval_finish(const fh_cuda_eval& ev, cudaStream_t s);
/* A whole evaluation of a fixed policy (FH_EVAL_FLAT or FH_EVAL_BUY_HOLD): reset, steps, finish. */
fh_status fh_launch_eval_fixed(const fh_cuda_eval& ev, fh_eval_policy policy, cudaStream_t s);
/* Async copies of the records into the pinned mirrors (record an event after it). */
fh_status fh_launch_eval_readback(const fh_cuda_eval& ev, cudaStream_t s);

/* Host, after the read-back completed: metrics of the pinned mirrors (SPEC 6, fh_metrics). */
void fh_cuda_eval_finalise(const fh_cuda_eval& ev, const fh_market* host, double initial_capital,
                           fh_metrics* out);

#endif /* FH_CUDA_EVAL_H */
