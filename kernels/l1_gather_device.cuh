/*
 * l1_gather_device.cuh — the first layer's GEMMs that gather their own rows (sm_90a; kernels/l1_gather.cu launches
 * them, bench/gpu/gather_gemm_probe.cu measures them against cuBLASLt on the materialised block).
 *
 * A training row's input is [8 account features | 56 zeros | the market window of its bar t]: the window is the
 * feature matrix's rows t-W+1 .. t, W F contiguous bf16 of the (n_bars, F) matrix. The replay gather used to
 * write every row out (~38 MB a step at the reference) for cuBLASLt to read back; these kernels read the window
 * straight from the feature matrix (~18 MB, L2-resident) by each row's bar.
 *
 * fh_l1g_fwd_kernel<PERSIST, CL>: Y = relu(X W^T + b) (bf16 out), X's rows gathered, W (N, K = 64 + W F) in the
 * layout above (the paired layout's w1s). Block tile 128 x 256, K slices of 64, a kStages ring. Warpgroup 0
 * produces: its 128 threads copy the A slice with cp.async (16-byte column c of 8 rows each, the rows' addresses
 * computed once a tile) and arrive on the stage's `full` barrier when their copies land; its thread 0 loads the W
 * slice by TMA (128-byte swizzle) onto the same barrier. Warpgroups 1 and 2 consume 64 rows each: wait `full`,
 * wgmma m64n256k16 x 4, and once a slice's MMAs retired (wait_group 1) release its stage on `empty`. PERSIST: a
 * grid of at most one block an SM walks the tiles (n fastest), the ring's slices counted across tiles, so that the
 * producer loads the next tile while the consumers store the last. CL = 2 (PERSIST only): clusters of two CTAs take
 * m-tiles 2u and 2u+1 of one W tile and each loads half of every W slice by TMA multicast into both. Epilogue from
 * the accumulators: bias, ReLU, bf16x2 stores, and optionally the ReLU bit mask of rows < mask_rows in cuBLASLt's
 * RELU_AUX layout (bit c of row r at r * mask_ld + c): a quad's lanes OR their column pairs' bits with two XOR
 * shuffles and lane 0 of the quad stores 32 columns a word. The sums run in the same order in every variant.
 *
 * fh_l1g_dw_kernel<SWAP>: dW (N x W F, fp32) = dH^T Xm, K = the batch's samples, Xm's row j the window of bar[j].
 * Both operands MN-major in shared memory: a slice of 64 samples is 64 lines of 128 bytes per 64-column atom (the
 * line = the sample, the swizzle on the line index); A's two atoms (64 rows of dH each) by TMA from dH (M, N)
 * row-major, B's four atoms of window columns by cp.async. A block owns one 128 x 256 tile and one of `splits`
 * equal runs of the samples (same warp roles), and stores its fp32 partial tile; fh_l1g_dw_reduce sums the splits in
 * split order, so every run gives the same bits.
 */
#ifndef FH_L1_GATHER_DEVICE_CUH
#define FH_L1_GATHER_DEVICE_CUH

#include "l1_gather.cuh"
#include "sm90.cuh"

namespace fh_l1g {

constexpr int kBM = 128, kBN = 256, kBK = 64, kStages = 4, kThreads = 384;
constexpr int kAStage = kBM * kBK * 2, kBStage = kBN * kBK * 2, kStage = kAStage + kBStage;
constexpr int kSmem = kStages * kStage + 1024; /* + the slack to align the ring to 1024 bytes (the swizzle atom) */
constexpr int kAcc = 64;                        /* the account block's columns (8 features, 56 zeros) */
constexpr int kDwAStage = 2 * 64 * 128, kDwBStage = 4 * 64 * 128, kDwStage = kDwAStage + kDwBStage;
constexpr int kDwSmem = kStages * kDwStage + 1024;
constexpr int kDwBars = 4096; /* the dW producer's bar table: a chunk of its samples' bars in shared memory */

}  // namespace fh_l1g

/* a row's window base: bar clamped into [W-1, n_bars-1] (a zeroed batch, as in the trainer's warm-up, reads bar 0) */
__device__ __forceinline__ const __nv_bfloat16* fh_l1g_window(const __nv_bfloat16* feat, int32_t bar, int32_t F,
                                                              int32_t window, int64_t n_bars) {
  const int64_t t = min(max((int64_t)bar, (int64_t)window - 1), n_bars - 1);
  return feat + (t - (window - 1)) * F;
}

/* The A operand's row `row`, 16-byte column c of a K slice: its base, so that slice kb starts at base + kb * kBK
 * (nullptr past the last row), and the source and byte count of slice kb (slice 0 of a gathered row is the account
 * block: column 0 the 8 account features, the rest zeros) */
__device__ __forceinline__ const __nv_bfloat16* fh_l1g_row_base(const fh_l1g_fwd_args& a, int row, int c) {
  using namespace fh_l1g;
  if (row >= a.M) return nullptr;
  if (!a.bar) return a.blk + (int64_t)row * a.blk_ld + c * 8;
  return fh_l1g_window(a.feat, a.bar[row], a.F, a.window, a.n_bars) - kAcc + c * 8;
}
__device__ __forceinline__ const void* fh_l1g_a_src(const fh_l1g_fwd_args& a, const __nv_bfloat16* base, int row,
                                                    int kb, int c, int* bytes) {
  using namespace fh_l1g;
  *bytes = 0;
  if (!base) return a.W; /* any valid address where nothing is read */
  if (a.bar && kb == 0) {
    if (c != 0) return a.W;
    *bytes = 16;
    return a.acc + (int64_t)row * 8;
  }
  *bytes = 16;
  return base + kb * kBK;
}

/* One warpgroup's 64 x 256 accumulator tile (rows m0.., columns n0..) + bias, ReLU, as bf16 into a.Y, and the
 * ReLU bits of rows < mask_rows */
__device__ __forceinline__ void fh_l1g_store(const fh_l1g_fwd_args& a, const float (&d)[128], int m0, int n0) {
  const int lane = threadIdx.x & 31, w = (threadIdx.x >> 5) & 3;
  const int r0 = m0 + w * 16 + (lane >> 2);
  uint32_t word[2] = {0u, 0u}; /* the bits of 32 columns of rows r0 and r0 + 8, built four groups at a time */
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    const int col = n0 + 8 * j + 2 * (lane & 3);
    const bool in = col < a.N;
    const float b0 = in ? __bfloat162float(a.bias[col]) : 0.0f, b1 = in ? __bfloat162float(a.bias[col + 1]) : 0.0f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = r0 + 8 * h;
      const float y0 = d[4 * j + 2 * h] + b0, y1 = d[4 * j + 2 * h + 1] + b1;
      if (in && row < a.M)
        *reinterpret_cast<__nv_bfloat162*>(a.Y + (int64_t)row * a.ldy + col) =
            __floats2bfloat162_rn(fmaxf(y0, 0.0f), fmaxf(y1, 0.0f));
      if (a.mask) {
        uint32_t bits = in ? ((y0 > 0.0f ? 1u : 0u) | (y1 > 0.0f ? 2u : 0u)) << (2 * (lane & 3)) : 0u;
        bits |= __shfl_xor_sync(0xffffffffu, bits, 1);
        bits |= __shfl_xor_sync(0xffffffffu, bits, 2);
        word[h] |= bits << (8 * (j & 3));
        if ((j & 3) == 3) {
          if ((lane & 3) == 0 && row < a.mask_rows) a.mask[((int64_t)row * a.mask_ld + n0) / 32 + j / 4] = word[h];
          word[h] = 0u;
        }
      }
    }
  }
}

template <bool PERSIST, int CL>
__global__ void __launch_bounds__(fh_l1g::kThreads, 1)
    fh_l1g_fwd_kernel(const __grid_constant__ CUtensorMap wmap, const fh_l1g_fwd_args a) {
  using namespace fh_l1g;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = (fh_smem_addr(smem_raw) + 1023u) & ~1023u;
  __shared__ __align__(8) uint64_t bars[2 * kStages];
  const uint32_t full0 = fh_smem_addr(&bars[0]), empty0 = fh_smem_addr(&bars[kStages]);
  const int wg = threadIdx.x >> 7, t = threadIdx.x & 127;
  const uint32_t rank = CL > 1 ? fh_cluster_rank() : 0u;
  const int tiles_n = (a.N + kBN - 1) / kBN, tiles_m = (a.M + kBM - 1) / kBM;
  const int units = tiles_n * ((tiles_m + CL - 1) / CL);
  const int first = PERSIST ? (int)blockIdx.x / CL : (int)(blockIdx.y * gridDim.x + blockIdx.x);
  const int stride = PERSIST ? (int)gridDim.x / CL : units;
  const int KB = a.K / kBK;
  auto sa = [&](int s) { return base + (uint32_t)(s * kStage); };
  auto sb = [&](int s) { return base + (uint32_t)(s * kStage + kAStage); };
  auto tile_n0 = [&](int u) { return (u % tiles_n) * kBN; };
  auto tile_m0 = [&](int u) { return ((u / tiles_n) * CL + (int)rank) * kBM; };
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      fh_mbar_init(full0 + 8 * s, 128 + 1);
      fh_mbar_init(empty0 + 8 * s, 8 * CL); /* lane 0 of each consumer warp of each CTA */
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  if (CL > 1)
    fh_cluster_sync();
  else
    __syncthreads();
  if (wg == 0) {
    /* producer: thread t copies 16-byte column c = t % 8 of rows t/8 + 16 i */
    const int c = t & 7;
    int g = 0; /* slices through the ring so far */
    for (int u = first; u < units; u += stride) {
      const int n0 = tile_n0(u), m0 = tile_m0(u);
      const __nv_bfloat16* rowp[kBM / 16];
#pragma unroll
      for (int i = 0; i < kBM / 16; ++i) rowp[i] = fh_l1g_row_base(a, m0 + (t >> 3) + 16 * i, c);
      for (int kb = 0; kb < KB; ++kb, ++g) {
        const int s = g % kStages;
        if (g >= kStages) fh_mbar_wait(empty0 + 8 * s, ((g / kStages) - 1) & 1);
        if (t == 0) {
          fh_mbar_arrive_tx(full0 + 8 * s, (uint32_t)kBStage);
          if (CL > 1)
            fh_tma_load_2d_mc(sb(s) + rank * (uint32_t)(kBStage / CL), &wmap, kb * kBK, n0 + (int)rank * (kBN / CL),
                              full0 + 8 * s, (uint16_t)((1u << CL) - 1u));
          else
            fh_tma_load_2d(sb(s), &wmap, kb * kBK, n0, full0 + 8 * s);
        }
#pragma unroll
        for (int i = 0; i < kBM / 16; ++i) {
          const int r = (t >> 3) + 16 * i;
          int nb = 0;
          const void* src = fh_l1g_a_src(a, rowp[i], m0 + r, kb, c, &nb);
          fh_cp16(sa(s) + fh_swz(r, c), src, nb);
        }
        fh_cp_async_arrive(full0 + 8 * s);
      }
    }
  } else {
    /* consumers: warpgroup wg-1 has rows (wg-1)*64 .. +63 of each tile */
    const int cw = wg - 1, lane = threadIdx.x & 31;
    auto release = [&](int slice) {
      if (lane != 0) return;
      const uint32_t e = empty0 + 8 * (uint32_t)(slice % kStages);
      if (CL > 1) {
#pragma unroll
        for (int q = 0; q < CL; ++q) fh_mbar_arrive_cluster(fh_mapa(e, (uint32_t)q));
      } else {
        fh_mbar_arrive(e);
      }
    };
    int g = 0;
    for (int u = first; u < units; u += stride) {
      const int n0 = tile_n0(u), m0 = tile_m0(u);
      float d[128];
#pragma unroll
      for (int i = 0; i < 128; ++i) d[i] = 0.0f;
      for (int kb = 0; kb < KB; ++kb, ++g) {
        const int s = g % kStages;
        fh_mbar_wait(full0 + 8 * s, (g / kStages) & 1);
        fh_fence_proxy_async();
        fh_wgmma_fence();
#pragma unroll
        for (int k = 0; k < kBK / 16; ++k)
          fh_wgmma_m64n256k16<0, 0>(d, fh_desc_k128(sa(s) + (uint32_t)(cw * 64 * 128 + k * 32)),
                                    fh_desc_k128(sb(s) + (uint32_t)(k * 32)));
        fh_wgmma_commit();
        fh_wgmma_wait<1>();
        if (kb > 0) release(g - 1);
      }
      fh_wgmma_wait<0>();
      release(g - 1); /* the tile's last slice */
      fh_l1g_store(a, d, m0 + cw * 64, n0);
    }
  }
  /* no CTA leaves while its peer may still multicast into it or arrive on its barriers */
  if (CL > 1) fh_cluster_sync();
}

/* SWAP = false: a block's tile is 128 rows of dW (hidden units) x 256 window columns; A = dH's rows by TMA, B = the
 * gathered windows (16 copies a producer thread and slice). SWAP = true (N a multiple of 256): the tile is dW's
 * transpose, 128 window columns x 256 hidden units; A = the gathered windows (8 copies a thread and slice, as the
 * forward's producer), B = dH by TMA (four 64-column boxes); the partial is stored transposed. The same sums either
 * way, in the same order within a split. */
template <bool SWAP>
static __global__ void __launch_bounds__(fh_l1g::kThreads, 1)
    fh_l1g_dw_kernel(const __grid_constant__ CUtensorMap hmap, const fh_l1g_dw_args a) {
  using namespace fh_l1g;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = (fh_smem_addr(smem_raw) + 1023u) & ~1023u;
  __shared__ __align__(8) uint64_t bars[2 * kStages];
  __shared__ int32_t sbar[kDwBars];
  const uint32_t full0 = fh_smem_addr(&bars[0]), empty0 = fh_smem_addr(&bars[kStages]);
  const int wg = threadIdx.x >> 7, t = threadIdx.x & 127;
  const int cols = a.window * a.F;
  /* tiles: the tile's rows (m) and columns (n) of the GEMM the block computes (dW, or its transpose with SWAP) */
  const int tiles_n = SWAP ? a.N / kBN : cols / kBN, tiles = tiles_n * (SWAP ? cols / kBM : a.N / kBM);
  const int tile = (int)blockIdx.x % tiles, split = (int)blockIdx.x / tiles;
  const int n0 = (tile % tiles_n) * kBN, m0 = (tile / tiles_n) * kBM;
  const int per = (a.M + a.splits - 1) / a.splits, k_begin = split * per, k_end = min(a.M, k_begin + per);
  const int KB = k_end > k_begin ? (k_end - k_begin + kBK - 1) / kBK : 0;
  auto sa = [&](int s) { return base + (uint32_t)(s * kDwStage); };
  auto sb = [&](int s) { return base + (uint32_t)(s * kDwStage + kDwAStage); };
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      fh_mbar_init(full0 + 8 * s, 128 + 1);
      fh_mbar_init(empty0 + 8 * s, 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (wg == 0) {
    /* producer. The samples' bars come from a table in shared memory, refilled every kDwBars samples by the 128
     * producer threads at once (one round trip to L2 instead of one a slice; named barrier 1). The gathered operand:
     * 16-byte chunk c of each sample's window run (SWAP: 128 columns, 16 chunks, c = t % 16, samples t / 16 + 8 i;
     * else 256 columns, 32 chunks, c = t % 32, samples t / 32 + 4 i), chunk c into atom c / 8 at line = sample */
    constexpr int kChunks = SWAP ? 16 : 32, kPer = kBK * kChunks / 128;
    const int c = t % kChunks, wcol0 = SWAP ? m0 : n0;
    const uint32_t gathered = SWAP ? 0u : (uint32_t)kDwAStage; /* the gathered operand's offset in a stage */
    for (int kb = 0; kb < KB; ++kb) {
      const int s = kb % kStages, k0 = k_begin + kb * kBK, rel = kb * kBK % kDwBars;
      if (rel == 0) {
        asm volatile("bar.sync 1, 128;\n" ::: "memory");
        for (int i = t; i < kDwBars; i += 128) sbar[i] = k0 + i < k_end ? a.bar[k0 + i] : 0;
        asm volatile("bar.sync 1, 128;\n" ::: "memory");
      }
      if (kb >= kStages) fh_mbar_wait(empty0 + 8 * s, ((kb / kStages) - 1) & 1);
      if (t == 0) {
        const uint32_t st = sa(s) + (SWAP ? (uint32_t)kDwAStage : 0u); /* the TMA operand: B with SWAP, else A */
        fh_mbar_arrive_tx(full0 + 8 * s, (uint32_t)(SWAP ? kDwBStage : kDwAStage));
#pragma unroll
        for (int q = 0; q < (SWAP ? 4 : 2); ++q)
          fh_tma_load_2d(st + (uint32_t)q * 8192u, &hmap, (SWAP ? n0 : m0) + 64 * q, k0, full0 + 8 * s);
      }
#pragma unroll 4
      for (int i = 0; i < kPer; ++i) {
        const int r = t / kChunks + (128 / kChunks) * i, k = k0 + r;
        const bool in = k < k_end;
        const void* src =
            in ? (const void*)(fh_l1g_window(a.feat, sbar[rel + r], a.F, a.window, a.n_bars) + wcol0 + c * 8)
               : (const void*)a.feat;
        fh_cp16(sa(s) + gathered + (uint32_t)((c >> 3) * 8192) + fh_swz(r, c & 7), src, in ? 16 : 0);
      }
      fh_cp_async_arrive(full0 + 8 * s);
    }
  } else {
    const int cw = wg - 1, lane = threadIdx.x & 31;
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.0f;
    for (int kb = 0; kb < KB; ++kb) {
      const int s = kb % kStages;
      fh_mbar_wait(full0 + 8 * s, (kb / kStages) & 1);
      fh_fence_proxy_async();
      fh_wgmma_fence();
#pragma unroll
      for (int k = 0; k < kBK / 16; ++k)
        fh_wgmma_m64n256k16<1, 1>(d, fh_desc_mn128(sa(s) + (uint32_t)(cw * 8192 + k * 2048), 8192u),
                                  fh_desc_mn128(sb(s) + (uint32_t)(k * 2048), 8192u));
      fh_wgmma_commit();
      fh_wgmma_wait<1>();
      if (kb > 0 && lane == 0) fh_mbar_arrive(empty0 + 8 * (uint32_t)((kb - 1) % kStages));
    }
    fh_wgmma_wait<0>();
    /* the partial tile: warp w of the warpgroup rows 16w + lane/4 (+8), n8 group j columns 8j + 2 (lane % 4), into
     * part[split][hidden unit][window column] */
    const int w = (threadIdx.x >> 5) & 3, r = m0 + cw * 64 + w * 16 + (lane >> 2), cq = n0 + 2 * (lane & 3);
    float* P = a.part + (int64_t)split * a.N * cols;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      if (SWAP) { /* r: a window column, cq + 8j: a hidden unit */
        P[(int64_t)(cq + 8 * j) * cols + r] = d[4 * j];
        P[(int64_t)(cq + 8 * j + 1) * cols + r] = d[4 * j + 1];
        P[(int64_t)(cq + 8 * j) * cols + r + 8] = d[4 * j + 2];
        P[(int64_t)(cq + 8 * j + 1) * cols + r + 8] = d[4 * j + 3];
      } else {
        *reinterpret_cast<float2*>(P + (int64_t)r * cols + cq + 8 * j) = make_float2(d[4 * j], d[4 * j + 1]);
        *reinterpret_cast<float2*>(P + (int64_t)(r + 8) * cols + cq + 8 * j) = make_float2(d[4 * j + 2], d[4 * j + 3]);
      }
    }
  }
}

/* dW (N rows of `cols`, ld ldw) = the splits' partials summed in split order; 4 columns a thread */
static __global__ void fh_l1g_dw_reduce(const float* __restrict__ part, int splits, int N, int cols, float* __restrict__ dW,
                                 int64_t ldw) {
  const int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, n_q = (int64_t)N * cols / 4;
  if (q >= n_q) return;
  const int64_t row = q / (cols / 4), col = (q % (cols / 4)) * 4;
  float4 acc = reinterpret_cast<const float4*>(part)[q];
  for (int s = 1; s < splits; ++s) {
    const float4 v = reinterpret_cast<const float4*>(part + (int64_t)s * N * cols)[q];
    acc.x += v.x;
    acc.y += v.y;
    acc.z += v.z;
    acc.w += v.w;
  }
  float* o = dW + row * ldw + col;
  o[0] = acc.x;
  o[1] = acc.y;
  o[2] = acc.z;
  o[3] = acc.w;
}

#endif /* FH_L1_GATHER_DEVICE_CUH */
