/*
 * heads_out.cu — the training pass's head-output GEMMs as one persistent, streaming kernel (bf16 mode).
 *
 * The head outputs are narrow GEMMs with a short K (the reference: 2B = 32 768 rows, K 128, N 56 / 160 / 208 /
 * 160): cuBLASLt runs each with two k-slices a tile, latency-bound at ~1.5 TB/s of their ~72 MB (bench/RESULTS.md,
 * twenty-eighth session: ~48 µs a step, beside each other on SM shares or back to back alike). Their FLOPs are
 * ~4.9 G, a few µs of tensor-core time: the work is moving the activations in and the logits out. Here:
 *   - one block an SM (grid = min(SMs, row tiles)), 8 warps; every head's weights (sum N rows x K, rows padded by
 *     16 bytes for conflict-free ldmatrix) and biases (fp32) copied into shared memory once per block;
 *   - the block walks row tiles of 32 rows (t = blockIdx.x, + gridDim.x, ...), every head's activations of a tile
 *     (32 x heads*K bf16) brought in by cp.async into one of two stages while the other stage's tile is computed;
 *   - warp w owns a run of one head's n8 column tiles (the heads' column tiles shared out in proportion, at most
 *     kMaxTiles a warp) and computes them for both m16 tiles of the row tile with mma.sync m16n8k16 (fp32
 *     accumulators), then adds the bias and stores bf16 pairs straight from the fragments.
 * Math: y = bf16(sum_k a_k w_k + b), the sum in fp32 in k order, as cuBLASLt's bias epilogue computes it up to the
 * order of the fp32 sums. Deterministic. Nothing synchronises the host; graph-capturable once fh_heads_out_setup
 * ran outside a capture.
 *
 * Limits (fh_heads_out_supported): K a multiple of 32 and at most 256; every N a multiple of 8; at most 8 heads;
 * lda >= heads * K, lda and every ldc multiples of 8 and 2; the weights, biases and stages within the device's
 * shared memory (the reference: 584 x 136 bf16 + 584 fp32 + 2 x 32 x 520 bf16 = 227 744 bytes of 232 448);
 * every warp at most kMaxTiles column tiles.
 */
#include "net_kernels.cuh"
#include "mma.cuh"

#include <stdio.h>

#include <mutex>

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kRows = 32;      /* rows a tile: two m16 tiles */
constexpr int kMaxTiles = 12;  /* n8 column tiles a warp */
constexpr int kPad = 8;        /* bf16 a shared row carries past its data (16 bytes: ldmatrix rows in distinct banks) */

/* The per-launch plan: the heads' shapes, where each head's weights start in shared memory, and each warp's run. */
struct plan {
  const fh_bf16* A;
  const fh_bf16* W[FH_HEADS_OUT_MAX];
  const fh_bf16* bias[FH_HEADS_OUT_MAX];
  fh_bf16* C[FH_HEADS_OUT_MAX];
  int ldc[FH_HEADS_OUT_MAX];
  int N[FH_HEADS_OUT_MAX];
  int wrow[FH_HEADS_OUT_MAX]; /* head k's first row in the shared weights */
  int warp_head[kWarps];      /* -1: the warp has no columns */
  int warp_t0[kWarps];        /* its first n8 column tile within its head */
  int warp_nt[kWarps];        /* its column tiles (<= kMaxTiles) */
  int heads, K, lda, M, rows; /* rows: the sum of N */
};

size_t smem_bytes(int rows, int K, int heads) {
  return (size_t)rows * (K + kPad) * sizeof(fh_bf16) + (size_t)rows * sizeof(float) +
         2 * (size_t)kRows * (heads * K + kPad) * sizeof(fh_bf16);
}

/* The warps shared out over the heads: every head at least one, then one at a time to the head whose warps carry the
 * most column tiles each; each head's tiles split into near-equal contiguous runs. False when it cannot fit. */
bool share_warps(int heads, const int* N, plan& p) {
  if (heads < 1 || heads > kWarps) return false;
  int w[FH_HEADS_OUT_MAX], tiles[FH_HEADS_OUT_MAX];
  for (int k = 0; k < heads; ++k) {
    tiles[k] = N[k] / 8;
    w[k] = 1;
  }
  auto per = [&](int k) { return (tiles[k] + w[k] - 1) / w[k]; };
  for (int used = heads; used < kWarps; ++used) {
    int best = 0;
    for (int k = 1; k < heads; ++k)
      if (per(k) > per(best)) best = k;
    if (per(best) <= 1) break;
    ++w[best];
  }
  int warp = 0;
  for (int k = 0; k < heads; ++k) {
    if (per(k) > kMaxTiles) return false;
    for (int j = 0, t0 = 0; j < w[k]; ++j, ++warp) {
      const int nt = tiles[k] / w[k] + (j < tiles[k] % w[k] ? 1 : 0);
      p.warp_head[warp] = nt > 0 ? k : -1;
      p.warp_t0[warp] = t0;
      p.warp_nt[warp] = nt;
      t0 += nt;
    }
  }
  for (; warp < kWarps; ++warp) {
    p.warp_head[warp] = -1;
    p.warp_t0[warp] = 0;
    p.warp_nt[warp] = 0;
  }
  return true;
}

/* One row tile's activations (kRows x heads*K) into a stage; rows past M zero-filled (their results are not stored). */
__device__ __forceinline__ void load_tile(const plan& p, fh_bf16* stage, int row0, int ldsa) {
  const int chunks = p.heads * p.K / 8; /* 16-byte chunks a row */
  for (int i = threadIdx.x; i < kRows * chunks; i += kThreads) {
    const int r = i / chunks, c = i - r * chunks;
    const bool valid = row0 + r < p.M;
    const fh_bf16* src = valid ? p.A + (int64_t)(row0 + r) * p.lda + c * 8 : p.A;
    fh_cp16(stage + r * ldsa + c * 8, src, valid);
  }
}

__global__ void __launch_bounds__(kThreads, 1) fh_heads_out_kernel(const plan p) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int K = p.K, ldw = K + kPad, ldsa = p.heads * K + kPad;
  fh_bf16* ws = reinterpret_cast<fh_bf16*>(smem);
  float* bs = reinterpret_cast<float*>(ws + (size_t)p.rows * ldw);
  fh_bf16* st0 = reinterpret_cast<fh_bf16*>(bs + p.rows);
  const int stage_elems = kRows * ldsa; /* stage i at st0 + i * stage_elems */
  const int tiles = (p.M + kRows - 1) / kRows;

  /* the weights (cp.async, with the first tile: group 0) and the biases (plain loads, visible after the first
   * barrier) */
  for (int k = 0; k < p.heads; ++k) {
    const int chunks = K / 8;
    for (int i = threadIdx.x; i < p.N[k] * chunks; i += kThreads) {
      const int n = i / chunks, c = i - n * chunks;
      fh_cp16(ws + (size_t)(p.wrow[k] + n) * ldw + c * 8, p.W[k] + (int64_t)n * K + c * 8, true);
    }
    for (int n = threadIdx.x; n < p.N[k]; n += kThreads) bs[p.wrow[k] + n] = __bfloat162float(p.bias[k][n]);
  }
  int t = blockIdx.x;
  if (t < tiles) load_tile(p, st0, t * kRows, ldsa);
  fh_cp_commit();
  if (t + (int)gridDim.x < tiles) load_tile(p, st0 + stage_elems, (t + gridDim.x) * kRows, ldsa);
  fh_cp_commit();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int head = p.warp_head[warp], t0 = p.warp_t0[warp], nt = p.warp_nt[warp];
  /* this lane's ldmatrix rows: A (m16 x k16 as 4 matrices: lanes 0-15 rows, 16-31 the k + 8 half) and the weights
   * (n8 x k32 as 4 matrices: k 0-7, 8-15, 16-23, 24-31) */
  const int a_off = (lane & 15) * ldsa + (head >= 0 ? head : 0) * K + (lane >> 4) * 8;
  const fh_bf16* wbase = ws + (size_t)((head >= 0 ? p.wrow[head] : 0) + t0 * 8 + (lane & 7)) * ldw + (lane >> 3) * 8;

  for (int it = 0; t < tiles; t += gridDim.x, ++it) {
    const fh_bf16* sa = st0 + (it & 1) * stage_elems;
    fh_cp_wait<1>();
    __syncthreads();
    float acc[kMaxTiles][2][4];
#pragma unroll
    for (int j = 0; j < kMaxTiles; ++j)
#pragma unroll
      for (int m = 0; m < 2; ++m) acc[j][m][0] = acc[j][m][1] = acc[j][m][2] = acc[j][m][3] = 0.0f;
    if (head >= 0) {
      for (int kp = 0; kp < K / 32; ++kp) {
        uint32_t a[2][2][4];
#pragma unroll
        for (int m = 0; m < 2; ++m)
#pragma unroll
          for (int s = 0; s < 2; ++s) fh_ldsm_x4(a[m][s], sa + a_off + m * 16 * ldsa + kp * 32 + s * 16);
#pragma unroll
        for (int j = 0; j < kMaxTiles; ++j) {
          if (j < nt) {
            uint32_t b[4];
            fh_ldsm_x4(b, wbase + (size_t)j * 8 * ldw + kp * 32);
#pragma unroll
            for (int m = 0; m < 2; ++m) {
              fh_mma_bf16(acc[j][m], a[m][0][0], a[m][0][1], a[m][0][2], a[m][0][3], b[0], b[1]);
              fh_mma_bf16(acc[j][m], a[m][1][0], a[m][1][1], a[m][1][2], a[m][1][3], b[2], b[3]);
            }
          }
        }
      }
    }
    __syncthreads(); /* every warp is done with this stage: the tile after next may land in it */
    const int next = t + 2 * (int)gridDim.x;
    if (next < tiles) load_tile(p, st0 + (it & 1) * stage_elems, next * kRows, ldsa);
    fh_cp_commit();
    if (head >= 0) {
      const int row0 = t * kRows + (lane >> 2);
      fh_bf16* C = p.C[head];
      const int ldc = p.ldc[head];
#pragma unroll
      for (int j = 0; j < kMaxTiles; ++j) {
        if (j < nt) {
          const int n = (t0 + j) * 8 + 2 * (lane & 3);
          const float b0 = bs[p.wrow[head] + n], b1 = bs[p.wrow[head] + n + 1];
#pragma unroll
          for (int m = 0; m < 2; ++m) {
            const int r = row0 + m * 16;
            if (r < p.M)
              *reinterpret_cast<uint32_t*>(C + (int64_t)r * ldc + n) = fh_pack_bf16x2(acc[j][m][0] + b0, acc[j][m][1] + b1);
            if (r + 8 < p.M)
              *reinterpret_cast<uint32_t*>(C + (int64_t)(r + 8) * ldc + n) =
                  fh_pack_bf16x2(acc[j][m][2] + b0, acc[j][m][3] + b1);
          }
        }
      }
    }
  }
  fh_cp_wait<0>();
}

bool aligned16(const void* q) { return ((uintptr_t)q & 15u) == 0; }

}  // namespace

/* The shapes' part of a plan (heads, K, lda, N, wrow, rows and the warps' runs); false where the kernel does not run
 * them within smem_limit bytes of shared memory. */
static bool plan_shapes(int heads, int K, const int* N, int lda, int smem_limit, plan& p) {
  if (heads < 1 || heads > FH_HEADS_OUT_MAX || K < 32 || K > 256 || K % 32 || lda < heads * K || lda % 8) return false;
  p.heads = heads;
  p.K = K;
  p.lda = lda;
  p.rows = 0;
  for (int k = 0; k < heads; ++k) {
    if (N[k] < 8 || N[k] % 8) return false;
    p.N[k] = N[k];
    p.wrow[k] = p.rows;
    p.rows += N[k];
  }
  if (!share_warps(heads, N, p)) return false;
  const size_t smem = smem_bytes(p.rows, K, heads);
  return smem <= FH_HEADS_OUT_SMEM_MAX && smem <= (size_t)smem_limit;
}

bool fh_heads_out_supported(int heads, int K, const int* N, int lda, int smem_optin) {
  plan p{};
  return plan_shapes(heads, K, N, lda, smem_optin, p);
}

fh_status fh_heads_out_setup() {
  static std::once_flag once;
  static cudaError_t attr = cudaSuccess;
  std::call_once(once, [] {
    attr = cudaFuncSetAttribute(fh_heads_out_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, FH_HEADS_OUT_SMEM_MAX);
    if (attr != cudaSuccess) (void)cudaGetLastError(); /* not left for an unrelated launch's check to find */
  });
  if (attr != cudaSuccess) {
    fh_cuda_set_error(__FILE__, __LINE__, "fh_heads_out_setup", cudaGetErrorString(attr));
    return FH_ERR_DEVICE;
  }
  return FH_OK;
}

fh_status fh_launch_heads_out(const fh_heads_out_args& a, int blocks, cudaStream_t s) {
  if (a.M <= 0) return FH_OK;
  plan p{};
  if (!plan_shapes(a.heads, a.K, a.N, a.lda, FH_HEADS_OUT_SMEM_MAX, p) || !a.A || !aligned16(a.A) || blocks < 1) {
    fh_cuda_set_error(__FILE__, __LINE__, "fh_launch_heads_out", "shapes outside the streaming head-output kernel");
    return FH_ERR_INVALID_ARGUMENT;
  }
  p.A = a.A;
  p.M = a.M;
  for (int k = 0; k < a.heads; ++k) {
    if (!a.W[k] || !a.bias[k] || !a.C[k] || !aligned16(a.W[k]) || ((uintptr_t)a.C[k] & 3u) || a.ldc[k] < a.N[k] ||
        a.ldc[k] % 2) {
      char why[96];
      snprintf(why, sizeof why, "head %d: a pointer null or misaligned, or ldc %d < N %d (or odd)", k, a.ldc[k], a.N[k]);
      fh_cuda_set_error(__FILE__, __LINE__, "fh_launch_heads_out", why);
      return FH_ERR_INVALID_ARGUMENT;
    }
    p.W[k] = a.W[k];
    p.bias[k] = a.bias[k];
    p.C[k] = a.C[k];
    p.ldc[k] = a.ldc[k];
  }
  FH_TRY(fh_heads_out_setup());
  const int tiles = (a.M + kRows - 1) / kRows;
  fh_heads_out_kernel<<<tiles < blocks ? tiles : blocks, kThreads, smem_bytes(p.rows, p.K, p.heads), s>>>(p);
  FH_LAUNCH_CHECK();
  return FH_OK;
}
