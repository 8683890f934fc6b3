/*
 * gemm_cublaslt.h — the three GEMMs of a linear layer through cuBLASLt, in row-major terms
 * (weights (out, in) row-major, y = x W^T + b, DESIGN §5). This header has no cuBLAS types, so the
 * network code (net.cu) compiles where cuBLAS is absent (CI); gemm_cublaslt.cpp holds every cuBLAS call.
 *
 *   fh_gemm_fwd   Y (B, out; ldy) = X (B, in; ldx) W^T + bias [ReLU]   X, W: op dtype; Y: ydt
 *   fh_gemm_dx    dX (B, in; lddx) = dY (B, out; lddy) W                dY, W: op dtype; dX: xdt
 *   fh_gemm_dw    dW (out, in) = dY^T X   fp32 output with `=` (ld = in)
 *
 * op dtype: FH_BF16 (bf16 operands, fp32 accumulate) or FH_F32 (fp32 operands and accumulate, no
 * TF32: the deterministic mode). Bias has the output's dtype. Every call takes its stream and the
 * workspace of that stream (concurrent streams must not share one). Algorithms are picked by the
 * cuBLASLt heuristic once per shape and cached; the first call of a shape must not be inside a
 * graph capture (the trainer warms every shape eagerly first). Nothing synchronises.
 */
#ifndef FH_GEMM_CUBLASLT_H
#define FH_GEMM_CUBLASLT_H

#include <cuda_runtime.h>
#include <stddef.h>

#include "../../../kernels/cuda_common.cuh"

struct fh_gemm;  /* opaque: cuBLASLt handle + plan cache */

enum fh_epilogue { FH_EPI_NONE = 0, FH_EPI_BIAS = 1, FH_EPI_RELU_BIAS = 2 };

fh_status fh_gemm_create(fh_gemm** out);
void fh_gemm_destroy(fh_gemm* g);
/* Bytes of workspace each stream should own. */
size_t fh_gemm_workspace_bytes(void);

fh_status fh_gemm_fwd(fh_gemm* g, cudaStream_t s, void* ws, fh_dtype op, int B, int out, int in, const void* X,
                      int ldx, const void* W, const void* bias, fh_epilogue epi, void* Y, fh_dtype ydt, int ldy);
fh_status fh_gemm_dx(fh_gemm* g, cudaStream_t s, void* ws, fh_dtype op, int B, int out, int in, const void* dY,
                     int lddy, const void* W, void* dX, fh_dtype xdt, int lddx);
fh_status fh_gemm_dw(fh_gemm* g, cudaStream_t s, void* ws, fh_dtype op, int B, int out, int in, const void* dY,
                     int lddy, const void* X, int ldx, float* dW);

/* Last cuBLAS error text (thread-local), for messages. */
const char* fh_gemm_last_error(void);

#endif /* FH_GEMM_CUBLASLT_H */
