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

/* No episodes in evaluation: when k reaches T, k, realised and equity restart at 0 (after the booking). */
__device__ __forceinline__ void fh_eval_restart(const fh_env_params& p, fh_env_state& s) {
  if (s.k == p.episode_len) {
    s.k = 0;
    s.realised = 0.0;
    s.equity = 0.0;
  }
}

/* Bars t and t+1 of the market held in registers, an env.cuh market accessor (as fh_market_arrays): a
 * step at cursor t and the account after it read only these two bars. The fused evaluation loads them
 * in one round of independent loads ahead of the step, instead of the step's chain of dependent loads
 * from global memory (the last ones behind the stop test); the step is then the same code on the same
 * values. Only indices t and t+1 are held (any other reads bar t+1). */
template <typename V>
struct fh_bar_pair {  /* one market array's values at bars t and t + 1 */
  V v0, v1;
  __device__ __forceinline__ void load(const V* a, int64_t t) {
    v0 = a[t];
    v1 = a[t + 1];
  }
  __device__ __forceinline__ V at(int64_t i, int64_t t) const { return i == t ? v0 : v1; }
};
struct fh_eval_bars {
  int64_t t, end;
  fh_bar_pair<double> c, o, h, l, a;
  fh_bar_pair<uint8_t> s;
  __device__ __forceinline__ double close(int64_t i) const { return c.at(i, t); }
  __device__ __forceinline__ double open(int64_t i) const { return o.at(i, t); }
  __device__ __forceinline__ double high(int64_t i) const { return h.at(i, t); }
  __device__ __forceinline__ double low(int64_t i) const { return l.at(i, t); }
  __device__ __forceinline__ double atr(int64_t i) const { return a.at(i, t); }
  __device__ __forceinline__ uint8_t session_start(int64_t i) const { return s.at(i, t); }
  __device__ __forceinline__ int64_t train_end() const { return end; }
};

/* Requires t + 1 < n_bars (a step at cursor t). */
__device__ __forceinline__ fh_eval_bars fh_eval_load_bars(const fh_market_view& m, int64_t t) {
  fh_eval_bars b;
  b.t = t;
  b.end = m.train_end;
  b.c.load(m.close, t);
  b.o.load(m.open, t);
  b.h.load(m.high, t);
  b.l.load(m.low, t);
  b.a.load(m.atr, t);
  b.s.load(m.session_start, t);
  return b;
}

/* One evaluation step for the decoded target on any market accessor, without the booking: the record goes
 * to rec (the caller books it to bar s.t, the new cursor). */
template <class MK>
__device__ __forceinline__ void fh_eval_step_rec(const MK& mk, const fh_env_params& p, fh_env_state& s,
                                                 int32_t target, int32_t a2, fh_eval_rec& rec) {
  fh_step_result r;
  fh_env_step_to(mk, p, s, target, a2, r);
  rec = fh_eval_record(r);
  fh_eval_restart(p, s);
}

/* Step i of segment k (caller checks i < e-b-1) with the given action; books bar t+1. */
__device__ __forceinline__ void fh_eval_step_one(const fh_eval_args& a, fh_env_state& s, int32_t a0, int32_t a1,
                                                 int32_t a2) {
  fh_eval_rec rec;
  fh_eval_step_rec(fh_market_arrays{a.m}, a.p, s, fh_env_target(a.p, a0, a1), a2, rec);
  a.bar_rec[s.t - a.val_begin] = rec;
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
