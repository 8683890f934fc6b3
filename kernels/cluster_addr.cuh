/*
 * cluster_addr.cuh — shared-memory addresses for the cluster kernels (sm_90 and up): a pointer's 32-bit shared-window
 * address, and the same address in another block of the cluster (mapa). Used by the fused evaluation
 * (kernels/eval_fused.cu, sm_90) and the warpgroup-MMA building blocks (kernels/sm90.cuh, sm_90a).
 */
#ifndef FH_CLUSTER_ADDR_CUH
#define FH_CLUSTER_ADDR_CUH

#include <cuda_runtime.h>
#include <stdint.h>

__device__ __forceinline__ uint32_t fh_smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
/* the address of this block's shared variable `addr` in the shared memory of cluster block `rank` */
__device__ __forceinline__ uint32_t fh_mapa(uint32_t addr, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}

#endif
