/*
 * cuda_common.cuh — small helpers shared by the CUDA kernel files and the CUDA host code.
 *
 *   CEIL_DIV(a, b)         integer ceil division for grid sizes
 *   FH_CUDA_TRY(expr)      inside a function returning fh_status: on a CUDA error, records the
 *                          message with fh_cuda_set_error() and returns FH_ERR_DEVICE
 *                          (FH_ERR_OUT_OF_MEMORY for cudaErrorMemoryAllocation). Never aborts.
 *   FH_LAUNCH_CHECK()      the same for cudaGetLastError() right after a kernel launch
 *   fh_bf16                the bf16 type used for GEMM operands
 *   fh_launch(k, g, b, smem, s, args...)  every kernel launch of the CUDA backend: cudaLaunchKernelEx with
 *                          programmatic dependent launch (PDL) allowed unless FH_PDL=0 (see below)
 *   FH_PDL_ENTRY()         the first statement of every kernel fh_launch starts
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

#include "../native/include/foxhunt.h"

#ifndef CEIL_DIV
#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))
#endif

typedef __nv_bfloat16 fh_bf16;

/* Element types of activation buffers: bf16 in the fast path, fp32 in deterministic mode. */
enum fh_dtype { FH_F32 = 0, FH_BF16 = 1 };

static inline size_t fh_dtype_size(fh_dtype t) { return t == FH_BF16 ? 2 : 4; }

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

/* Programmatic dependent launch (Hopper): a kernel started by fh_launch may be scheduled while the kernel
 * before it in its stream (or, in a graph, its same-stream predecessor node) is still running, once every
 * block of that kernel has passed its FH_PDL_ENTRY. So FH_PDL_ENTRY first waits (griddepcontrol.wait) until
 * the predecessor has completed and its memory is visible, and only then lets this kernel's own dependents
 * be scheduled (griddepcontrol.launch_dependents): no kernel reads or writes anything before everything it
 * depends on is done, transitively. What overlaps is the launch, the block scheduling and the ramp of a
 * kernel with the tail of the one before. Launches that follow a non-kernel node (event join, copy)
 * serialise as usual. fh_pdl_on(): FH_PDL as the last trainer create read it (fh_pdl_configure; "0": plain
 * launches, for A/B runs and the bit-for-bit check against them). */
#ifdef __cplusplus
extern "C" {
#endif
int fh_pdl_on(void);
void fh_pdl_configure(void);
#ifdef __cplusplus
}
#endif

#if defined(__CUDACC__)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define FH_PDL_ENTRY()                                       \
  do {                                                       \
    asm volatile("griddepcontrol.wait;" ::: "memory");       \
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); \
  } while (0)
#else
#define FH_PDL_ENTRY() \
  do {                 \
  } while (0)
#endif

template <typename... P, typename... A>
static inline cudaError_t fh_launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                                    A&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = fh_pdl_on() ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, static_cast<A&&>(args)...);
}

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
