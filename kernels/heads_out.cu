/*
 * heads_out.cu — the training pass's head-output GEMMs as one persistent, streaming kernel (bf16 mode).
 *
 * The head outputs are narrow GEMMs with a short K (the reference: 2B = 32 768 rows, K 128, N 56 / 160 / 208 /
 * 160): cuBLASLt runs each latency-bound at ~1.5 TB/s of their ~72 MB (bench/RESULTS.md, twenty-eighth session:
 * ~48 µs a step). Their FLOPs are ~4.9 G, a few µs of tensor-core time: the work is moving the activations in and
 * the logits out, so the kernel is built to keep many bytes in flight on every SM:
 *   - PER_SM blocks an SM (1 or 2), each serving one head: the heads get blocks in proportion to their bytes a row
 *     (K + N[k]), so that they finish together; a block holds its head's weights (rows padded so that ldmatrix rows
 *     fall in distinct banks) and biases (fp32) in shared memory for the whole launch;
 *   - the block walks its head's row tiles (ROWS rows; tile b, b + blocks of the head, ...), the activations of
 *     STAGES - 1 tiles ahead in flight by cp.async (STAGES stages), so an SM keeps tens of KB of loads outstanding;
 *   - the WARPS warps split the tile as (ROWS / 32) row groups of two m16 tiles x (WARPS / (ROWS / 32)) runs of the
 *     head's n8 column tiles (at most MAXT a warp), mma.sync m16n8k16 (fp32 accumulators); the bias is added and the
 *     bf16 results go to a shared staging tile, which the whole block (or, with WOUT, each warp its own part) then
 *     writes out as 16-byte row chunks (full sectors, where the per-lane fragment stores would write half ones).
 * Math: y = bf16(sum_k a_k w_k + b), the sum in fp32 in k order, as cuBLASLt's bias epilogue computes it up to the
 * order of the fp32 sums. Deterministic. Nothing synchronises the host; graph-capturable once fh_heads_out_setup
 * ran outside a capture.
 *
 * Limits (fh_heads_out_supported): K a multiple of 32 and at most 256; every N a multiple of 8 with at most MAXT n8
 * tiles a warp; at most 8 heads and no more heads than blocks; lda >= heads * K and every ldc multiples of 8; PER_SM
 * blocks of the widest head's weights, biases, staging tile and STAGES activation tiles within an SM's shared memory
 * (the reference's widest head, N 208: 128 rows x 3 stages 217 KB, 64 rows x 6 stages 189 KB, 32 rows x 4 stages
 * 2 x 106 KB).
 */
#include "net_kernels.cuh"
#include "mma.cuh"

#include <stdio.h>

#include <mutex>

namespace {

/* a shared row's stride in bf16 for n values (n a multiple of 8): an odd multiple of 16 bytes modulo 128, so that
 * eight consecutive rows' 16-byte groups (ldmatrix) and 4-byte fragments (the staging tile) fall in distinct banks */
__host__ __device__ constexpr int padded(int n) { return (n / 2) % 8 == 0 ? n + 8 : n + 16; }

/* The per-launch plan: the heads' shapes and which blocks serve which head. */
struct plan {
  const fh_bf16* A;
  const fh_bf16* W[FH_HEADS_OUT_MAX];
  const fh_bf16* bias[FH_HEADS_OUT_MAX];
  fh_bf16* C[FH_HEADS_OUT_MAX];
  int ldc[FH_HEADS_OUT_MAX];
  int N[FH_HEADS_OUT_MAX];
  int first[FH_HEADS_OUT_MAX + 1]; /* head k's blocks: [first[k], first[k + 1]) */
  int heads, K, lda, M;
};

/* A configuration (fh_heads_out_args.config): rows a tile, stages, warps a block, the most n8 column tiles a warp
 * holds, blocks an SM, and the kernel instance for them. */
struct shape {
  int rows, stages, warps, max_tiles, per_sm;
  void (*kernel)(const plan);
};

/* one head's shared memory: the activation stages, its weights, the staging tile and its biases */
size_t head_smem(const shape& c, int K, int N) {
  return ((size_t)c.stages * c.rows * padded(K) + (size_t)N * padded(K) + (size_t)c.rows * padded(N)) *
             sizeof(fh_bf16) +
         (size_t)N * sizeof(float);
}

/* Thread `at`'s walk over a grid of 16-byte chunks (rows x `chunks`), `threads` chunks apart in row-major order: the
 * divisions once a launch instead of once a chunk (the thirty-first session's profile: the per-chunk divisions
 * were ~13 % of the stall samples) */
struct walk {
  int r, c, dr, dc;
};
__device__ __forceinline__ walk walk_start(int at, int chunks, int threads) {
  return {at / chunks, at % chunks, threads / chunks, threads % chunks};
}
__device__ __forceinline__ void walk_step(walk& w, int chunks) {
  w.r += w.dr;
  w.c += w.dc;
  if (w.c >= chunks) {
    w.c -= chunks;
    ++w.r;
  }
}

/* WOUT: each warp writes out its own part of the staging tile (its 32 rows x its run of column tiles) right after
 * its compute, behind a warp barrier only, so that the warps' copy-outs overlap the others' compute; else the block
 * writes the whole staging tile out between two block barriers */
template <int ROWS, int STAGES, int WARPS, int MAXT, int PER_SM, bool WOUT>
__global__ void __launch_bounds__(WARPS * 32, PER_SM) fh_heads_out_kernel(const plan p) {
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int kThreads = WARPS * 32;
  constexpr int WM = ROWS / 32, WN = WARPS / WM; /* row groups x column runs */
  int h = 0;
  while (h + 1 < p.heads && (int)blockIdx.x >= p.first[h + 1]) ++h;
  const int b = blockIdx.x - p.first[h], nb = p.first[h + 1] - p.first[h];
  const int K = p.K, N = p.N[h], ldk = padded(K), ldo = padded(N), M = p.M;
  const int tiles = (M + ROWS - 1) / ROWS;
  const int mine = b < tiles ? (tiles - b + nb - 1) / nb : 0; /* tiles b, b + nb, ... */
  fh_bf16* st = reinterpret_cast<fh_bf16*>(smem);
  fh_bf16* ws = st + STAGES * ROWS * ldk;
  fh_bf16* os = ws + N * ldk;
  float* bs = reinterpret_cast<float*>(os + ROWS * ldo);
  const fh_bf16* A = p.A + h * K;
  const int kc = K / 8, nc = N / 8; /* 16-byte chunks a row of activations or weights, of results */
  const walk wo = walk_start(threadIdx.x, nc, kThreads);

  /* the weights (cp.async, with the first tile: group 0) and the biases (plain loads, visible after the first
   * barrier) */
  const walk w0 = walk_start(threadIdx.x, kc, kThreads);
  for (walk w = w0; w.r < N; walk_step(w, kc))
    fh_cp16(ws + w.r * ldk + w.c * 8, p.W[h] + (int64_t)w.r * K + w.c * 8, true);
  for (int n = threadIdx.x; n < N; n += kThreads) bs[n] = __bfloat162float(p.bias[h][n]);
  /* my i-th tile's rows into stage i % STAGES; rows past M zero-filled (their results are not stored) */
  auto load = [&](int i) {
    const int row0 = (b + i * nb) * ROWS;
    fh_bf16* dst = st + (i % STAGES) * ROWS * ldk;
    for (walk w = w0; w.r < ROWS; walk_step(w, kc)) {
      const bool valid = row0 + w.r < M;
      fh_cp16(dst + w.r * ldk + w.c * 8, valid ? A + (int64_t)(row0 + w.r) * p.lda + w.c * 8 : A, valid);
    }
  };
#pragma unroll
  for (int i = 0; i < STAGES - 1; ++i) {
    if (i < mine) load(i);
    fh_cp_commit();
  }

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int wm = warp / WN, wn = warp - wm * WN;
  const int ntile = N / 8, nt = ntile / WN + (wn < ntile % WN ? 1 : 0);
  const int t0 = wn * (ntile / WN) + (wn < ntile % WN ? wn : ntile % WN);
  /* this lane's ldmatrix rows: A (m16 x k16 as 4 matrices: lanes 0-15 rows, 16-31 the k + 8 half) and the weights
   * (n8 x k32 as 4 matrices: k 0-7, 8-15, 16-23, 24-31) */
  const int a_off = (wm * 32 + (lane & 15)) * ldk + (lane >> 4) * 8;
  const fh_bf16* wbase = ws + (t0 * 8 + (lane & 7)) * ldk + (lane >> 3) * 8;
  const walk wv = walk_start(lane, nt > 0 ? nt : 1, 32); /* WOUT: the warp's copy-out (32 rows x nt chunks) */

  for (int i = 0; i < mine; ++i) {
    fh_cp_wait<STAGES - 2>();
    __syncthreads(); /* tile i landed; every warp is done with tile i - 1's stage and the staging tile's copy-out */
    if (i + STAGES - 1 < mine) load(i + STAGES - 1);
    fh_cp_commit();
    const fh_bf16* sa = st + (i % STAGES) * ROWS * ldk;
    float acc[MAXT][2][4];
#pragma unroll
    for (int j = 0; j < MAXT; ++j)
#pragma unroll
      for (int m = 0; m < 2; ++m) acc[j][m][0] = acc[j][m][1] = acc[j][m][2] = acc[j][m][3] = 0.0f;
    for (int kp = 0; kp < K / 32; ++kp) {
      uint32_t a[2][2][4];
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int s = 0; s < 2; ++s) fh_ldsm_x4(a[m][s], sa + a_off + m * 16 * ldk + kp * 32 + s * 16);
#pragma unroll
      for (int j = 0; j < MAXT; ++j) {
        if (j < nt) {
          uint32_t w[4];
          fh_ldsm_x4(w, wbase + j * 8 * ldk + kp * 32);
#pragma unroll
          for (int m = 0; m < 2; ++m) {
            fh_mma_bf16(acc[j][m], a[m][0][0], a[m][0][1], a[m][0][2], a[m][0][3], w[0], w[1]);
            fh_mma_bf16(acc[j][m], a[m][1][0], a[m][1][1], a[m][1][2], a[m][1][3], w[2], w[3]);
          }
        }
      }
    }
    /* bias, bf16, into the staging tile */
#pragma unroll
    for (int j = 0; j < MAXT; ++j) {
      if (j < nt) {
        const int n = (t0 + j) * 8 + 2 * (lane & 3);
        const float b0 = bs[n], b1 = bs[n + 1];
#pragma unroll
        for (int m = 0; m < 2; ++m) {
          const int r = wm * 32 + m * 16 + (lane >> 2);
          *reinterpret_cast<uint32_t*>(os + r * ldo + n) = fh_pack_bf16x2(acc[j][m][0] + b0, acc[j][m][1] + b1);
          *reinterpret_cast<uint32_t*>(os + (r + 8) * ldo + n) = fh_pack_bf16x2(acc[j][m][2] + b0, acc[j][m][3] + b1);
        }
      }
    }
    const int row0 = (b + i * nb) * ROWS;
    fh_bf16* C = p.C[h];
    const int ldc = p.ldc[h];
    if (WOUT) {
      __syncwarp(); /* this warp's part of the staging tile is complete (the next tile's barrier orders its reuse) */
      if (nt > 0)
        for (walk w = wv; w.r < 32 && row0 + wm * 32 + w.r < M; walk_step(w, nt))
          *reinterpret_cast<uint4*>(C + (int64_t)(row0 + wm * 32 + w.r) * ldc + (t0 + w.c) * 8) =
              *reinterpret_cast<const uint4*>(os + (wm * 32 + w.r) * ldo + (t0 + w.c) * 8);
      continue;
    }
    __syncthreads(); /* the staging tile is complete */
    for (walk w = wo; w.r < ROWS && row0 + w.r < M; walk_step(w, nc))
      *reinterpret_cast<uint4*>(C + (int64_t)(row0 + w.r) * ldc + w.c * 8) =
          *reinterpret_cast<const uint4*>(os + w.r * ldo + w.c * 8);
  }
  fh_cp_wait<0>();
}

template <int ROWS, int STAGES, int WARPS, int MAXT, int PER_SM, bool WOUT = false>
constexpr shape config() {
  return {ROWS, STAGES, WARPS, MAXT, PER_SM, fh_heads_out_kernel<ROWS, STAGES, WARPS, MAXT, PER_SM, WOUT>};
}
/* FH_HEADS_OUT=1 .. 6 (5 and 6: the warps' own copy-outs). The H100's probe (bench/RESULTS.md): in the thirty-first
 * session (the four per-head GEMMs back to back 51.2 us) 8 warps and 32- or 64-row tiles 114 / 66 us, the stage count
 * no matter, 16 warps 57 us at 64 rows and 48 us at 128, the staging tiles stored by the bulk copy engine slower; in
 * the thirty-second, with the division-free walks (the GEMMs 58.7 us on that machine), 1..6: 47.6, 53.3, 45.7, 46.6,
 * 46.9, 53.8 us. In the step none beats the per-head GEMMs on their SM shares, so the kernel is opt-in */
constexpr shape kShapes[FH_HEADS_OUT_CONFIGS] = {
    config<128, 3, 16, 7, 1>(), config<64, 6, 16, 4, 1>(),       config<32, 4, 8, 4, 2>(),
    config<128, 2, 16, 7, 1>(), config<128, 3, 16, 7, 1, true>(), config<64, 6, 16, 4, 1, true>()};

bool aligned16(const void* q) { return ((uintptr_t)q & 15u) == 0; }

/* The most shared memory config c's block needs for these shapes; 0 where the kernel does not run them. */
size_t plan_smem(int config, int heads, int K, const int* N, int lda) {
  if (config < 0 || config >= FH_HEADS_OUT_CONFIGS || heads < 1 || heads > FH_HEADS_OUT_MAX || K < 32 || K > 256 ||
      K % 32 || lda < heads * K || lda % 8)
    return 0;
  const shape& c = kShapes[config];
  const int wn = c.warps / (c.rows / 32);
  size_t most = 0;
  for (int k = 0; k < heads; ++k) {
    if (N[k] < 8 || N[k] % 8 || (N[k] / 8 + wn - 1) / wn > c.max_tiles) return 0;
    const size_t s = head_smem(c, K, N[k]);
    if (s > most) most = s;
  }
  return most;
}

/* The blocks shared out over the heads in proportion to their bytes a row (K + N[k]), each at least one (largest
 * remainders); false with fewer blocks than heads. */
bool share_blocks(int heads, int K, const int* N, int blocks, plan& p) {
  if (blocks < heads) return false;
  double total = 0.0;
  for (int k = 0; k < heads; ++k) total += K + N[k];
  int got[FH_HEADS_OUT_MAX], used = 0;
  double rem[FH_HEADS_OUT_MAX];
  for (int k = 0; k < heads; ++k) {
    const double want = (blocks - heads) * (K + N[k]) / total;
    got[k] = 1 + (int)want;
    rem[k] = want - (int)want;
    used += got[k];
  }
  while (used < blocks) {
    int best = 0;
    for (int k = 1; k < heads; ++k)
      if (rem[k] > rem[best]) best = k;
    ++got[best];
    rem[best] = -1.0;
    ++used;
  }
  p.first[0] = 0;
  for (int k = 0; k < heads; ++k) p.first[k + 1] = p.first[k] + got[k];
  return true;
}

}  // namespace

bool fh_heads_out_supported(int config, int heads, int K, const int* N, int lda, int smem_optin) {
  const size_t s = plan_smem(config, heads, K, N, lda);
  if (!s) return false;
  /* per_sm blocks an SM, each with its 1 KB of reserved shared memory (the SM holds the opt-in maximum + 1 KB) */
  return s <= FH_HEADS_OUT_SMEM_MAX && kShapes[config].per_sm * (s + 1024) <= (size_t)smem_optin + 1024;
}

fh_status fh_heads_out_setup() {
  static std::once_flag once;
  static cudaError_t attr = cudaSuccess;
  std::call_once(once, [] {
    for (int c = 0; c < FH_HEADS_OUT_CONFIGS && attr == cudaSuccess; ++c)
      attr = cudaFuncSetAttribute(kShapes[c].kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, FH_HEADS_OUT_SMEM_MAX);
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
  const size_t smem = plan_smem(a.config, a.heads, a.K, a.N, a.lda);
  if (!smem || smem > FH_HEADS_OUT_SMEM_MAX || !a.A || !aligned16(a.A) ||
      !share_blocks(a.heads, a.K, a.N, blocks * kShapes[a.config].per_sm, p)) {
    fh_cuda_set_error(__FILE__, __LINE__, "fh_launch_heads_out", "shapes outside the streaming head-output kernel");
    return FH_ERR_INVALID_ARGUMENT;
  }
  p.A = a.A;
  p.lda = a.lda;
  p.heads = a.heads;
  p.K = a.K;
  p.M = a.M;
  for (int k = 0; k < a.heads; ++k) {
    if (!a.W[k] || !a.bias[k] || !a.C[k] || !aligned16(a.W[k]) || !aligned16(a.C[k]) || a.ldc[k] < a.N[k] ||
        a.ldc[k] % 8) {
      char why[112];
      snprintf(why, sizeof why, "head %d: a pointer null or not 16-byte aligned, or ldc %d < N %d (or not a multiple of 8)",
               k, a.ldc[k], a.N[k]);
      fh_cuda_set_error(__FILE__, __LINE__, "fh_launch_heads_out", why);
      return FH_ERR_INVALID_ARGUMENT;
    }
    p.W[k] = a.W[k];
    p.bias[k] = a.bias[k];
    p.C[k] = a.C[k];
    p.ldc[k] = a.ldc[k];
    p.N[k] = a.N[k];
  }
  FH_TRY(fh_heads_out_setup());
  const shape& c = kShapes[a.config];
  c.kernel<<<p.first[a.heads], c.warps * 32, smem, s>>>(p);
  FH_LAUNCH_CHECK();
  return FH_OK;
}
