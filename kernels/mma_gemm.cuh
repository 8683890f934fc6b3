/*
 * mma_gemm.cuh — the project's own grouped tensor-core GEMM (kernels/mma_gemm.cu), for the layers where
 * cuBLASLt leaves work on the table: the four narrow head-output GEMMs of a forward as one launch, and
 * the backward's input gradients with the ReLU derivative and the bias column sums fused into the
 * epilogue (cuBLASLt runs its DRELU / BGRAD epilogues as extra kernels for these shapes, and without
 * them each layer needs an elementwise pass over its gradient). Opt-in (FH_MMA=1, net.h): measured on the
 * H200 it is slower than cuBLASLt + the elementwise kernels for the reference (the short-K tiles are
 * latency bound: ~1.3 instructions per cycle at 25-50% occupancy, bench/RESULTS.md).
 *
 * Row-major, bf16 operands, fp32 accumulation. Every problem p of a group has the same M (batch rows)
 * and its own N, K and pointers:
 *   FH_MMA_NT   C (M, N) = A (M, K) W^T, W (N, K) row-major     (a forward: y = x W^T)
 *   FH_MMA_NN   C (M, N) = A (M, K) W,   W (K, N) row-major     (an input gradient: dX = dY W)
 * Epilogue, in this order (flags): + bias (N, C's dtype) [FH_MMA_BIAS]; times (act > 0), act (M, N) bf16,
 * the forward's post-ReLU output [FH_MMA_MASK]; C stored as bf16 or fp32; [FH_MMA_COLSUM] the column
 * sums of the stored values over each FH_MMA_BM-row tile into colsum[tile * ldcs + n] (fp32; rows >= M add
 * nothing), in a fixed order, so the result is the same run to run. fh_launch_colsum_finish
 * (net_kernels.cuh) sums those partials (tiles = fh_mma_row_tiles(M)).
 *
 * Constraints (else FH_ERR_UNSUPPORTED, nothing launched, and the caller keeps its cuBLASLt path): at
 * most FH_MMA_MAX_PROBLEMS problems; N, K, lda, ldw multiples of 8, ldc and ldact even; A, W 16-byte
 * aligned; the kernel was built for sm_80 or newer (fh_mma_available). Nothing synchronises;
 * capturable once fh_mma_available() has been called outside a capture (it sets the kernels'
 * shared-memory limits).
 */
#ifndef FH_MMA_GEMM_CUH
#define FH_MMA_GEMM_CUH

#include "cuda_common.cuh"

#define FH_MMA_MAX_PROBLEMS 4

enum fh_mma_op { FH_MMA_NT = 0, FH_MMA_NN = 1 };
enum : unsigned { FH_MMA_BIAS = 1u, FH_MMA_MASK = 2u, FH_MMA_COLSUM = 4u };

struct fh_mma_problem {
  const fh_bf16* A;     /* (M, K), row stride lda */
  const fh_bf16* W;     /* NT: (N, K); NN: (K, N); row stride ldw */
  void* C;              /* (M, N), row stride ldc, bf16 or fp32 */
  const void* bias;     /* (N), C's dtype (FH_MMA_BIAS) */
  const fh_bf16* act;   /* (M, N), row stride ldact (FH_MMA_MASK) */
  float* colsum;        /* (fh_mma_row_tiles(M), ldcs) partial column sums (FH_MMA_COLSUM) */
  int N, K;
  int lda, ldw, ldc, ldact, ldcs;
};

/* Rows per tile of the kernel (and per column-sum partial). */
#define FH_MMA_BM 64
static inline int fh_mma_row_tiles(int M) { return (M + FH_MMA_BM - 1) / FH_MMA_BM; }

/* 1 when the kernels can run on the current device (built for sm_80+); also sets their shared-memory
 * limits. Call once outside a graph capture before the first launch. */
int fh_mma_available(void);

fh_status fh_launch_mma_gemm(const fh_mma_problem* probs, int n_probs, int M, fh_mma_op op, fh_dtype c_dtype,
                             unsigned flags, cudaStream_t s);

#endif /* FH_MMA_GEMM_CUH */
