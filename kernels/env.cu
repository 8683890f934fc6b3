/*
 * env.cu — the CUDA environment (DESIGN §4, §6): reset, observation gather, epsilon-greedy action
 * selection, and the env step that writes the replay row. The env math is env.cuh (shared with the
 * CPU backend, float64, built with -fmad=false so both backends agree bit for bit).
 *
 *   env_reset_all      (N) threads   fh_env_reset(counter = *env_step)
 *   env_observe        one warp per env: obs (N, D) = features rows + account features (=)
 *   select_actions     (N) threads   q (N, sum n_d) -> actions (N, 3) via fh_epsilon/fh_explore_action
 *   env_step           (N) threads   actions -> state, reward, done, ...; replay row; leaves
 *   env_act_step_observe  one warp per env: select + step + replay row (lane 0), then the obs of
 *                      the new state (whole warp): the env part of a collection step in 1 launch
 *   collect_end        1 thread      *env_step += steps (then the sum tree rebuild, per.cu)
 *
 * Launch constraints: none beyond N >= 1; all launchers are graph-capturable.
 */
#include "cuda_env_gather.cuh"
#include "../native/src/cuda/collect.h"
#include "../native/src/cuda/replay.h"

#define FH_ENV_BLOCK 128
#define FH_OBS_WARPS 8

/* ---------------------------------------------------------------- kernels */

static __global__ void env_reset_all_kernel(fh_market_view m, fh_env_params p, fh_env_state* state, int32_t n,
                                            uint64_t seed, const int64_t* env_step) {
  const int32_t e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= n) return;
  fh_env_state s;
  fh_env_reset(m, p, s, seed, (uint32_t)e, (uint64_t)*env_step);
  state[e] = s;
}

template <typename T, bool VEC>
static __global__ void env_observe_kernel(fh_market_view m, fh_env_params p, const fh_env_state* __restrict__ state,
                                          int32_t n, T* __restrict__ obs, int32_t ld) {
  __shared__ float acc[FH_OBS_WARPS][FH_ENV_ACCOUNT];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int32_t e = blockIdx.x * FH_OBS_WARPS + warp;
  if (e >= n) return; /* whole warp leaves together */
  const fh_env_state s = state[e];
  if (lane == 0) fh_env_account(m, p, s, acc[warp]);
  __syncwarp();
  fh_gather_obs_row<T, VEC>(m.features, m.n_features, p.window, s.t, acc[warp], lane, obs + (int64_t)e * ld);
}

struct fh_select_args {
  int32_t n, greedy;
  int32_t n_act[FH_MAX_BRANCHES];
  int32_t q_off[FH_MAX_BRANCHES];
  float eps_start, eps_end;
  double decay;
  uint64_t seed;
};

/* Epsilon-greedy actions of env e at counter c from its expected-Q row. */
__device__ __forceinline__ void fh_select_one(const fh_select_args& a, const float* __restrict__ row, int32_t e,
                                              int64_t c, double eps, int32_t act[FH_MAX_BRANCHES]) {
#pragma unroll
  for (int d = 0; d < FH_MAX_BRANCHES; ++d) {
    const float* qd = row + a.q_off[d];
    int32_t best_a = 0;
    float best = qd[0];
    for (int32_t k = 1; k < a.n_act[d]; ++k) {
      const float v = qd[k];
      if (v > best) { best = v; best_a = k; } /* ties: lowest index */
    }
    act[d] = a.greedy ? best_a : fh_explore_action(a.seed, (uint32_t)e, (uint64_t)c, d, a.n_act[d], eps, best_a);
  }
}

__device__ __forceinline__ double fh_select_eps(const fh_select_args& a, int64_t c) {
  return a.greedy ? 0.0 : fh_epsilon(a.eps_start, a.eps_end, a.decay, (uint64_t)c, a.n);
}

static __global__ void select_actions_kernel(fh_select_args a, const float* __restrict__ q, int32_t ldq,
                                             const int64_t* __restrict__ env_step, int32_t step_in_epoch,
                                             int32_t* __restrict__ actions, float* __restrict__ eps_out) {
  const int32_t e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= a.n) return;
  const int64_t c = *env_step + step_in_epoch;
  const double eps = fh_select_eps(a, c);
  if (e == 0) *eps_out = (float)eps;
  int32_t act[FH_MAX_BRANCHES];
  fh_select_one(a, q + (int64_t)e * ldq, e, c, eps, act);
#pragma unroll
  for (int d = 0; d < FH_MAX_BRANCHES; ++d) actions[e * 3 + d] = act[d];
}

struct fh_step_args {
  int32_t n;
  uint64_t seed;
  /* replay (rows == 0: no replay) */
  fh_replay_view v;
  int32_t n_step;
  float* leaf;
  const float* max_priority;
  /* per-env outputs of the last step (any may be NULL) */
  float* reward;
  uint8_t* done;
  int32_t* position;
  int64_t* cursor;
  double* equity;
  double* pnl;
  double* cost;
};

/* Step env e at counter c with its actions: replay row, leaves, reset after done, outputs. */
__device__ __forceinline__ void fh_step_one(const fh_market_view& m, const fh_env_params& p, const fh_step_args& a,
                                            fh_env_state& s, int32_t e, int64_t c, int32_t a0, int32_t a1,
                                            int32_t a2) {
  int64_t slot = -1;
  if (a.v.rows > 0) {
    const int64_t row = c % a.v.rows;
    slot = row * a.n + e;
    float acc[FH_ENV_ACCOUNT];
    fh_env_account(m, p, s, acc);
    float4* dst = reinterpret_cast<float4*>(a.v.account + slot * FH_ENV_ACCOUNT);
    dst[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
    dst[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
    a.v.bar[slot] = (int32_t)s.t;
    a.v.act[slot * 3 + 0] = (uint8_t)a0;
    a.v.act[slot * 3 + 1] = (uint8_t)a1;
    a.v.act[slot * 3 + 2] = (uint8_t)a2;
  }
  fh_step_result r;
  fh_env_step(m, p, s, a0, a1, a2, r);
  if (slot >= 0) {
    a.v.reward[slot] = r.reward;
    a.v.done[slot] = (uint8_t)r.done;
    a.leaf[slot] = 0.0f;                      /* this row waits for its n-step successors */
    if (c >= a.n_step) {                      /* row c-n just became complete */
      const int64_t old = ((c - a.n_step) % a.v.rows) * a.n + e;
      a.leaf[old] = *a.max_priority;
    }
  }
  /* outputs describe the step's result, before the reset (as the CPU backend's probe) */
  if (a.reward) a.reward[e] = r.reward;
  if (a.done) a.done[e] = (uint8_t)r.done;
  if (a.position) a.position[e] = s.pos;
  if (a.cursor) a.cursor[e] = s.t;
  if (a.equity) a.equity[e] = s.equity;
  if (a.pnl) a.pnl[e] = r.pnl;
  if (a.cost) a.cost[e] = r.cost;
  if (r.done) fh_env_reset(m, p, s, a.seed, (uint32_t)e, (uint64_t)(c + 1)); /* as the CPU backend: c + 1 */
}

static __global__ void env_step_kernel(fh_market_view m, fh_env_params p, fh_step_args a, fh_env_state* state,
                                       const int64_t* __restrict__ env_step, int32_t step_in_epoch,
                                       const int32_t* __restrict__ actions) {
  const int32_t e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= a.n) return;
  const int64_t c = *env_step + step_in_epoch;
  fh_env_state s = state[e];
  fh_step_one(m, p, a, s, e, c, actions[e * 3 + 0], actions[e * 3 + 1], actions[e * 3 + 2]);
  state[e] = s;
}

/* Fused collection step: one warp per env; lane 0 selects (epsilon-greedy from q), steps, writes the
 * replay row; then the warp gathers the observation of the new state into obs (the next step's input). */
template <typename T, bool VEC>
static __global__ void env_act_step_observe_kernel(fh_market_view m, fh_env_params p, fh_select_args sa,
                                                   fh_step_args a, fh_env_state* state,
                                                   const int64_t* __restrict__ env_step, int32_t step_in_epoch,
                                                   const float* __restrict__ q, int32_t ldq,
                                                   int32_t* __restrict__ actions, float* __restrict__ eps_out,
                                                   T* __restrict__ obs, int32_t ld) {
  __shared__ float acc[FH_OBS_WARPS][FH_ENV_ACCOUNT];
  __shared__ int32_t cur_t[FH_OBS_WARPS];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int32_t e = blockIdx.x * FH_OBS_WARPS + warp;
  if (e >= a.n) return;
  if (lane == 0) {
    const int64_t c = *env_step + step_in_epoch;
    const double eps = fh_select_eps(sa, c);
    if (e == 0) *eps_out = (float)eps;
    int32_t act[FH_MAX_BRANCHES];
    fh_select_one(sa, q + (int64_t)e * ldq, e, c, eps, act);
    fh_env_state s = state[e];
    fh_step_one(m, p, a, s, e, c, act[0], act[1], act[2]);
    state[e] = s;
    actions[e * 3 + 0] = act[0];
    actions[e * 3 + 1] = act[1];
    actions[e * 3 + 2] = act[2];
    fh_env_account(m, p, s, acc[warp]);
    cur_t[warp] = (int32_t)s.t;
  }
  __syncwarp();
  fh_gather_obs_row<T, VEC>(m.features, m.n_features, p.window, (int64_t)cur_t[warp], acc[warp], lane,
                            obs + (int64_t)e * ld);
}

static __global__ void collect_end_kernel(int64_t* env_step, int32_t steps) { *env_step += steps; }

/* ---------------------------------------------------------------- launchers */

fh_status fh_launch_env_reset_all(const fh_cuda_envs& e, const fh_cuda_market& m, cudaStream_t s) {
  env_reset_all_kernel<<<CEIL_DIV(e.n, FH_ENV_BLOCK), FH_ENV_BLOCK, 0, s>>>(m.view, e.p, e.state, e.n, e.seed,
                                                                          e.env_step);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

template <typename T>
static fh_status launch_observe_t(const fh_cuda_envs& e, const fh_cuda_market& m, T* obs, int32_t ld,
                                  cudaStream_t s) {
  const dim3 grid(CEIL_DIV(e.n, FH_OBS_WARPS)), block(32 * FH_OBS_WARPS);
  if (fh_gather_vec_ok(m.view.n_features, e.p.window, ld))
    env_observe_kernel<T, true><<<grid, block, 0, s>>>(m.view, e.p, e.state, e.n, obs, ld);
  else
    env_observe_kernel<T, false><<<grid, block, 0, s>>>(m.view, e.p, e.state, e.n, obs, ld);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

fh_status fh_launch_env_observe(const fh_cuda_envs& e, const fh_cuda_market& m, fh_dtype dtype, void* obs,
                                int32_t ld, cudaStream_t s) {
  if (!obs || ld < e.obs_dim) return FH_ERR_INVALID_ARGUMENT;
  if (dtype == FH_BF16) return launch_observe_t<fh_bf16>(e, m, static_cast<fh_bf16*>(obs), ld, s);
  return launch_observe_t<float>(e, m, static_cast<float*>(obs), ld, s);
}

static fh_select_args select_args(const fh_cuda_envs& e, int32_t greedy) {
  fh_select_args a;
  a.n = e.n;
  a.greedy = greedy;
  for (int d = 0; d < FH_MAX_BRANCHES; ++d) {
    a.n_act[d] = e.n_act[d];
    a.q_off[d] = e.q_off[d];
  }
  a.eps_start = e.eps_start;
  a.eps_end = e.eps_end;
  a.decay = e.eps_decay_steps;
  a.seed = e.seed;
  return a;
}

static fh_status step_args(const fh_cuda_envs& e, const fh_cuda_replay* r, fh_step_args* a) {
  memset(a, 0, sizeof *a);
  a->n = e.n;
  a->seed = e.seed;
  if (r) {
    if (r->n_envs != e.n) return FH_ERR_INVALID_ARGUMENT;
    a->v = r->v;
    a->n_step = r->n_step;
    a->leaf = r->tree.leaf;
    a->max_priority = r->max_priority;
  }
  a->reward = e.reward;
  a->done = e.done;
  a->position = e.position;
  a->cursor = e.cursor;
  a->equity = e.equity;
  a->pnl = e.pnl;
  a->cost = e.cost;
  return FH_OK;
}

fh_status fh_launch_select_actions(const fh_cuda_envs& e, const float* q, int32_t ldq, int32_t step_in_epoch,
                                   int32_t greedy, cudaStream_t s) {
  select_actions_kernel<<<CEIL_DIV(e.n, FH_ENV_BLOCK), FH_ENV_BLOCK, 0, s>>>(select_args(e, greedy), q, ldq, e.env_step,
                                                                           step_in_epoch, e.actions, e.epsilon);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

fh_status fh_launch_env_step(const fh_cuda_envs& e, const fh_cuda_market& m, const fh_cuda_replay* r,
                             int32_t step_in_epoch, cudaStream_t s) {
  fh_step_args a;
  FH_TRY(step_args(e, r, &a));
  env_step_kernel<<<CEIL_DIV(e.n, FH_ENV_BLOCK), FH_ENV_BLOCK, 0, s>>>(m.view, e.p, a, e.state, e.env_step,
                                                                     step_in_epoch, e.actions);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

template <typename T>
static fh_status launch_fused_t(const fh_cuda_envs& e, const fh_cuda_market& m, const fh_cuda_replay* r,
                                const float* q, int32_t ldq, int32_t step_in_epoch, T* obs, int32_t ld,
                                cudaStream_t s) {
  fh_step_args a;
  FH_TRY(step_args(e, r, &a));
  const fh_select_args sa = select_args(e, 0);
  const dim3 grid(CEIL_DIV(e.n, FH_OBS_WARPS)), block(32 * FH_OBS_WARPS);
  if (fh_gather_vec_ok(m.view.n_features, e.p.window, ld))
    env_act_step_observe_kernel<T, true><<<grid, block, 0, s>>>(m.view, e.p, sa, a, e.state, e.env_step, step_in_epoch,
                                                                q, ldq, e.actions, e.epsilon, obs, ld);
  else
    env_act_step_observe_kernel<T, false><<<grid, block, 0, s>>>(m.view, e.p, sa, a, e.state, e.env_step,
                                                                 step_in_epoch, q, ldq, e.actions, e.epsilon, obs, ld);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

fh_status fh_launch_env_act_step_observe(const fh_cuda_envs& e, const fh_cuda_market& m, const fh_cuda_replay* r,
                                         const float* q, int32_t ldq, int32_t step_in_epoch, fh_dtype dtype,
                                         void* obs, int32_t ld, cudaStream_t s) {
  if (!q || !obs || ld < e.obs_dim) return FH_ERR_INVALID_ARGUMENT;
  if (dtype == FH_BF16)
    return launch_fused_t<fh_bf16>(e, m, r, q, ldq, step_in_epoch, static_cast<fh_bf16*>(obs), ld, s);
  return launch_fused_t<float>(e, m, r, q, ldq, step_in_epoch, static_cast<float*>(obs), ld, s);
}

fh_status fh_launch_collect_end(const fh_cuda_envs& e, const fh_cuda_replay* r, int32_t steps, cudaStream_t s) {
  collect_end_kernel<<<1, 1, 0, s>>>(e.env_step, steps);
  FH_LAUNCH_CHECK();
  if (r) return fh_launch_tree_rebuild(r->tree, s);
  return FH_OK;
}
