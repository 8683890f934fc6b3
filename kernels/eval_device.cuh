/*
 * eval_device.cuh — device code of the greedy evaluation shared by kernels/eval.cu (the per-step
 * kernels of the cuBLASLt path and the baselines) and kernels/eval_fused.cu (the persistent fused
 * evaluation): the kernel arguments, one greedy step of a segment with its booking, the final
 * flatten, and the greedy argmax per branch (lowest index on ties). Semantics in
 * native/src/cuda/eval.h. Both files build with -fmad=false (the float64 money math of env.cuh).
 */
#ifndef FH_EVAL_DEVICE_CUH
#define FH_EVAL_DEVICE_CUH

#include "cuda_env_gather.cuh"
#include "../native/src/cuda/eval.h"

struct fh_eval_args {
  fh_market_view m;
  fh_env_params p;
  int32_t n_seg;
  int64_t val_begin;
  const int32_t* seg_begin;
  const int32_t* seg_end;
  fh_env_state* state;
  fh_eval_rec* bar_rec;
  fh_eval_rec* flat_rec;
};

struct fh_eval_q {
  int32_t n_act[FH_MAX_BRANCHES];
  int32_t q_off[FH_MAX_BRANCHES];
};

static inline fh_eval_args fh_eval_make_args(const fh_cuda_eval& ev) {
  fh_eval_args a;
  a.m = ev.view;
  a.p = ev.p;
  a.n_seg = ev.n_seg;
  a.val_begin = ev.val_begin;
  a.seg_begin = ev.seg_begin;
  a.seg_end = ev.seg_end;
  a.state = ev.state;
  a.bar_rec = ev.bar_rec;
  a.flat_rec = ev.flat_rec;
  return a;
}

static inline fh_eval_q fh_eval_make_q(const fh_cuda_eval& ev) {
  fh_eval_q qa;
  for (int d = 0; d < FH_MAX_BRANCHES; ++d) {
    qa.n_act[d] = ev.n_act[d];
    qa.q_off[d] = ev.q_off[d];
  }
  return qa;
}

__device__ __forceinline__ fh_eval_rec fh_eval_record(const fh_step_result& r) {
  fh_eval_rec x;
  x.pnl = r.pnl;
  x.gross_profit = r.gross_profit;
  x.gross_loss = r.gross_loss;
  x.traded = r.traded;
  x.closed = (int16_t)r.trades_closed;
  x.won = (int16_t)r.trades_won;
  return x;
}

/* Step i of segment k (caller checks i < e-b-1) with the given action; books bar t+1. */
__device__ __forceinline__ void fh_eval_step_one(const fh_eval_args& a, fh_env_state& s, int32_t a0, int32_t a1,
                                                 int32_t a2) {
  fh_step_result r;
  fh_env_step(a.m, a.p, s, a0, a1, a2, r);
  a.bar_rec[s.t - a.val_begin] = fh_eval_record(r);
  if (s.k == a.p.episode_len) { /* no episodes in evaluation */
    s.k = 0;
    s.realised = 0.0;
    s.equity = 0.0;
  }
}

__device__ __forceinline__ void fh_eval_finish_one(const fh_eval_args& a, fh_env_state& s, int32_t k) {
  fh_step_result r;
  fh_step_result_clear(r);
  fh_env_flatten(a.m, a.p, s, r);
  a.flat_rec[k] = fh_eval_record(r);
}

/* Greedy argmax per branch of one expected-Q row (lowest index on ties). */
__device__ __forceinline__ void fh_eval_greedy(const fh_eval_q& qa, const float* row, int32_t act[FH_MAX_BRANCHES]) {
#pragma unroll
  for (int d = 0; d < FH_MAX_BRANCHES; ++d) {
    const float* qd = row + qa.q_off[d];
    int32_t best_a = 0;
    float best = qd[0];
    for (int32_t j = 1; j < qa.n_act[d]; ++j) {
      const float v = qd[j];
      if (v > best) { best = v; best_a = j; }
    }
    act[d] = best_a;
  }
}

#endif /* FH_EVAL_DEVICE_CUH */
