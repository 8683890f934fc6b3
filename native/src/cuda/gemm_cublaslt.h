/*
 * gemm_cublaslt.h — the three GEMMs of a linear layer through cuBLASLt, in row-major terms
 * (weights (out, in) row-major, y = x W^T + b, DESIGN §5). This header has no cuBLAS types, so the
 * network code (net.cu) compiles where cuBLAS is absent (CI); gemm_cublaslt.cpp holds every cuBLAS call.
 *
 *   fh_gemm_fwd   Y (B, out; ldy) = X (B, in; ldx) W^T + bias [ReLU]   X, W: op dtype; Y: ydt
 *   fh_gemm_dx    dX (B, in; lddx) = dY (B, out; lddy) W                dY, W: op dtype; dX: xdt
 *   fh_gemm_dw    dW (out, in; ldw, default in) = dY^T X   fp32 output with `=`
 *
 * op dtype: FH_BF16 (bf16 operands, fp32 accumulate) or FH_F32 (fp32 operands and accumulate, no
 * TF32: the deterministic mode). Bias has the output's dtype. Every call takes its stream and the
 * workspace of that stream (concurrent streams must not share one). Algorithms are picked once per shape
 * and cached: the heuristic's top 16, each timed in FH_GEMM_TUNE_ROUNDS sweeps (default 3; FH_GEMM_AUTOTUNE=0
 * keeps its first; FH_GEMM_TUNE_LOG=1 prints the times); the first call of a shape must not be inside a
 * graph capture (the trainer warms every shape eagerly first). Nothing synchronises.
 * The fused ReLU-mask / bias-gradient epilogues return FH_ERR_UNSUPPORTED (no error is set) when
 * cuBLASLt has no algorithm for them; the network then falls back to its own kernels.
 * FH_GEMM_REFERENCE=1 (read at fh_gemm_create): the GEMMs run our reference kernel (kernels/gemm_ref.cu)
 * instead of cuBLASLt, and the fused epilogues return FH_ERR_UNSUPPORTED. Slow; for compute-sanitizer
 * racecheck and as an independent check of cuBLASLt.
 */
#ifndef FH_GEMM_CUBLASLT_H
#define FH_GEMM_CUBLASLT_H

#include <cuda_runtime.h>
#include <stddef.h>

#include "../../../kernels/cuda_common.cuh"

struct fh_gemm;  /* opaque: cuBLASLt handle + plan cache */

enum fh_epilogue {
  FH_EPI_NONE = 0,
  FH_EPI_BIAS = 1,
  FH_EPI_RELU_BIAS = 2,
  FH_EPI_RELU_AUX_BIAS = 3,  /* forward: + the ReLU bit mask (aux) for the backward */
  FH_EPI_DRELU = 4,          /* input gradient: times the ReLU mask of the forward (aux) */
  FH_EPI_BGRADB = 5          /* weight gradient: + the bias gradient (column sums of dY) */
};

/* ReLU masks (cuBLASLt's aux bit masks): one bit per activation, `ld` bits per sample row, ld a
 * multiple of 128 >= the layer width. A row-major (B, n) activation has a (B, ld) bit mask. */
struct fh_relu_mask {
  void* bits;   /* device, nullptr = no mask */
  int64_t ld;   /* bits per row */
};

fh_status fh_gemm_create(fh_gemm** out);
void fh_gemm_destroy(fh_gemm* g);
/* The SM count the next GEMMs of g are planned and launched for (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET; 0: the whole
 * GPU, the default): set around GEMMs that run beside each other on forked streams, so that each takes its share of
 * the SMs instead of all of them one after another. Part of a plan's key. */
void fh_gemm_set_sm_target(fh_gemm* g, int sms);
int fh_gemm_sm_target(const fh_gemm* g);
/* Bytes of workspace each stream should own. */
size_t fh_gemm_workspace_bytes(void);

/* mask (fwd, with FH_EPI_RELU_BIAS): also write the ReLU mask of Y. */
fh_status fh_gemm_fwd(fh_gemm* g, cudaStream_t s, void* ws, fh_dtype op, int B, int out, int in, const void* X,
                      int ldx, const void* W, const void* bias, fh_epilogue epi, void* Y, fh_dtype ydt, int ldy,
                      fh_relu_mask mask = fh_relu_mask{nullptr, 0});
/* mask (dx): dX *= ReLU mask of the forward's X (the layer below's activation), fused. */
fh_status fh_gemm_dx(fh_gemm* g, cudaStream_t s, void* ws, fh_dtype op, int B, int out, int in, const void* dY,
                     int lddy, const void* W, void* dX, fh_dtype xdt, int lddx,
                     fh_relu_mask mask = fh_relu_mask{nullptr, 0});
/* dbias (dw, optional): (out) fp32 = column sums of dY over the B rows, fused (`=`). */
fh_status fh_gemm_dw(fh_gemm* g, cudaStream_t s, void* ws, fh_dtype op, int B, int out, int in, const void* dY,
                     int lddy, const void* X, int ldx, float* dW, float* dbias = nullptr, int ldw = 0);

/* Last cuBLAS error text (thread-local), for messages. */
const char* fh_gemm_last_error(void);

#endif /* FH_GEMM_CUBLASLT_H */
