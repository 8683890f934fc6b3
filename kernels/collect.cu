/*
 * collect.cu — the replay side of a train step's input: n-step assembly and the observation gather
 * for a sampled batch (DESIGN §6). Observations are never stored: they are rebuilt from the feature
 * matrix by the stored bar index plus the stored account features.
 *
 *   replay_gather   one warp per (sample j, which): which 0 -> s (slot), 1 -> s' (next slot)
 *                   obs (B, D) / next_obs (B, D) rows (=), fp32 or bf16, 16-byte loads and stores
 *                   (bf16 rows copy the market's bf16 feature matrix: half the bytes, same bits)
 *                   which 0 also writes act (B, 3) int32, ret (B), disc (B) via fh_replay_nstep;
 *                   which 1 writes nbar (B), the bar of s', and nslot (B), its slot
 *   replay_gather_pair  bf16 batches whose s and s' share their market rows (fh_pair_layout, net_kernels.cuh): one warp
 *                   per sample j writes [0, mkt + K) of its block at blk + j*P: account of s, zeros, the features of
 *                   bars t-W+1 .. t+n (t = the bar of s), account of s', zeros. When no episode ends within the n steps
 *                   (disc != 0), s' is the state at bar t+n, so its run holds the usual gather's s' row bit for bit.
 *                   When one ends (disc == 0) it does not (the stored s' is a new episode's): the loss reads nothing of
 *                   s' then (the C51 target is the return's delta; loss.cu). Bars past the data are zeros. Also act,
 *                   ret, disc, nbar, nslot as above.
 *
 * Launch constraints: B <= batch.cap; slots in [0, capacity). Graph-capturable.
 */
#include "cuda_env_gather.cuh"
#include "../native/src/cuda/replay.h"
#include "mma.cuh"
#include "net_kernels.cuh"

#include <stdlib.h>

#include <type_traits>

#define FH_GATHER_WARPS 8

/* A bf16 observation row from the bf16 copy of the feature matrix: 16-byte copies (8 elements; needs
 * F % 8 == 0 and ld % 8 == 0), then the 8 account features. */
__device__ __forceinline__ void fh_gather_obs_row_bf16(const fh_bf16* __restrict__ features, int32_t F,
                                                       int32_t window, int64_t t, const float* acc, int lane,
                                                       fh_bf16* __restrict__ dst) {
  const int32_t n = window * F;
  const uint4* src = reinterpret_cast<const uint4*>(features + (t - window + 1) * (int64_t)F);
  uint4* d = reinterpret_cast<uint4*>(dst);
  const int32_t n8 = n >> 3;
  int32_t i = lane;
  for (; i + 96 < n8; i += 128) {
    const uint4 v0 = __ldg(src + i), v1 = __ldg(src + i + 32), v2 = __ldg(src + i + 64), v3 = __ldg(src + i + 96);
    d[i] = v0;
    d[i + 32] = v1;
    d[i + 64] = v2;
    d[i + 96] = v3;
  }
  for (; i < n8; i += 32) d[i] = __ldg(src + i);
  if (lane < FH_ENV_ACCOUNT) dst[n + lane] = fh_from_f32<fh_bf16>(acc[lane]);
}

/* Sample j's transition from slot s0: its n-step return and discount (fh_replay_nstep) and its actions. */
__device__ __forceinline__ void fh_gather_transition(const fh_replay_view& v, int32_t n_step, float gamma, int64_t s0,
                                                     int64_t j, int32_t* __restrict__ act, float* __restrict__ ret,
                                                     float* __restrict__ disc) {
  float r, d;
  int64_t nx;
  fh_replay_nstep(v, s0, n_step, gamma, &r, &d, &nx);
  ret[j] = r;
  disc[j] = d;
  act[j * 3 + 0] = v.act[s0 * 3 + 0];
  act[j * 3 + 1] = v.act[s0 * 3 + 1];
  act[j * 3 + 2] = v.act[s0 * 3 + 2];
}

template <typename T, bool VEC, bool BF16_SRC>
static __global__ void replay_gather_kernel(fh_replay_view v, int32_t n_step, float gamma, const float* features,
                                            const fh_bf16* features_bf16, int32_t F, int32_t window,
                                            const int32_t* __restrict__ slot, int32_t B,
                                            int32_t* __restrict__ act, float* __restrict__ ret,
                                            float* __restrict__ disc, int32_t* __restrict__ nbar,
                                            int32_t* __restrict__ nslot, T* obs,
                                            T* next_obs, int32_t ld) {
  const int lane = threadIdx.x & 31;
  const int64_t w = (int64_t)blockIdx.x * FH_GATHER_WARPS + (threadIdx.x >> 5);
  if (w >= 2 * (int64_t)B) return;
  const int32_t j = (int32_t)(w >> 1);
  const int which = (int)(w & 1);
  const int64_t s0 = slot[j];
  int64_t src = s0;
  if (which == 0) {
    if (lane == 0) fh_gather_transition(v, n_step, gamma, s0, j, act, ret, disc);
  } else {
    const int64_t row = s0 / v.n_envs, env = s0 % v.n_envs;
    src = ((row + n_step) % v.rows) * v.n_envs + env; /* s' is the stored state n rows later */
    if (lane == 0 && next_obs) {
      nbar[j] = v.bar[src];
      nslot[j] = (int32_t)src;
    }
  }
  T* dst = which == 0 ? obs : next_obs;
  if (!dst) return;
  if constexpr (BF16_SRC)
    fh_gather_obs_row_bf16(features_bf16, F, window, (int64_t)v.bar[src], v.account + src * FH_ENV_ACCOUNT, lane,
                           dst + (int64_t)j * ld);
  else
    fh_gather_obs_row<T, VEC>(features, F, window, (int64_t)v.bar[src], v.account + src * FH_ENV_ACCOUNT, lane,
                              dst + (int64_t)j * ld);
}

static constexpr int kPairGatherGroups = 8; /* 16-byte groups a lane holds in registers (replay_gather_pair_kernel) */

static __global__ void replay_gather_pair_kernel(fh_replay_view v, int32_t n_step, float gamma,
                                                 const fh_bf16* __restrict__ features, int64_t n_bars, int32_t F,
                                                 int32_t window, const int32_t* __restrict__ slot, int32_t B,
                                                 int32_t* __restrict__ act, float* __restrict__ ret,
                                                 float* __restrict__ disc, int32_t* __restrict__ nbar,
                                                 int32_t* __restrict__ nslot, fh_bf16* __restrict__ blk,
                                                 fh_pair_layout l) {
  const int lane = threadIdx.x & 31;
  const int64_t j = (int64_t)blockIdx.x * FH_GATHER_WARPS + (threadIdx.x >> 5);
  if (j >= B) return;
  const int64_t s0 = slot[j];
  const int64_t row = s0 / v.n_envs, env = s0 % v.n_envs;
  const int64_t s1 = ((row + n_step) % v.rows) * v.n_envs + env; /* s' is the stored state n rows later */
  const int64_t t = v.bar[s0];
  if (lane == 0) {
    fh_gather_transition(v, n_step, gamma, s0, j, act, ret, disc);
  } else if (lane == 1) {
    nbar[j] = v.bar[s1];
    nslot[j] = (int32_t)s1;
  }
  /* 16-byte groups u of [0, mkt + K): the market rows from the bf16 feature matrix (bars t-W+1 .. t+n; the first W
   * always exist, t >= W-1), the two account groups, zeros elsewhere */
  uint4* d = reinterpret_cast<uint4*>(blk + j * (int64_t)l.P);
  const int32_t m0 = l.mkt >> 3, m1 = (l.mkt + l.WF + l.nF) >> 3, n16 = (l.mkt + l.K) >> 3;
  const int64_t b0 = t - window + 1;
  const int64_t avail = (n_bars - b0) * (F >> 3); /* groups of the market rows inside the data */
  const uint4* src = reinterpret_cast<const uint4*>(features + b0 * (int64_t)F) - m0;
  const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
  const auto group = [&](int32_t u) {
    uint4 x = zero;
    if (u >= m0 && u < m1 && u - m0 < avail)
      x = __ldg(src + u);
    else if (u == 0)
      x = fh_pack_bf16x8(v.account + s0 * FH_ENV_ACCOUNT);
    else if (u == m1)
      x = fh_pack_bf16x8(v.account + s1 * FH_ENV_ACCOUNT);
    return x;
  };
  /* blocks of up to 32 x kPairGatherGroups groups (the reference shape's 137): every load of a lane issued before
   * its first store, so that each warp has its whole row in flight at once instead of one 512-byte round trip
   * after another; longer blocks take the plain loop */
  if (n16 <= 32 * kPairGatherGroups) {
    uint4 x[kPairGatherGroups];
#pragma unroll
    for (int q = 0; q < kPairGatherGroups; ++q) {
      const int32_t u = lane + 32 * q;
      x[q] = u < n16 ? group(u) : zero;
    }
#pragma unroll
    for (int q = 0; q < kPairGatherGroups; ++q) {
      const int32_t u = lane + 32 * q;
      if (u < n16) d[u] = x[q];
    }
  } else {
    for (int32_t u = lane; u < n16; u += 32) d[u] = group(u);
  }
}

fh_status fh_launch_replay_gather_pair(const fh_cuda_replay& r, const fh_cuda_market& m, int32_t window,
                                       const fh_cuda_batch& b, int32_t B, void* blk, const fh_pair_layout& l,
                                       cudaStream_t s) {
  const int32_t F = m.view.n_features;
  const fh_pair_layout want = fh_pair_make(window, F, r.n_step);
  if (B <= 0 || B > b.cap || !blk || !m.features_bf16 || F % 8 != 0 || l.P != want.P || l.K != want.K ||
      l.mkt != want.mkt || ((uintptr_t)blk & 15))
    return FH_ERR_INVALID_ARGUMENT;
  const dim3 grid((unsigned)CEIL_DIV((int64_t)B, FH_GATHER_WARPS)), block(32 * FH_GATHER_WARPS);
  replay_gather_pair_kernel<<<grid, block, 0, s>>>(r.v, r.n_step, r.gamma, m.features_bf16, m.view.n_bars, F, window,
                                                   b.slot, B, b.act, b.ret, b.disc, b.nbar, b.nslot,
                                                   static_cast<fh_bf16*>(blk), l);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

/* The gathering first layer's batch (kernels/l1_gather.cuh, net.h fh_l1g_bars / fh_l1g_acc): one thread a sample
 * writes the transition fields, nbar and nslot as the other gathers do, and the bars and bf16 account features of s
 * (rows j) and of the stored s' (rows B + j) that layer 1 reads; no market rows. */
static_assert(FH_ENV_ACCOUNT == 8, "the gathering first layer's account block is one 16-byte group of 8 bf16");
static __global__ void replay_gather_l1g_kernel(fh_replay_view v, int32_t n_step, float gamma,
                                                const int32_t* __restrict__ slot, int32_t B, int32_t* __restrict__ act,
                                                float* __restrict__ ret, float* __restrict__ disc,
                                                int32_t* __restrict__ nbar, int32_t* __restrict__ nslot,
                                                int32_t* __restrict__ bars, uint4* __restrict__ acc) {
  const int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= B) return;
  const int64_t s0 = slot[j];
  const int64_t row = s0 / v.n_envs, env = s0 % v.n_envs;
  const int64_t s1 = ((row + n_step) % v.rows) * v.n_envs + env; /* s' is the stored state n rows later */
  fh_gather_transition(v, n_step, gamma, s0, j, act, ret, disc);
  const int32_t b1 = v.bar[s1];
  nbar[j] = b1;
  nslot[j] = (int32_t)s1;
  bars[j] = v.bar[s0];
  bars[B + j] = b1;
  acc[j] = fh_pack_bf16x8(v.account + s0 * FH_ENV_ACCOUNT);
  acc[B + j] = fh_pack_bf16x8(v.account + s1 * FH_ENV_ACCOUNT);
}

fh_status fh_launch_replay_gather_l1g(const fh_cuda_replay& r, const fh_cuda_batch& b, int32_t B, int32_t* bars,
                                      void* acc, cudaStream_t s) {
  if (B <= 0 || B > b.cap || !bars || !acc || ((uintptr_t)acc & 15)) return FH_ERR_INVALID_ARGUMENT;
  replay_gather_l1g_kernel<<<(unsigned)CEIL_DIV((int64_t)B, 256), 256, 0, s>>>(
      r.v, r.n_step, r.gamma, b.slot, B, b.act, b.ret, b.disc, b.nbar, b.nslot, bars, static_cast<uint4*>(acc));
  FH_LAUNCH_CHECK();
  return FH_OK;
}

template <typename T>
static fh_status launch_gather_t(const fh_cuda_replay& r, const fh_cuda_market& m, int32_t window,
                                 const fh_cuda_batch& b, int32_t B, T* obs, T* next_obs, int32_t ld, cudaStream_t s) {
  const dim3 grid((unsigned)CEIL_DIV(2 * (int64_t)B, FH_GATHER_WARPS)), block(32 * FH_GATHER_WARPS);
  const int32_t F = m.view.n_features;
  const float* f = m.view.features;
  const fh_bf16* fb = m.features_bf16;
  if constexpr (std::is_same<T, fh_bf16>::value) {
    const char* e = getenv("FH_GATHER_BF16_SOURCE");  /* "0": convert from fp32 (for comparisons) */
    if (fb && F % 8 == 0 && ld % 8 == 0 && !(e && e[0] == '0')) {
      replay_gather_kernel<T, true, true><<<grid, block, 0, s>>>(r.v, r.n_step, r.gamma, f, fb, F, window, b.slot, B,
                                                                 b.act, b.ret, b.disc, b.nbar, b.nslot, obs, next_obs, ld);
      FH_LAUNCH_CHECK();
      return FH_OK;
    }
  }
  if (fh_gather_vec_ok(F, window, ld))
    replay_gather_kernel<T, true, false><<<grid, block, 0, s>>>(r.v, r.n_step, r.gamma, f, fb, F, window, b.slot, B,
                                                                b.act, b.ret, b.disc, b.nbar, b.nslot, obs, next_obs, ld);
  else
    replay_gather_kernel<T, false, false><<<grid, block, 0, s>>>(r.v, r.n_step, r.gamma, f, fb, F, window, b.slot, B,
                                                                 b.act, b.ret, b.disc, b.nbar, b.nslot, obs, next_obs, ld);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

fh_status fh_launch_replay_gather(const fh_cuda_replay& r, const fh_cuda_market& m, int32_t window,
                                  const fh_cuda_batch& b, int32_t B, fh_dtype dtype, void* obs, void* next_obs,
                                  int32_t ld, cudaStream_t s) {
  if (B <= 0 || B > b.cap || ld < window * m.view.n_features + FH_ENV_ACCOUNT) return FH_ERR_INVALID_ARGUMENT;
  if (dtype == FH_BF16)
    return launch_gather_t<fh_bf16>(r, m, window, b, B, static_cast<fh_bf16*>(obs), static_cast<fh_bf16*>(next_obs),
                                    ld, s);
  return launch_gather_t<float>(r, m, window, b, B, static_cast<float*>(obs), static_cast<float*>(next_obs), ld, s);
}
