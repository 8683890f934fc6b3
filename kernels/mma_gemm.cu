/*
 * mma_gemm.cu — the grouped tensor-core GEMM of mma_gemm.cuh.
 *
 *   fh_mma_gemm_kernel   one 64 x 128 tile of one problem's C per block of 8 warps (2 along M x 4
 *                        along N, 32 x 32 outputs each: 2 x 4 m16n8k16 fragments; 64 registers, 4
 *                        blocks per SM); grid (column tiles
 *                        of every problem in turn, row tiles): the blocks of one row tile run together. The k loop runs a 3-stage cp.async
 *                        pipeline of 32-deep slices of A and W (zero-filled outside the matrices);
 *                        shared rows are padded by 16 bytes so that ldmatrix reads are conflict-free
 *                        (A and an NT W as [row][k], an NN W as [k][n], read transposed). Epilogue from
 *                        the fragments: bias, ReLU mask, bf16x2 / float2 stores, and the tile's column
 *                        sums (per thread over its rows in a fixed order, then across the 8 lanes that
 *                        share a column, then the two M warps through shared memory).
 *
 * Launch constraints: see mma_gemm.cuh (the launcher checks them).
 */
#include "mma_gemm.cuh"
#include "mma.cuh"

#include <atomic>
#include <mutex>

static constexpr int kBM = FH_MMA_BM, kBN = 128, kBK = 32, kStages = 3, kThreads = 256;
static constexpr int kMT = kBM / 32;   /* m16 fragments per warp (2 warps along M) */
static constexpr int kRowK = kBK + 8;    /* [row][k] shared rows (A, NT W): 80 bytes */
static constexpr int kRowN = kBN + 8;    /* [k][n] shared rows (NN W): 272 bytes */
static constexpr int kAStage = kBM * kRowK;
static constexpr int kBStage = kBN * kRowK > kBK * kRowN ? kBN * kRowK : kBK * kRowN;
static constexpr size_t kSmemBytes = (size_t)kStages * (kAStage + kBStage) * sizeof(fh_bf16) + 2 * kBN * sizeof(float);

static_assert(kBM % 32 == 0 && kBN == 4 * 32 && kThreads == 256, "warp layout: 2 x 4 warps of kBM / 2 x 32");
static_assert(kBM * kBK / 8 % kThreads == 0 && kBN * kBK / 8 == 2 * kThreads, "whole 16-byte copies per thread");

struct fh_mma_group {
  fh_mma_problem p[FH_MMA_MAX_PROBLEMS];
  int tile_end[FH_MMA_MAX_PROBLEMS];  /* column tiles of problems 0..i together */
  int n;
};

template <typename TC>
__device__ __forceinline__ float fh_mma_ld_f32(const void* p, int i) {
  return fh_to_f32<TC>(static_cast<const TC*>(p)[i]);
}

template <bool NN, typename TC, bool BIAS, bool MASK, bool COLSUM>
static __global__ void __launch_bounds__(kThreads, 4) fh_mma_gemm_kernel(const fh_mma_group g, const int M) {
  extern __shared__ __align__(16) unsigned char fh_mma_smem[];
  fh_bf16* sA = reinterpret_cast<fh_bf16*>(fh_mma_smem);
  fh_bf16* sB = sA + kStages * kAStage;
  float* sCol = reinterpret_cast<float*>(sB + kStages * kBStage);

  /* column tiles along x: the tiles that share a row tile of A run side by side (A re-read from L2) */
  int pi = 0;
  while (pi + 1 < g.n && (int)blockIdx.x >= g.tile_end[pi]) ++pi;
  const fh_mma_problem& P = g.p[pi];
  const int n0 = ((int)blockIdx.x - (pi > 0 ? g.tile_end[pi - 1] : 0)) * kBN;
  const int m0 = blockIdx.y * kBM;
  const int N = P.N, K = P.K;
  const int KT = (K + kBK - 1) / kBK;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp >> 2, wn = warp & 3;

  auto load = [&](int slot, int kt) {
    const int k0 = kt * kBK;
    fh_bf16* a = sA + slot * kAStage;
#pragma unroll
    for (int c = tid; c < kBM * kBK / 8; c += kThreads) {
      const int r = c >> 2, kc = (c & 3) * 8;
      const bool ok = m0 + r < M && k0 + kc < K;
      fh_cp16(a + r * kRowK + kc, ok ? P.A + (int64_t)(m0 + r) * P.lda + k0 + kc : P.A, ok);
    }
    fh_bf16* b = sB + slot * kBStage;
    if (NN) {
#pragma unroll
      for (int c = tid; c < kBK * kBN / 8; c += kThreads) {
        const int r = c >> 4, nc = (c & 15) * 8;
        const bool ok = k0 + r < K && n0 + nc < N;
        fh_cp16(b + r * kRowN + nc, ok ? P.W + (int64_t)(k0 + r) * P.ldw + n0 + nc : P.W, ok);
      }
    } else {
#pragma unroll
      for (int c = tid; c < kBN * kBK / 8; c += kThreads) {
        const int r = c >> 2, kc = (c & 3) * 8;
        const bool ok = n0 + r < N && k0 + kc < K;
        fh_cp16(b + r * kRowK + kc, ok ? P.W + (int64_t)(n0 + r) * P.ldw + k0 + kc : P.W, ok);
      }
    }
  };

  float acc[kMT][4][4];
#pragma unroll
  for (int i = 0; i < kMT; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < KT) load(s, s);
    fh_cp_commit();
  }
  const int mat = lane >> 3;
  for (int kt = 0; kt < KT; ++kt) {
    fh_cp_wait<kStages - 2>();
    __syncthreads();  /* slice kt landed for every thread; slot (kt - 1) % kStages is free again */
    if (kt + kStages - 1 < KT) load((kt + kStages - 1) % kStages, kt + kStages - 1);
    fh_cp_commit();
    const fh_bf16* a = sA + (kt % kStages) * kAStage;
    const fh_bf16* b = sB + (kt % kStages) * kBStage;
#pragma unroll
    for (int ks = 0; ks < kBK / 16; ++ks) {
      uint32_t af[kMT][4], bf[4][2];
#pragma unroll
      for (int i = 0; i < kMT; ++i)
        fh_ldsm_x4(af[i], a + (wm * kMT * 16 + i * 16 + (lane & 15)) * kRowK + ks * 16 + (lane >> 4) * 8);
#pragma unroll
      for (int jp = 0; jp < 2; ++jp) {
        uint32_t r[4];
        if (NN)
          fh_ldsm_x4<true>(r, b + (ks * 16 + (lane & 7) + (mat & 1) * 8) * kRowN + wn * 32 + jp * 16 + (mat >> 1) * 8);
        else
          fh_ldsm_x4(r, b + (wn * 32 + jp * 16 + (lane & 7) + (mat >> 1) * 8) * kRowK + ks * 16 + (mat & 1) * 8);
        bf[2 * jp][0] = r[0];
        bf[2 * jp][1] = r[1];
        bf[2 * jp + 1][0] = r[2];
        bf[2 * jp + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) fh_mma_bf16(acc[i][j], af[i][0], af[i][1], af[i][2], af[i][3], bf[j][0], bf[j][1]);
    }
  }
  fh_cp_wait<0>();

  /* epilogue: thread (g8, q) holds rows g8, g8 + 8 and columns 2q, 2q + 1 of every 16 x 8 fragment. For
   * each half of the columns the bias and mask loads are issued first (independent, one latency): after
   * a store to C the compiler could not move a load of act above it */
  const int g8 = lane >> 2, q = lane & 3;
  float cs[4][2];
#pragma unroll
  for (int jh = 0; jh < 2; ++jh) {
    float bias[2][2];
    uint32_t am[2][kMT][2];
#pragma unroll
    for (int jj = 0; jj < 2; ++jj) {
      const int c = n0 + wn * 32 + (2 * jh + jj) * 8 + 2 * q;
      bias[jj][0] = bias[jj][1] = 0.0f;
      if (BIAS && c < N) {
        bias[jj][0] = fh_mma_ld_f32<TC>(P.bias, c);
        bias[jj][1] = fh_mma_ld_f32<TC>(P.bias, c + 1);
      }
#pragma unroll
      for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = m0 + wm * kMT * 16 + i * 16 + g8 + h * 8;
          am[jj][i][h] = 0u;
          if (MASK && c < N && r < M)
            am[jj][i][h] = __ldg(reinterpret_cast<const unsigned int*>(P.act + (int64_t)r * P.ldact + c));
        }
    }
#pragma unroll
    for (int jj = 0; jj < 2; ++jj) {
      const int j = 2 * jh + jj;
      cs[j][0] = cs[j][1] = 0.0f;
      const int c = n0 + wn * 32 + j * 8 + 2 * q;
      if (c >= N) continue;
#pragma unroll
      for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = m0 + wm * kMT * 16 + i * 16 + g8 + h * 8;
          if (r >= M) continue;
          float v0 = acc[i][j][2 * h] + bias[jj][0], v1 = acc[i][j][2 * h + 1] + bias[jj][1];
          if (MASK) {
            const __nv_bfloat162 at = *reinterpret_cast<const __nv_bfloat162*>(&am[jj][i][h]);
            if (!(__low2float(at) > 0.0f)) v0 = 0.0f;
            if (!(__high2float(at) > 0.0f)) v1 = 0.0f;
          }
          if (sizeof(TC) == 2) {
            const uint32_t u = fh_pack_bf16x2(v0, v1);
            *reinterpret_cast<uint32_t*>(static_cast<fh_bf16*>(P.C) + (int64_t)r * P.ldc + c) = u;
            if (COLSUM) {
              const __nv_bfloat162 hv = *reinterpret_cast<const __nv_bfloat162*>(&u);
              cs[j][0] += __low2float(hv);
              cs[j][1] += __high2float(hv);
            }
          } else {
            *reinterpret_cast<float2*>(static_cast<float*>(P.C) + (int64_t)r * P.ldc + c) = make_float2(v0, v1);
            if (COLSUM) {
              cs[j][0] += v0;
              cs[j][1] += v1;
            }
          }
        }
    }
  }
  if (COLSUM) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float v = cs[j][e];
        v += __shfl_xor_sync(0xffffffffu, v, 4);
        v += __shfl_xor_sync(0xffffffffu, v, 8);
        v += __shfl_xor_sync(0xffffffffu, v, 16);
        if (g8 == 0) sCol[wm * kBN + wn * 32 + j * 8 + 2 * q + e] = v;
      }
    __syncthreads();
    if (tid < kBN && n0 + tid < N) P.colsum[(int64_t)blockIdx.y * P.ldcs + n0 + tid] = sCol[tid] + sCol[kBN + tid];
  }
}

/* The instantiations the network uses: NT + bias (head outputs, bf16 or fp32 logits), NN + mask +
 * column sums (input gradients through a ReLU). */
#define FH_MMA_KERNELS(X)                         \
  X(false, fh_bf16, true, false, false)           \
  X(false, float, true, false, false)             \
  X(true, fh_bf16, false, true, true)

static std::atomic<int> g_mma_ok[64];  /* per device: 0 unknown, 1 available, -1 not */
static std::mutex g_mma_mu;             /* the first answer per device (sets the kernels' attributes) */

int fh_mma_available(void) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 0;
  const int known = g_mma_ok[dev].load(std::memory_order_acquire);
  if (known != 0) return known == 1;
  std::lock_guard<std::mutex> lock(g_mma_mu);
  if (g_mma_ok[dev].load(std::memory_order_relaxed) == 0) {
    bool ok = true;
    cudaFuncAttributes fa{};
#define FH_MMA_SETUP(nn, tc, bias, mask, colsum)                                                             \
  ok = ok && cudaFuncGetAttributes(&fa, fh_mma_gemm_kernel<nn, tc, bias, mask, colsum>) == cudaSuccess &&    \
       fa.ptxVersion >= 80 &&                                                                                \
       cudaFuncSetAttribute(fh_mma_gemm_kernel<nn, tc, bias, mask, colsum>,                                 \
                            cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kSmemBytes) == cudaSuccess &&  \
       cudaFuncSetAttribute(fh_mma_gemm_kernel<nn, tc, bias, mask, colsum>,                                 \
                            cudaFuncAttributePreferredSharedMemoryCarveout, 100) == cudaSuccess;
    FH_MMA_KERNELS(FH_MMA_SETUP)
#undef FH_MMA_SETUP
    (void)cudaGetLastError();  /* a refusal is an answer here, not an error to report later */
    g_mma_ok[dev].store(ok ? 1 : -1, std::memory_order_release);
  }
  return g_mma_ok[dev].load(std::memory_order_relaxed) == 1;
}

static bool fh_mma_aligned(const void* p, uintptr_t a) { return (reinterpret_cast<uintptr_t>(p) % a) == 0; }

fh_status fh_launch_mma_gemm(const fh_mma_problem* probs, int n_probs, int M, fh_mma_op op, fh_dtype c_dtype,
                             unsigned flags, cudaStream_t s) {
  if (n_probs < 1 || n_probs > FH_MMA_MAX_PROBLEMS || M <= 0) return FH_ERR_UNSUPPORTED;
  fh_mma_group g{};
  g.n = n_probs;
  int tiles = 0;
  for (int i = 0; i < n_probs; ++i) {
    const fh_mma_problem& p = probs[i];
    const bool ok = p.N > 0 && p.K > 0 && p.N % 8 == 0 && p.K % 8 == 0 && p.lda % 8 == 0 && p.ldw % 8 == 0 &&
                    p.ldc % 2 == 0 && p.ldc >= p.N && fh_mma_aligned(p.A, 16) && fh_mma_aligned(p.W, 16) &&
                    fh_mma_aligned(p.C, c_dtype == FH_BF16 ? 4 : 8) && (!(flags & FH_MMA_BIAS) || p.bias) &&
                    (!(flags & FH_MMA_MASK) || (p.act && p.ldact % 2 == 0 && fh_mma_aligned(p.act, 4))) &&
                    (!(flags & FH_MMA_COLSUM) || (p.colsum && p.ldcs >= p.N));
    if (!ok) return FH_ERR_UNSUPPORTED;
    g.p[i] = p;
    tiles += CEIL_DIV(p.N, kBN);
    g.tile_end[i] = tiles;
  }
  if (!fh_mma_available()) return FH_ERR_UNSUPPORTED;
  if (fh_mma_row_tiles(M) > 65535) return FH_ERR_UNSUPPORTED;
  const dim3 grid((unsigned)tiles, (unsigned)fh_mma_row_tiles(M));
  const bool nn = op == FH_MMA_NN, bf = c_dtype == FH_BF16;
  const bool bias = flags & FH_MMA_BIAS, mask = flags & FH_MMA_MASK, colsum = flags & FH_MMA_COLSUM;
  bool launched = false;
#define FH_MMA_LAUNCH(NN_, TC, B_, M_, C_)                                                          \
  if (!launched && nn == NN_ && bf == (sizeof(TC) == 2) && bias == B_ && mask == M_ && colsum == C_) { \
    fh_mma_gemm_kernel<NN_, TC, B_, M_, C_><<<grid, kThreads, kSmemBytes, s>>>(g, M);               \
    launched = true;                                                                                \
  }
  FH_MMA_KERNELS(FH_MMA_LAUNCH)
#undef FH_MMA_LAUNCH
  if (!launched) return FH_ERR_UNSUPPORTED;
  FH_LAUNCH_CHECK();
  return FH_OK;
}
