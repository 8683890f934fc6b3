/*
 * gemm_ref.cuh — the reference GEMM (kernels/gemm_ref.cu): a plain shared-memory tiled kernel with fp32
 * accumulate (no tensor cores, clusters or TMA), used instead of cuBLASLt when FH_GEMM_REFERENCE=1
 * (native/src/cuda/gemm_cublaslt.cpp): slow; for compute-sanitizer racecheck and as an independent
 * check of cuBLASLt. Deterministic: every output sums its k products in the same order on every run.
 *
 *   fh_launch_gemm_ref   column-major C (m, n; ldc) = op(A) op(B) [+ bias] [ReLU]   (alpha 1, beta 0)
 *                        A stored (ta ? k x m : m x k; lda), B stored (tb ? n x k : k x n; ldb),
 *                        A and B of dtype op (bf16 or fp32), C and bias (length m, added to row i of C,
 *                        nullptr = none) of dtype cdt; relu: max(0, .) after the bias.
 *
 * Host-only declarations (no device code), so host .cpp files can include it. The launcher never
 * synchronises and allocates nothing (graph-capturable); it checks the launch with FH_LAUNCH_CHECK.
 */
#ifndef FOXHUNT_KERNELS_GEMM_REF_CUH
#define FOXHUNT_KERNELS_GEMM_REF_CUH

#include "cuda_common.cuh"

fh_status fh_launch_gemm_ref(fh_dtype op, bool ta, bool tb, int m, int n, int k, const void* A, int lda, const void* B,
                             int ldb, void* C, fh_dtype cdt, int ldc, const void* bias, bool relu, cudaStream_t s);

#endif /* FOXHUNT_KERNELS_GEMM_REF_CUH */
