/*
 * gemm_ref.cu — the reference GEMM (see gemm_ref.cuh): what gemm_cublaslt.cpp runs instead of cuBLASLt
 * when FH_GEMM_REFERENCE=1 (compute-sanitizer racecheck cannot run cuBLASLt's Hopper kernels; also an
 * independent check of cuBLASLt's results).
 *
 *   fh_gemm_ref_kernel   one 64 x 64 tile of the column-major C per block of 64 threads; the k loop
 *                        stages a 16-deep slice of op(A) (16 x 64) and op(B) (16 x 64) in shared memory
 *                        as fp32 (zero outside the matrices), and each thread accumulates an 8 x 8 block
 *                        of outputs (rows 8 tx.., columns 8 ty..) with fmaf in increasing k order.
 *                        Epilogue: + bias[row], then ReLU, converted to C's dtype.
 *
 * Few shared-memory accesses per multiply-add (float4 stores and loads, 8 x 8 outputs per thread, idle
 * threads outside C read nothing): racecheck instruments every one of them, and the driver's run under
 * racecheck is bounded by this kernel.
 *
 * Plain CUDA C++ (no tensor cores, clusters or TMA): slow, simple, deterministic.
 */
#include "gemm_ref.cuh"

static constexpr int kRefBM = 64;      /* tile rows (m) */
static constexpr int kRefBN = 64;      /* tile columns (n) */
static constexpr int kRefBK = 16;      /* k slice per shared-memory stage */
static constexpr int kRefTM = 8;       /* outputs per thread along m */
static constexpr int kRefTN = 8;       /* outputs per thread along n */
static constexpr int kRefThreads = (kRefBM / kRefTM) * (kRefBN / kRefTN);  /* 64 */
static constexpr int kRefPad = 4;      /* keeps every shared row 16-byte aligned (float4 accesses) */

static_assert(kRefBM == kRefBN && kRefBM / 4 * kRefBK % kRefThreads == 0, "tile staging");

template <typename TA>
__device__ __forceinline__ float fh_gemm_ref_ld(const TA* __restrict__ X, bool ok, int64_t at) {
  return ok ? fh_to_f32<TA>(X[at]) : 0.0f;
}

/* Elements (g0 + c, p), c = 0..3, of a matrix with `rows` x k elements where element (g, p) is
 * X[p + g ld] (gk: the index along k is the fast one) or X[g + p ld], as fp32 (zero outside). */
template <typename TA>
__device__ __forceinline__ float4 fh_gemm_ref_ld4(const TA* __restrict__ X, bool gk, int64_t ld, int g0, int rows,
                                                  int p, int k) {
  float v[4];
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const int g = g0 + c;
    v[c] = fh_gemm_ref_ld(X, g < rows && p < k, gk ? p + (int64_t)g * ld : g + (int64_t)p * ld);
  }
  return make_float4(v[0], v[1], v[2], v[3]);
}

template <typename TA, typename TC>
static __global__ void __launch_bounds__(kRefThreads)
    fh_gemm_ref_kernel(bool ta, bool tb, int m, int n, int k, const TA* __restrict__ A, int lda,
                       const TA* __restrict__ B, int ldb, TC* __restrict__ C, int ldc, const TC* __restrict__ bias,
                       bool relu) {
  __shared__ __align__(16) float As[kRefBK][kRefBM + kRefPad];  /* As[p][i] = op(A)(i0 + i, k0 + p) */
  __shared__ __align__(16) float Bs[kRefBK][kRefBN + kRefPad];  /* Bs[p][j] = op(B)(k0 + p, j0 + j) */
  const int tid = threadIdx.x;
  const int tx = tid % (kRefBM / kRefTM), ty = tid / (kRefBM / kRefTM);
  const int i0 = blockIdx.y * kRefBM, j0 = blockIdx.x * kRefBN;
  /* rows / columns of the tile inside C; threads wholly outside stay idle (small layers, edge tiles), and
   * only the slice rows / columns some working thread reads are staged */
  const int mt = min(kRefBM, m - i0), nt = min(kRefBN, n - j0);
  const int mlim = min(kRefBM, CEIL_DIV(mt, kRefTM) * kRefTM), nlim = min(kRefBN, CEIL_DIV(nt, kRefTN) * kRefTN);
  const bool active = tx * kRefTM < mt && ty * kRefTN < nt;
  float acc[kRefTM][kRefTN];
#pragma unroll
  for (int a = 0; a < kRefTM; ++a)
#pragma unroll
    for (int b = 0; b < kRefTN; ++b) acc[a][b] = 0.0f;

  for (int k0 = 0; k0 < k; k0 += kRefBK) {
    /* stage the slices as groups of 4 rows (columns) of one k, zero outside the matrices */
#pragma unroll
    for (int r = 0; r < kRefBM / 4 * kRefBK / kRefThreads; ++r) {
      const int e = tid + r * kRefThreads;
      const int q = 4 * (e % (kRefBM / 4)), pp = e / (kRefBM / 4);
      const int gp = k0 + pp;
      if (q < mlim) *reinterpret_cast<float4*>(&As[pp][q]) = fh_gemm_ref_ld4(A, ta, lda, i0 + q, m, gp, k);
      if (q < nlim) *reinterpret_cast<float4*>(&Bs[pp][q]) = fh_gemm_ref_ld4(B, !tb, ldb, j0 + q, n, gp, k);
    }
    __syncthreads();  /* the slices are complete before anyone reads them */
    if (active) {
#pragma unroll
      for (int p = 0; p < kRefBK; ++p) {
        float av[kRefTM], bv[kRefTN];
#pragma unroll
        for (int a = 0; a < kRefTM; a += 4) {
          const float4 t = *reinterpret_cast<const float4*>(&As[p][tx * kRefTM + a]);
          av[a] = t.x, av[a + 1] = t.y, av[a + 2] = t.z, av[a + 3] = t.w;
        }
#pragma unroll
        for (int b = 0; b < kRefTN; b += 4) {
          const float4 t = *reinterpret_cast<const float4*>(&Bs[p][ty * kRefTN + b]);
          bv[b] = t.x, bv[b + 1] = t.y, bv[b + 2] = t.z, bv[b + 3] = t.w;
        }
#pragma unroll
        for (int a = 0; a < kRefTM; ++a)
#pragma unroll
          for (int b = 0; b < kRefTN; ++b) acc[a][b] = fmaf(av[a], bv[b], acc[a][b]);
      }
    }
    __syncthreads();  /* everyone is done reading before the next stage overwrites the slices */
  }

  if (!active) return;
#pragma unroll
  for (int a = 0; a < kRefTM; ++a) {
    const int gi = i0 + tx * kRefTM + a;
    if (gi >= m) break;
    const float bi = bias ? fh_to_f32<TC>(bias[gi]) : 0.0f;
#pragma unroll
    for (int b = 0; b < kRefTN; ++b) {
      const int gj = j0 + ty * kRefTN + b;
      if (gj >= n) break;
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
