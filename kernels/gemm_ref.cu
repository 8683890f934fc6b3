/*
 * gemm_ref.cu — the reference GEMM (see gemm_ref.cuh): what gemm_cublaslt.cpp runs instead of cuBLASLt
 * when FH_GEMM_REFERENCE=1 (compute-sanitizer racecheck cannot run cuBLASLt's Hopper kernels; also an
 * independent check of cuBLASLt's results).
 *
 *   fh_gemm_ref_kernel   one 64 x 64 tile of the column-major C per block of 256 threads; the k loop
 *                        stages a 16-deep slice of op(A) (16 x 64) and op(B) (16 x 64) in shared memory
 *                        as fp32 (zero outside the matrices), and each thread accumulates a 4 x 4 block of
 *                        outputs (rows tx + 16 a, columns ty + 16 b) with fmaf in increasing k order.
 *                        Epilogue: + bias[row], then ReLU, converted to C's dtype.
 *
 * Plain CUDA C++ (no tensor cores, clusters or TMA): slow, simple, deterministic.
 */
#include "gemm_ref.cuh"

static constexpr int kRefBM = 64;       /* tile rows (m) */
static constexpr int kRefBN = 64;       /* tile columns (n) */
static constexpr int kRefBK = 16;       /* k slice per shared-memory stage */
static constexpr int kRefThreads = 256; /* 16 x 16 threads, 4 x 4 outputs each */
static constexpr int kRefTM = kRefBM / 16;
static constexpr int kRefTN = kRefBN / 16;

static_assert(kRefBM * kRefBK % kRefThreads == 0 && kRefBN * kRefBK % kRefThreads == 0, "tile loads");

template <typename TA, typename TC>
static __global__ void __launch_bounds__(kRefThreads)
    fh_gemm_ref_kernel(bool ta, bool tb, int m, int n, int k, const TA* __restrict__ A, int lda,
                       const TA* __restrict__ B, int ldb, TC* __restrict__ C, int ldc, const TC* __restrict__ bias,
                       bool relu) {
  __shared__ float As[kRefBK][kRefBM + 1];  /* As[p][i] = op(A)(i0 + i, k0 + p) */
  __shared__ float Bs[kRefBK][kRefBN + 1];  /* Bs[p][j] = op(B)(k0 + p, j0 + j) */
  const int tid = threadIdx.x;
  const int tx = tid % 16, ty = tid / 16;
  const int i0 = blockIdx.y * kRefBM, j0 = blockIdx.x * kRefBN;
  float acc[kRefTM][kRefTN];
#pragma unroll
  for (int a = 0; a < kRefTM; ++a)
#pragma unroll
    for (int b = 0; b < kRefTN; ++b) acc[a][b] = 0.0f;

  for (int k0 = 0; k0 < k; k0 += kRefBK) {
    /* stage the slices; the index running fastest follows each operand's contiguous dimension */
#pragma unroll
    for (int r = 0; r < kRefBM * kRefBK / kRefThreads; ++r) {
      const int e = tid + r * kRefThreads;
      const int ii = ta ? e / kRefBK : e % kRefBM;
      const int pp = ta ? e % kRefBK : e / kRefBM;
      const int gi = i0 + ii, gp = k0 + pp;
      float v = 0.0f;
      if (gi < m && gp < k)
        v = fh_to_f32<TA>(ta ? A[gp + (int64_t)gi * lda] : A[gi + (int64_t)gp * lda]);
      As[pp][ii] = v;
    }
#pragma unroll
    for (int r = 0; r < kRefBN * kRefBK / kRefThreads; ++r) {
      const int e = tid + r * kRefThreads;
      const int jj = tb ? e % kRefBN : e / kRefBK;
      const int pp = tb ? e / kRefBN : e % kRefBK;
      const int gj = j0 + jj, gp = k0 + pp;
      float v = 0.0f;
      if (gj < n && gp < k)
        v = fh_to_f32<TA>(tb ? B[gj + (int64_t)gp * ldb] : B[gp + (int64_t)gj * ldb]);
      Bs[pp][jj] = v;
    }
    __syncthreads();  /* the slices are complete before anyone reads them */
#pragma unroll
    for (int p = 0; p < kRefBK; ++p) {
      float av[kRefTM], bv[kRefTN];
#pragma unroll
      for (int a = 0; a < kRefTM; ++a) av[a] = As[p][tx + 16 * a];
#pragma unroll
      for (int b = 0; b < kRefTN; ++b) bv[b] = Bs[p][ty + 16 * b];
#pragma unroll
      for (int a = 0; a < kRefTM; ++a)
#pragma unroll
        for (int b = 0; b < kRefTN; ++b) acc[a][b] = fmaf(av[a], bv[b], acc[a][b]);
    }
    __syncthreads();  /* everyone is done reading before the next stage overwrites the slices */
  }

#pragma unroll
  for (int a = 0; a < kRefTM; ++a) {
    const int gi = i0 + tx + 16 * a;
    if (gi >= m) continue;
    const float bi = bias ? fh_to_f32<TC>(bias[gi]) : 0.0f;
#pragma unroll
    for (int b = 0; b < kRefTN; ++b) {
      const int gj = j0 + ty + 16 * b;
      if (gj >= n) continue;
      float v = acc[a][b] + bi;
      if (relu) v = fmaxf(v, 0.0f);
      C[gi + (int64_t)gj * ldc] = fh_from_f32<TC>(v);
    }
  }
}

template <typename TA, typename TC>
static fh_status fh_gemm_ref_t(bool ta, bool tb, int m, int n, int k, const void* A, int lda, const void* B, int ldb,
                               void* C, int ldc, const void* bias, bool relu, cudaStream_t s) {
  const dim3 grid((unsigned)CEIL_DIV(n, kRefBN), (unsigned)CEIL_DIV(m, kRefBM));
  fh_gemm_ref_kernel<TA, TC><<<grid, kRefThreads, 0, s>>>(ta, tb, m, n, k, static_cast<const TA*>(A), lda,
                                                          static_cast<const TA*>(B), ldb, static_cast<TC*>(C), ldc,
                                                          static_cast<const TC*>(bias), relu);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

fh_status fh_launch_gemm_ref(fh_dtype op, bool ta, bool tb, int m, int n, int k, const void* A, int lda, const void* B,
                             int ldb, void* C, fh_dtype cdt, int ldc, const void* bias, bool relu, cudaStream_t s) {
  if (m <= 0 || n <= 0) return FH_OK;
  if (k < 0 || CEIL_DIV(m, kRefBM) > 65535) {
    fh_cuda_set_error(__FILE__, __LINE__, "fh_launch_gemm_ref", "shape out of range");
    return FH_ERR_INVALID_ARGUMENT;
  }
  if (op == FH_BF16)
    return cdt == FH_BF16 ? fh_gemm_ref_t<fh_bf16, fh_bf16>(ta, tb, m, n, k, A, lda, B, ldb, C, ldc, bias, relu, s)
                          : fh_gemm_ref_t<fh_bf16, float>(ta, tb, m, n, k, A, lda, B, ldb, C, ldc, bias, relu, s);
  return cdt == FH_BF16 ? fh_gemm_ref_t<float, fh_bf16>(ta, tb, m, n, k, A, lda, B, ldb, C, ldc, bias, relu, s)
                        : fh_gemm_ref_t<float, float>(ta, tb, m, n, k, A, lda, B, ldb, C, ldc, bias, relu, s);
}
