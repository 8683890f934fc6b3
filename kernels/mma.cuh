/*
 * mma.cuh — the tensor-core and asynchronous-copy steps shared by the kernels that run their own
 * GEMMs (mma_gemm.cu, eval_fused.cu). Device code only; sm_80 or newer.
 *
 *   fh_mma_bf16(c, a0..a3, b0, b1)   c (16 x 8 fp32 fragment) += A (16 x 16 bf16, row) B (16 x 8 bf16, col)
 *   fh_mma_bf16_k8(c, a0, a1, b0)    the same with k = 8
 *   fh_ldsm_x4<TRANS>(r, p)           ldmatrix: four 8 x 8 bf16 matrices from shared memory, one row
 *                                    address per lane (lanes 8i..8i+7: matrix i); TRANS transposes
 *   fh_cp16(dst, src, valid)         16 bytes global -> shared (cp.async.cg), zero-filled when !valid
 *   fh_cp4(dst, src, valid)          4 bytes global -> shared (cp.async.ca), zero-filled when !valid
 *   fh_cp_commit() / fh_cp_wait<N>() commit the issued copies as a group / wait until <= N groups pend
 *   fh_pack_bf16x2(lo, hi)           two floats rounded to a bf16 pair (lo in the low half)
 *   fh_pack_bf16x8(f)                eight floats rounded to bf16, one 16-byte group
 *
 * Built below sm_80 the tensor-core steps write NaN instead of silently computing nothing; the kernels
 * that use them are never launched there (their launchers check the PTX version).
 */
#ifndef FH_MMA_CUH
#define FH_MMA_CUH

#include "cuda_common.cuh"

#if defined(__CUDACC__)

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define FH_MMA_NO_TENSOR_CORES 1
#endif

__device__ __forceinline__ void fh_mma_bf16(float* c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                            uint32_t b1) {
#ifdef FH_MMA_NO_TENSOR_CORES
  (void)a0; (void)a1; (void)a2; (void)a3; (void)b0; (void)b1;
  c[0] = c[1] = c[2] = c[3] = __int_as_float(0x7fc00000);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

__device__ __forceinline__ void fh_mma_bf16_k8(float* c, uint32_t a0, uint32_t a1, uint32_t b0) {
#ifdef FH_MMA_NO_TENSOR_CORES
  (void)a0; (void)a1; (void)b0;
  c[0] = c[1] = c[2] = c[3] = __int_as_float(0x7fc00000);
#else
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a0), "r"(a1), "r"(b0));
#endif
}

template <bool TRANS = false>
__device__ __forceinline__ void fh_ldsm_x4(uint32_t (&r)[4], const void* p) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(p);
#ifdef FH_MMA_NO_TENSOR_CORES
  (void)a;
  r[0] = r[1] = r[2] = r[3] = 0xffffffffu;
#else
  if (TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#endif
}

__device__ __forceinline__ void fh_cp16(void* dst, const void* src, bool valid) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
/* 4 bytes global -> shared (cp.async.ca), zero-filled when !valid */
__device__ __forceinline__ void fh_cp4(void* dst, const void* src, bool valid) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(d), "l"(src), "r"(valid ? 4 : 0) : "memory");
}
__device__ __forceinline__ void fh_cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void fh_cp_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

__device__ __forceinline__ uint32_t fh_pack_bf16x2(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

/* Eight floats rounded to bf16 as one 16-byte group (f[0] lowest): the account features of a state. */
__device__ __forceinline__ uint4 fh_pack_bf16x8(const float* f) {
  uint4 v;
  v.x = fh_pack_bf16x2(f[0], f[1]);
  v.y = fh_pack_bf16x2(f[2], f[3]);
  v.z = fh_pack_bf16x2(f[4], f[5]);
  v.w = fh_pack_bf16x2(f[6], f[7]);
  return v;
}

#endif /* __CUDACC__ */

#endif /* FH_MMA_CUH */
