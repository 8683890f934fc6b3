/*
 * cuda_env_gather.cuh — the observation row gather shared by the env, replay and eval kernels.
 *
 * One warp writes one observation row of D = W*F + 8 elements: the W feature rows t-W+1..t of the
 * (n_bars, F) feature matrix (contiguous: W*F floats), then the 8 account features. The feature
 * part is memory-bound: with F % 4 == 0 and ld % 4 == 0 each lane moves 16-byte vectors, up to
 * FH_GATHER_UNROLL loads in flight before the first store. T is float or fh_bf16.
 */
#ifndef FH_CUDA_ENV_GATHER_CUH
#define FH_CUDA_ENV_GATHER_CUH

#include "cuda_common.cuh"
#include "env.cuh"

#define FH_GATHER_UNROLL 8

__device__ __forceinline__ void fh_store4(float* dst, float4 v) { *reinterpret_cast<float4*>(dst) = v; }
__device__ __forceinline__ void fh_store4(fh_bf16* dst, float4 v) {
  __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y);
  __nv_bfloat162 hi = __floats2bfloat162_rn(v.z, v.w);
  uint2 packed;
  packed.x = *reinterpret_cast<uint32_t*>(&lo);
  packed.y = *reinterpret_cast<uint32_t*>(&hi);
  *reinterpret_cast<uint2*>(dst) = packed;
}

/* Whether the 16-byte path applies to this feature matrix and output stride. */
__host__ __device__ __forceinline__ bool fh_gather_vec_ok(int32_t F, int32_t window, int32_t ld) {
  return (F % 4 == 0) && ((window * F) % 4 == 0) && (ld % 4 == 0);
}

/* Warp-cooperative: dst[0 .. W*F) = features rows t-W+1..t, dst[W*F .. W*F+8) = account[0..8).
 * account may be in registers of lane 0 only (acc_lane0) — pass the 8 values through acc. */
template <typename T, bool VEC>
__device__ __forceinline__ void fh_gather_obs_row(const float* __restrict__ features, int32_t F, int32_t window,
                                                  int64_t t, const float* acc, int lane, T* __restrict__ dst) {
  const int32_t n = window * F;
  const float* src = features + (t - window + 1) * (int64_t)F;
  if (VEC) {
    const float4* s4 = reinterpret_cast<const float4*>(src);
    const int32_t n4 = n >> 2;
    int32_t i = lane;
    for (; i + 32 * (FH_GATHER_UNROLL - 1) < n4; i += 32 * FH_GATHER_UNROLL) {
      float4 v[FH_GATHER_UNROLL];
#pragma unroll
      for (int u = 0; u < FH_GATHER_UNROLL; ++u) v[u] = __ldg(s4 + i + 32 * u);
#pragma unroll
      for (int u = 0; u < FH_GATHER_UNROLL; ++u) fh_store4(dst + 4 * (i + 32 * u), v[u]);
    }
    for (; i < n4; i += 32) fh_store4(dst + 4 * i, __ldg(s4 + i));
  } else {
    for (int32_t i = lane; i < n; i += 32) dst[i] = fh_from_f32<T>(__ldg(src + i));
  }
  if (lane < FH_ENV_ACCOUNT) dst[n + lane] = fh_from_f32<T>(acc[lane]);
}

#endif /* FH_CUDA_ENV_GATHER_CUH */
