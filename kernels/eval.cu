/*
 * eval.cu — greedy evaluation and the fixed-policy baselines on the device (semantics and booking
 * in native/src/cuda/eval.h, mirroring src/env/evaluate.ts). One thread per segment steps its env
 * with fh_env_step (env.cuh, float64, -fmad=false); one warp per segment gathers observations.
 *
 *   eval_reset     (S) threads   flat at the first bar; records zeroed by memset
 *   eval_observe   warp/segment  obs (S, D) (=)
 *   eval_step      (S) threads   greedy argmax of q (S, sum n_d) -> step i -> bar_rec[t+1] (=)
 *   eval_step_observe  warp/segment  greedy step i (lane 0) + obs of the new state: 1 launch per step
 *   eval_finish    (S) threads   fh_env_flatten -> flat_rec (=)
 *   eval_fixed     (S) threads   reset + all steps + finish with a fixed action (baselines)
 *   eval_split     grid-stride   the read-back's columns of bar_rec: pnl, step-major grosses, trade counters
 */
#include "eval_device.cuh"

#define FH_EVAL_BLOCK 64
#define FH_EVAL_OBS_WARPS 4

static fh_eval_args eval_args(const fh_cuda_eval& ev) { return fh_eval_make_args(ev); }
static fh_eval_q eval_q(const fh_cuda_eval& ev) { return fh_eval_make_q(ev); }

static __global__ void eval_reset_kernel(fh_eval_args a) {
  const int32_t k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= a.n_seg) return;
  fh_env_state s;
  fh_env_start_flat(s, a.seg_begin[k]);
  a.state[k] = s;
}

template <typename T, bool VEC>
static __global__ void eval_observe_kernel(fh_eval_args a, T* __restrict__ obs, int32_t ld) {
  __shared__ float acc[FH_EVAL_OBS_WARPS][FH_ENV_ACCOUNT];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int32_t k = blockIdx.x * FH_EVAL_OBS_WARPS + warp;
  if (k >= a.n_seg) return;
  const fh_env_state s = a.state[k];
  if (lane == 0) fh_env_account(a.m, a.p, s, acc[warp]);
  __syncwarp();
  fh_gather_obs_row<T, VEC>(a.m.features, a.m.n_features, a.p.window, s.t, acc[warp], lane, obs + (int64_t)k * ld);
}

/* Fused: greedy step i (lane 0) then the observation of the new state (whole warp): one launch per
 * evaluation step for the env part. */
template <typename T, bool VEC>
static __global__ void eval_step_observe_kernel(fh_eval_args a, fh_eval_q qa, const float* __restrict__ q,
                                                int32_t ldq, int32_t step, T* __restrict__ obs, int32_t ld) {
  __shared__ float acc[FH_EVAL_OBS_WARPS][FH_ENV_ACCOUNT];
  __shared__ int64_t cur_t[FH_EVAL_OBS_WARPS];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int32_t k = blockIdx.x * FH_EVAL_OBS_WARPS + warp;
  if (k >= a.n_seg) return;
  if (lane == 0) {
    fh_env_state s = a.state[k];
    if (step < a.seg_end[k] - a.seg_begin[k] - 1) {
      int32_t act[FH_MAX_BRANCHES];
      fh_eval_greedy(qa, q + (int64_t)k * ldq, act);
      fh_eval_step_one(a, s, act[0], act[1], act[2]);
      a.state[k] = s;
    }
    fh_env_account(a.m, a.p, s, acc[warp]);
    cur_t[warp] = s.t;
  }
  __syncwarp();
  fh_gather_obs_row<T, VEC>(a.m.features, a.m.n_features, a.p.window, cur_t[warp], acc[warp], lane,
                            obs + (int64_t)k * ld);
}

static __global__ void eval_step_kernel(fh_eval_args a, fh_eval_q qa, const float* __restrict__ q, int32_t ldq,
                                        int32_t step) {
  const int32_t k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= a.n_seg) return;
  const int32_t b = a.seg_begin[k], e = a.seg_end[k];
  if (step >= e - b - 1) return;
  fh_env_state s = a.state[k];
  int32_t act[FH_MAX_BRANCHES];
  fh_eval_greedy(qa, q + (int64_t)k * ldq, act);
  fh_eval_step_one(a, s, act[0], act[1], act[2]);
  a.state[k] = s;
}

static __global__ void eval_finish_kernel(fh_eval_args a) {
  const int32_t k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= a.n_seg) return;
  fh_env_state s = a.state[k];
  fh_eval_finish_one(a, s, k);
  a.state[k] = s;
}

static __global__ void eval_fixed_kernel(fh_eval_args a, int32_t a0, int32_t a1) {
  const int32_t k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= a.n_seg) return;
  const int32_t b = a.seg_begin[k], e = a.seg_end[k];
  fh_env_state s;
  fh_env_start_flat(s, b);
  for (int32_t i = 0; i < e - b - 1; ++i) fh_eval_step_one(a, s, a0, a1, 0);
  fh_eval_finish_one(a, s, k);
  a.state[k] = s;
}

/* ---------------------------------------------------------------- launchers */

static fh_status eval_clear(const fh_cuda_eval& ev, cudaStream_t s) {
  FH_CUDA_TRY(cudaMemsetAsync(ev.bar_rec, 0, sizeof(fh_eval_rec) * (size_t)ev.n_val, s));
  FH_CUDA_TRY(cudaMemsetAsync(ev.flat_rec, 0, sizeof(fh_eval_rec) * (size_t)ev.n_seg, s));
  return FH_OK;
}

fh_status fh_launch_eval_reset(const fh_cuda_eval& ev, cudaStream_t s) {
  FH_TRY(eval_clear(ev, s));
  eval_reset_kernel<<<CEIL_DIV(ev.n_seg, FH_EVAL_BLOCK), FH_EVAL_BLOCK, 0, s>>>(eval_args(ev));
  FH_LAUNCH_CHECK();
  return FH_OK;
}

template <typename T>
static fh_status launch_eval_observe_t(const fh_cuda_eval& ev, T* obs, int32_t ld, cudaStream_t s) {
  const dim3 grid(CEIL_DIV(ev.n_seg, FH_EVAL_OBS_WARPS)), block(32 * FH_EVAL_OBS_WARPS);
  if (fh_gather_vec_ok(ev.view.n_features, ev.p.window, ld))
    eval_observe_kernel<T, true><<<grid, block, 0, s>>>(eval_args(ev), obs, ld);
  else
    eval_observe_kernel<T, false><<<grid, block, 0, s>>>(eval_args(ev), obs, ld);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

fh_status fh_launch_eval_observe(const fh_cuda_eval& ev, fh_dtype dtype, void* obs, int32_t ld, cudaStream_t s) {
  if (!obs || ld < ev.obs_dim) return FH_ERR_INVALID_ARGUMENT;
  if (dtype == FH_BF16) return launch_eval_observe_t<fh_bf16>(ev, static_cast<fh_bf16*>(obs), ld, s);
  return launch_eval_observe_t<float>(ev, static_cast<float*>(obs), ld, s);
}

fh_status fh_launch_eval_step(const fh_cuda_eval& ev, const float* q, int32_t ldq, int32_t step, cudaStream_t s) {
  const fh_eval_q qa = eval_q(ev);
  eval_step_kernel<<<CEIL_DIV(ev.n_seg, FH_EVAL_BLOCK), FH_EVAL_BLOCK, 0, s>>>(eval_args(ev), qa, q, ldq, step);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

template <typename T>
static fh_status launch_eval_step_observe_t(const fh_cuda_eval& ev, const float* q, int32_t ldq, int32_t step, T* obs,
                                            int32_t ld, cudaStream_t s) {
  const dim3 grid(CEIL_DIV(ev.n_seg, FH_EVAL_OBS_WARPS)), block(32 * FH_EVAL_OBS_WARPS);
  if (fh_gather_vec_ok(ev.view.n_features, ev.p.window, ld))
    eval_step_observe_kernel<T, true><<<grid, block, 0, s>>>(eval_args(ev), eval_q(ev), q, ldq, step, obs, ld);
  else
    eval_step_observe_kernel<T, false><<<grid, block, 0, s>>>(eval_args(ev), eval_q(ev), q, ldq, step, obs, ld);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

fh_status fh_launch_eval_step_observe(const fh_cuda_eval& ev, const float* q, int32_t ldq, int32_t step,
                                      fh_dtype dtype, void* obs, int32_t ld, cudaStream_t s) {
  if (!q || !obs || ld < ev.obs_dim) return FH_ERR_INVALID_ARGUMENT;
  if (dtype == FH_BF16) return launch_eval_step_observe_t<fh_bf16>(ev, q, ldq, step, static_cast<fh_bf16*>(obs), ld, s);
  return launch_eval_step_observe_t<float>(ev, q, ldq, step, static_cast<float*>(obs), ld, s);
}

fh_status fh_launch_eval_finish(const fh_cuda_eval& ev, cudaStream_t s) {
  eval_finish_kernel<<<CEIL_DIV(ev.n_seg, FH_EVAL_BLOCK), FH_EVAL_BLOCK, 0, s>>>(eval_args(ev));
  FH_LAUNCH_CHECK();
  return FH_OK;
}

/* actionForTarget of src/env/reference.ts: the (a0, a1) whose target is nearest, first on ties. */
static void action_for_target(const fh_env_params& p, int32_t target, int32_t* a0_out, int32_t* a1_out) {
  int32_t b0 = (p.n_dir - 1) / 2, b1 = 0;
  int64_t best = target < 0 ? -(int64_t)target : target;
  for (int32_t a0 = 0; a0 < p.n_dir; ++a0)
    for (int32_t a1 = 0; a1 < p.n_size; ++a1) {
      int64_t err = (int64_t)fh_env_target(p, a0, a1) - target;
      if (err < 0) err = -err;
      if (err < best) {
        best = err;
        b0 = a0;
        b1 = a1;
      }
    }
  *a0_out = b0;
  *a1_out = b1;
}

fh_status fh_launch_eval_fixed(const fh_cuda_eval& ev, fh_eval_policy policy, cudaStream_t s) {
  if (policy != FH_EVAL_FLAT && policy != FH_EVAL_BUY_HOLD) return FH_ERR_INVALID_ARGUMENT;
  int32_t a0, a1;
  action_for_target(ev.p, policy == FH_EVAL_FLAT ? 0 : ev.p.max_contracts, &a0, &a1);
  FH_TRY(eval_clear(ev, s));
  eval_fixed_kernel<<<CEIL_DIV(ev.n_seg, FH_EVAL_BLOCK), FH_EVAL_BLOCK, 0, s>>>(eval_args(ev), a0, a1);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

/* The read-back's columns of bar_rec (eval.h): pnl in bar order; the gross profit and loss step-major (step i of
 * segment k at i * S + k, zero past the segment's last step); the trade counters over every step's record, summed per
 * warp and added into counts (zeroed first; integers, so the order does not matter). */
static __global__ void eval_split_kernel(const fh_eval_rec* __restrict__ rec, int64_t V,
                                         const int32_t* __restrict__ seg_begin, const int32_t* __restrict__ seg_end,
                                         int32_t S, int32_t steps, int64_t val_begin, double* __restrict__ pnl,
                                         double2* __restrict__ gross, unsigned long long* __restrict__ counts) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x, g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (int64_t i = g; i < V; i += stride) pnl[i] = rec[i].pnl;
  long long c[3] = {0, 0, 0};
  const int64_t n = (int64_t)steps * S;
  for (int64_t j = g; j < n; j += stride) {
    const fh_eval_rec* r = fh_eval_step_record(rec, seg_begin, seg_end, S, val_begin, j);
    double2 v = make_double2(0.0, 0.0);
    if (r) {
      v = make_double2(r->gross_profit, r->gross_loss);
      c[0] += r->closed;
      c[1] += r->won;
      c[2] += r->traded;
    }
    gross[j] = v;
  }
#pragma unroll
  for (int q = 0; q < 3; ++q) {
    for (int o = 16; o > 0; o >>= 1) c[q] += __shfl_down_sync(0xffffffffu, c[q], o);
    if ((threadIdx.x & 31) == 0 && c[q] != 0) atomicAdd(&counts[q], (unsigned long long)c[q]);
  }
}

fh_status fh_launch_eval_readback(const fh_cuda_eval& ev, cudaStream_t s) {
  const int64_t n = (int64_t)ev.max_steps * ev.n_seg, m = n > ev.n_val ? n : ev.n_val;
  FH_CUDA_TRY(cudaMemsetAsync(ev.counts, 0, 3 * sizeof(unsigned long long), s));
  if (m > 0) {
    const int64_t blocks = CEIL_DIV(m, 256) < 1024 ? CEIL_DIV(m, 256) : 1024;
    eval_split_kernel<<<(unsigned)blocks, 256, 0, s>>>(ev.bar_rec, ev.n_val, ev.seg_begin, ev.seg_end,
                                                                 ev.n_seg, ev.max_steps, ev.val_begin, ev.pnl, ev.gross,
                                                                 ev.counts);
    FH_LAUNCH_CHECK();
  }
  FH_CUDA_TRY(cudaMemcpyAsync(ev.h_pnl, ev.pnl, sizeof(double) * (size_t)ev.n_val, cudaMemcpyDeviceToHost, s));
  if (n > 0)
    FH_CUDA_TRY(cudaMemcpyAsync(ev.h_gross, ev.gross, sizeof(double2) * (size_t)n, cudaMemcpyDeviceToHost, s));
  FH_CUDA_TRY(cudaMemcpyAsync(ev.h_counts, ev.counts, 3 * sizeof(unsigned long long), cudaMemcpyDeviceToHost, s));
  FH_CUDA_TRY(cudaMemcpyAsync(ev.h_flat_rec, ev.flat_rec, sizeof(fh_eval_rec) * (size_t)ev.n_seg,
                              cudaMemcpyDeviceToHost, s));
  return FH_OK;
}
