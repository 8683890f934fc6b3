/*
 * cuda_common.cuh — small helpers shared by the CUDA kernel files and the CUDA host code.
 *
 *   CEIL_DIV(a, b)         integer ceil division for grid sizes
 *   FH_CUDA_TRY(expr)      inside a function returning fh_status: on a CUDA error, records the
 *                          message with fh_cuda_set_error() and returns FH_ERR_DEVICE
 *                          (FH_ERR_OUT_OF_MEMORY for cudaErrorMemoryAllocation). Never aborts.
 *   FH_LAUNCH_CHECK()      the same for cudaGetLastError() right after a kernel launch
 *   fh_bf16                the bf16 type used for GEMM operands
 *   fh_env_is(name, value) whether environment switch `name` is set to exactly `value` (the A/B switches
 *                          that kernel launchers read where they launch, e.g. FH_PER_REDUCE=0)
 *   fh_env_int(name, lo, hi, def)  environment switch `name` as an integer in [lo, hi], else def (unset or
 *                          outside: FH_RUN_AHEAD, FH_STEP_GROUP)
 *
 * The device helpers are compiled only under nvcc, so host .cpp files (gemm_cublaslt.cpp) can include
 * this header too. Nothing here allocates.
 */
#ifndef FH_CUDA_COMMON_CUH
#define FH_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../native/include/foxhunt.h"

#ifndef CEIL_DIV
#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))
#endif

typedef __nv_bfloat16 fh_bf16;

/* Element types of activation buffers: bf16 in the fast path, fp32 in deterministic mode. */
enum fh_dtype { FH_F32 = 0, FH_BF16 = 1 };

static inline size_t fh_dtype_size(fh_dtype t) { return t == FH_BF16 ? 2 : 4; }

static inline bool fh_env_is(const char* name, const char* value) {
  const char* e = getenv(name);
  return e && strcmp(e, value) == 0;
}
static inline long fh_env_int(const char* name, long lo, long hi, long def) {
  const char* e = getenv(name);
  const long v = e ? strtol(e, nullptr, 10) : lo - 1;
  return v >= lo && v <= hi ? v : def;
}

/* Thread-local last CUDA error text, filled by the macros below; the trainer copies it into its
 * per-handle message. */
#ifdef __cplusplus
extern "C" {
#endif
void fh_cuda_set_error(const char* file, int line, const char* what, const char* detail);
const char* fh_cuda_last_error_text(void);
#ifdef __cplusplus
}
#endif

static inline fh_status fh_cuda_status(cudaError_t e) {
  if (e == cudaSuccess) return FH_OK;
  return e == cudaErrorMemoryAllocation ? FH_ERR_OUT_OF_MEMORY : FH_ERR_DEVICE;
}

#define FH_CUDA_TRY(expr)                                                            \
  do {                                                                              \
    cudaError_t fh_e_ = (expr);                                                     \
    if (fh_e_ != cudaSuccess) {                                                     \
      fh_cuda_set_error(__FILE__, __LINE__, #expr, cudaGetErrorString(fh_e_));      \
      return fh_cuda_status(fh_e_);                                                 \
    }                                                                               \
  } while (0)

#define FH_LAUNCH_CHECK() FH_CUDA_TRY(cudaGetLastError())

/* Propagate a non-OK fh_status. */
#define FH_TRY(expr)                        \
  do {                                      \
    fh_status fh_s_ = (expr);               \
    if (fh_s_ != FH_OK) return fh_s_;       \
  } while (0)

#if defined(__CUDACC__)
/* Value conversion helpers usable in templates over float / bf16 (device code only). */
template <typename T> __device__ __forceinline__ float fh_to_f32(T v);
template <> __device__ __forceinline__ float fh_to_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ float fh_to_f32<fh_bf16>(fh_bf16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T fh_from_f32(float v);
template <> __device__ __forceinline__ float fh_from_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ fh_bf16 fh_from_f32<fh_bf16>(float v) { return __float2bfloat16_rn(v); }

/* Warp-level sum and max (full warp participates). */
__device__ __forceinline__ float fh_warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float fh_warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ double fh_warp_sum_d(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

#endif /* __CUDACC__ */

#endif /* FH_CUDA_COMMON_CUH */
