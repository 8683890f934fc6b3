/*
 * gather_gemm_probe.cu — is a first-layer GEMM that gathers its own rows worth building? (issue 5's largest lever)
 *
 * The train step's first layer reads each sample's market window from a block that the replay gather materialised
 * (kernels/collect.cu replay_gather_pair: ~38 MB written a step, then read back by the GEMMs). A GEMM that loaded
 * the window straight from the bf16 feature matrix would skip those bytes. This probe measures, at the reference
 * shapes (B 16384 rows, K 1088 = the account block of 64 + 64 bars x 16 features, N 512, bias + ReLU, bf16 out):
 *
 *   gather          a block of 1152 bf16 a sample, as the paired gather writes it (account, 67 bars, account')
 *   cuBLASLt        the s run on that block through the library's wrapper (autotuned), as the step runs it
 *   wgmma kernels, each reading either the materialised block (a plain row-major A, ld 1152) or each row's window
 *   from the feature matrix by its bar (the implicit gather):
 *     simple        gg_kernel: every thread copies and computes, a block barrier a K slice
 *     specialised   gw_kernel: a producer warpgroup (cp.async rows, TMA W slices) and two consumer warpgroups
 *                   joined by full/empty mbarriers, one tile a block
 *     persistent    gw_kernel walking the tiles with at most one block an SM
 *     cluster 2     gw_kernel persistent in clusters of two CTAs that share each W slice by TMA multicast
 *
 * Every kernel: Hopper warpgroup MMA (wgmma.mma_async m64n256k16, bf16 in, fp32 accumulate), block tile 128 x 256,
 * two consumer warpgroups of 64 rows, K slices of 64 (one 128-byte swizzled row a tile row), a 4-stage ring
 * (cp.async 16-byte copies zero-filled outside the data), both operands K-major in shared memory with the 128-byte
 * swizzle the descriptors name. Epilogue from the accumulators: bias, ReLU, bf16x2 stores.
 *
 * Checks: every wgmma variant against cuBLASLt within 2 bf16 ulps (+1e-3), and bit for bit against the simple
 * kernel on the block (the cluster run: against the cluster kernel on the block): the same sums in the same order.
 * The epilogue can also write the ReLU bit mask the backward reads (cuBLASLt's RELU_AUX layout); its bits are
 * checked against cuBLASLt's mask and against the outputs' signs. Timing: best of 3 rounds of 50 launches (L2 warm, as in
 * back-to-back graph replays), and the median of 20 launches each after a 256 MB scrub of the L2 (cold: the step's
 * backward streams far more than the L2 between two first layers). A GPU host tool: bench/gpu/gather_gemm.sh.
 *
 * `dw` measures the weight gradient of the same layer's market columns instead (dw_kernel, dw_section).
 *
 *   gather_gemm_probe [B] [cluster|dw]   (cluster: the cluster variants only, against the same baselines)
 */
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "../../native/src/cuda/gemm_cublaslt.h"
#include "probe_check.cuh"

#define CK(x) FH_PROBE_CK(x, 1)

namespace {

constexpr int kBM = 128, kBN = 256, kBK = 64, kStages = 4, kThreads = 256;
constexpr int kAStage = kBM * kBK * 2, kBStage = kBN * kBK * 2, kStage = kAStage + kBStage;
constexpr int kSmem = kStages * kStage + 1024; /* + the slack to align the ring to 1024 bytes (the swizzle atom) */
constexpr int kWindow = 64, kF = 16, kMkt = 64, kK = kMkt + kWindow * kF, kP = 1152, kNStep = 3;

struct gg_args {
  const __nv_bfloat16* feat; /* (n_bars, 16) bf16 feature matrix */
  const int32_t* bar;        /* implicit gather: each row's bar t (window t-63 .. t); nullptr: read blk */
  const __nv_bfloat16* acc;  /* implicit gather: (M, 8) account features */
  const __nv_bfloat16* blk;  /* materialised rows, ld kP: account at 0, market at kMkt */
  const __nv_bfloat16* W;    /* (N, kK) */
  const __nv_bfloat16* bias; /* (N) */
  __nv_bfloat16* Y;          /* (M, N) */
  uint32_t* mask;            /* optional: the ReLU bit mask, cuBLASLt's RELU_AUX layout (bit c of row r at r * mask_ld + c) */
  int64_t mask_ld;           /* bits a row, a multiple of 128 >= N */
  int M, N;
};

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
/* 16 bytes global -> shared, the bytes past src_bytes (0 or 16) zero */
__device__ __forceinline__ void cp16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
/* a K-major operand tile in shared memory: rows of 128 bytes, 8-row atoms of 1024 bytes, the 128-byte swizzle */
__device__ __forceinline__ uint64_t desc_k128(uint32_t addr) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
/* byte offset of 16-byte chunk c of tile row r */
__device__ __forceinline__ uint32_t swz(int r, int c) { return (uint32_t)(r * 128 + ((c ^ (r & 7)) << 4)); }

__device__ __forceinline__ void gg_wgmma_m64n256k16(float (&d)[128], uint64_t da, uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      " %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      " %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      " %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      " %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "%128, %129, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(da), "l"(db), "r"(1));
}

/* One warpgroup's 64 x 256 accumulator tile (rows m0.., columns n0..) + bias, ReLU, as bf16 into a.Y. The layout
 * (m64nNk16, f32): warp w of the warpgroup has rows 16w..16w+15; per n8 group j, lane l holds (row l/4, columns
 * 8j + 2(l%4) + {0,1}) in d[4j], d[4j+1] and row l/4 + 8 in d[4j+2], d[4j+3]. */
__device__ __forceinline__ void gg_store(const gg_args& a, const float (&d)[128], int m0, int n0) {
  const int lane = threadIdx.x & 31, w = (threadIdx.x >> 5) & 3;
  const int r0 = m0 + w * 16 + (lane >> 2);
  uint32_t word[2] = {0u, 0u}; /* a.mask: the bits of 32 columns of rows r0 and r0 + 8, built four groups at a time */
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
        *reinterpret_cast<__nv_bfloat162*>(a.Y + (int64_t)row * a.N + col) =
            __floats2bfloat162_rn(fmaxf(y0, 0.0f), fmaxf(y1, 0.0f));
      if (a.mask) {
        /* the 8 bits of group j of this row: 2 from each lane of the quad */
        uint32_t bits = in ? ((y0 > 0.0f ? 1u : 0u) | (y1 > 0.0f ? 2u : 0u)) << (2 * (lane & 3)) : 0u;
        bits |= __shfl_xor_sync(0xffffffffu, bits, 1);
        bits |= __shfl_xor_sync(0xffffffffu, bits, 2);
        word[h] |= bits << (8 * (j & 3));
        if ((j & 3) == 3) {
          if ((lane & 3) == 0 && row < a.M)
            a.mask[((int64_t)row * a.mask_ld + n0) / 32 + j / 4] = word[h];
          word[h] = 0u;
        }
      }
    }
  }
}

/* The A operand's rows, 16-byte column c (of a K slice's 8): gg_row_base is row `row`'s base, so that its slice kb
 * starts at base + kb * kBK (nullptr past the last row); gg_a_src is the column's source in slice kb and its byte
 * count (the implicit gather's slice 0 is the account block: column 0 the 8 account features, the rest zeros) */
__device__ __forceinline__ const __nv_bfloat16* gg_row_base(const gg_args& a, int row, int c) {
  if (row >= a.M) return nullptr;
  return a.bar ? a.feat + ((int64_t)a.bar[row] - (kWindow - 1)) * kF - kBK + c * 8 : a.blk + (int64_t)row * kP + c * 8;
}
__device__ __forceinline__ const void* gg_a_src(const gg_args& a, const __nv_bfloat16* base, int row, int kb, int c,
                                                int* bytes) {
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

/* K slice kb of the block's A rows (kBM x 64) and W rows (kBN x 64) into stage buffers sa, sb */
__device__ __forceinline__ void gg_load(const gg_args& a, int m0, int n0, int kb, uint32_t sa, uint32_t sb) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < kBM * 8 / kThreads; ++i) {
    const int q = tid + kThreads * i, r = q >> 3, c = q & 7, row = m0 + r;
    int bytes = 0;
    const void* src = gg_a_src(a, gg_row_base(a, row, c), row, kb, c, &bytes);
    cp16(sa + swz(r, c), src, bytes);
  }
#pragma unroll
  for (int i = 0; i < kBN * 8 / kThreads; ++i) {
    const int q = tid + kThreads * i, r = q >> 3, c = q & 7, n = n0 + r;
    cp16(sb + swz(r, c), n < a.N ? a.W + (int64_t)n * kK + kb * kBK + c * 8 : a.W, n < a.N ? 16 : 0);
  }
}

__global__ void __launch_bounds__(kThreads, 1) gg_kernel(gg_args a) {
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  const int n0 = blockIdx.x * kBN, m0 = blockIdx.y * kBM, wg = threadIdx.x >> 7;
  constexpr int KB = kK / kBK;
  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.0f;
  auto sa = [&](int s) { return base + (uint32_t)(s * kStage); };
  auto sb = [&](int s) { return base + (uint32_t)(s * kStage + kAStage); };
  /* prologue: slices 0 .. kStages-3 (the ring keeps one slice in the MMA queue and one being read) */
#pragma unroll
  for (int s = 0; s < kStages - 2; ++s) {
    gg_load(a, m0, n0, s, sa(s), sb(s));
    asm volatile("cp.async.commit_group;\n" ::);
  }
  for (int kb = 0; kb < KB; ++kb) {
    /* slice kb has landed (this thread's copies), made visible to the async proxy, then to every thread; after
     * the barrier every warpgroup has also retired slice kb-2's MMAs (wait_group 1 below), so its stage is free */
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 3));
    asm volatile("fence.proxy.async.shared::cta;\n" ::);
    __syncthreads();
    const int nxt = kb + kStages - 2;
    if (nxt < KB) gg_load(a, m0, n0, nxt, sa(nxt % kStages), sb(nxt % kStages));
    asm volatile("cp.async.commit_group;\n" ::);
    const int s = kb % kStages;
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int k = 0; k < kBK / 16; ++k)
      gg_wgmma_m64n256k16(d, desc_k128(sa(s) + (uint32_t)(wg * 64 * 128 + k * 32)), desc_k128(sb(s) + (uint32_t)(k * 32)));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  gg_store(a, d, m0 + wg * 64, n0);
}

/* ---- gw_kernel: the same tile, warp-specialised. Warpgroup 0 produces: its 128 threads copy the A slice with
 * cp.async (each thread one 16-byte column of 8 rows, the rows' addresses computed once) and signal the stage's
 * `full` barrier when their copies land (cp.async.mbarrier.arrive.noinc); its thread 0 loads the W slice by TMA
 * (128-byte swizzle, the layout the descriptors name) onto the same barrier. Warpgroups 1 and 2 consume: wait for
 * `full`, MMA, and once a slice's MMAs have retired (wgmma.wait_group 1) release its stage on `empty` (lane 0 of each warp). */
constexpr int kWThreads = 384;

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred P1;\nLAB_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
      "@P1 bra DONE;\nbra LAB_WAIT;\nDONE:\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_arrive(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int c0, int c1, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          dst),
      "l"(map), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
/* the address of this CTA's shared variable `addr` in the shared memory of cluster CTA `rank` */
__device__ __forceinline__ uint32_t mapa(uint32_t addr, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t cluster_addr) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_addr) : "memory");
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
__device__ __forceinline__ void tma_load_2d_mc(uint32_t dst, const CUtensorMap* map, int c0, int c1, uint32_t bar,
                                               uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, "
      "%3}], [%4], %5;\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
      : "memory");
}

/* PERSIST: a grid of at most one block per SM walks the work units (n fastest), the ring's slices counted across
 * them, so that the producer loads the next unit while the consumers store the last one; else one unit a block.
 * CL = 2 (PERSIST only): clusters of two CTAs take m-tiles 2u and 2u+1 of the same W tile, and each CTA loads half
 * of every W slice by TMA multicast into both (halving the W slices' L2 traffic); a stage is free again once the
 * consumers of both CTAs released it (empty counts 8 warps of each). */
template <bool PERSIST, int CL>
__global__ void __launch_bounds__(kWThreads, 1) gw_kernel(const __grid_constant__ CUtensorMap wmap, gg_args a) {
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  __shared__ __align__(8) uint64_t bars[2 * kStages];
  const uint32_t full0 = smem_addr(&bars[0]), empty0 = smem_addr(&bars[kStages]);
  const int wg = threadIdx.x >> 7, t = threadIdx.x & 127;
  const uint32_t rank = CL > 1 ? cluster_rank() : 0u;
  const int tiles_n = (a.N + kBN - 1) / kBN, tiles_m = (a.M + kBM - 1) / kBM;
  const int units = tiles_n * ((tiles_m + CL - 1) / CL);
  const int first = PERSIST ? (int)blockIdx.x / CL : (int)(blockIdx.y * gridDim.x + blockIdx.x);
  const int stride = PERSIST ? (int)gridDim.x / CL : units;
  constexpr int KB = kK / kBK;
  auto sa = [&](int s) { return base + (uint32_t)(s * kStage); };
  auto sb = [&](int s) { return base + (uint32_t)(s * kStage + kAStage); };
  auto tile_n0 = [&](int u) { return (u % tiles_n) * kBN; };
  auto tile_m0 = [&](int u) { return ((u / tiles_n) * CL + (int)rank) * kBM; };
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full0 + 8 * s, 128 + 1);
      mbar_init(empty0 + 8 * s, 8 * CL); /* lane 0 of each consumer warp of each CTA */
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  if (CL > 1)
    cluster_sync();
  else
    __syncthreads();
  if (wg == 0) {
    /* producer: thread t copies 16-byte column c = t % 8 of rows t/8 + 16 i */
    const int c = t & 7;
    int g = 0; /* slices through the ring so far */
    for (int u = first; u < units; u += stride) {
      const int n0 = tile_n0(u), m0 = tile_m0(u);
      const __nv_bfloat16* rowp[kBM / 16]; /* the rows' bases, computed once a tile */
#pragma unroll
      for (int i = 0; i < kBM / 16; ++i) rowp[i] = gg_row_base(a, m0 + (t >> 3) + 16 * i, c);
      for (int kb = 0; kb < KB; ++kb, ++g) {
        const int s = g % kStages;
        if (g >= kStages) mbar_wait(empty0 + 8 * s, ((g / kStages) - 1) & 1);
        if (t == 0) {
          mbar_arrive_tx(full0 + 8 * s, (uint32_t)kBStage);
          if (CL > 1)
            tma_load_2d_mc(sb(s) + rank * (uint32_t)(kBStage / CL), &wmap, kb * kBK, n0 + (int)rank * (kBN / CL),
                           full0 + 8 * s, (uint16_t)((1u << CL) - 1u));
          else
            tma_load_2d(sb(s), &wmap, kb * kBK, n0, full0 + 8 * s);
        }
#pragma unroll
        for (int i = 0; i < kBM / 16; ++i) {
          const int r = (t >> 3) + 16 * i;
          int nb = 0;
          const void* src = gg_a_src(a, rowp[i], m0 + r, kb, c, &nb);
          cp16(sa(s) + swz(r, c), src, nb);
        }
        cp_async_arrive(full0 + 8 * s);
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
        for (int q = 0; q < CL; ++q) mbar_arrive_cluster(mapa(e, (uint32_t)q));
      } else {
        mbar_arrive(e);
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
        mbar_wait(full0 + 8 * s, (g / kStages) & 1);
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int k = 0; k < kBK / 16; ++k)
          gg_wgmma_m64n256k16(d, desc_k128(sa(s) + (uint32_t)(cw * 64 * 128 + k * 32)),
                              desc_k128(sb(s) + (uint32_t)(k * 32)));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        if (kb > 0) release(g - 1);
      }
      asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
      release(g - 1); /* the unit's last slice */
      gg_store(a, d, m0 + cw * 64, n0);
    }
  }
  /* no CTA leaves while its peer may still multicast into it or arrive on its barriers */
  if (CL > 1) cluster_sync();
}

/* ---- dw_kernel: the first layer's market weight gradient, gathering its rows: dW (N x kWindow kF, fp32) =
 * dH^T Xm, K = the batch's samples, Xm's row j the market window of bar[j] read from the feature matrix. Both
 * operands are MN-major in shared memory: a K slice of 64 samples is 64 lines of 128 bytes per 64-column atom (the
 * line = the sample, the 128-byte swizzle on the line index), A's atoms (64 rows of dH each) by TMA from dH (B, N)
 * row-major, B's four atoms of 64 window columns by cp.async from each sample's window. wgmma with both transpose
 * bits; descriptors: LBO the stride between 64-column atoms (8 KB), SBO between 8-sample groups (1024 bytes). A
 * block owns one 128 x 256 tile and one of `splits` equal runs of the samples, warp-specialised like gw_kernel (a
 * producer warpgroup, two consumers of 64 rows); it stores its fp32 partial tile, and dw_reduce sums the splits'
 * partials in split order (the same bits every run). */
constexpr int kDwCols = kWindow * kF; /* 1024 market columns */
constexpr int kDwAStage = 2 * 64 * 128, kDwBStage = 4 * 64 * 128, kDwStage = kDwAStage + kDwBStage;
constexpr int kDwSmem = kStages * kDwStage + 1024;

struct dw_args {
  const __nv_bfloat16* feat; /* (n_bars, 16) */
  const int32_t* bar;        /* (M) each sample's bar */
  float* part;               /* (splits, N, kDwCols) fp32 partials */
  int M, N, splits;
};

/* an MN-major operand (128-byte swizzle): atoms of 64 MN columns x 8-sample groups */
__device__ __forceinline__ uint64_t desc_mn128(uint32_t addr) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(8192 >> 4) << 16) | ((uint64_t)(1024 >> 4) << 32) |
         (1ull << 62);
}

__device__ __forceinline__ void dw_wgmma_m64n256k16_tt(float (&d)[128], uint64_t da, uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      " %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      " %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      " %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      " %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      " %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      " %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "%128, %129, p, 1, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(da), "l"(db), "r"(1));
}

__global__ void __launch_bounds__(kWThreads, 1) dw_kernel(const __grid_constant__ CUtensorMap hmap, dw_args a) {
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;
  __shared__ __align__(8) uint64_t bars[2 * kStages];
  const uint32_t full0 = smem_addr(&bars[0]), empty0 = smem_addr(&bars[kStages]);
  const int wg = threadIdx.x >> 7, t = threadIdx.x & 127;
  const int tiles_n = kDwCols / kBN, tile = (int)blockIdx.x % (tiles_n * (a.N / kBM)), split = (int)blockIdx.x / (tiles_n * (a.N / kBM));
  const int n0 = (tile % tiles_n) * kBN, m0 = (tile / tiles_n) * kBM;
  const int per = (a.M + a.splits - 1) / a.splits, k_begin = split * per, k_end = min(a.M, k_begin + per);
  const int KB = (k_end - k_begin + kBK - 1) / kBK;
  auto sa = [&](int s) { return base + (uint32_t)(s * kDwStage); };
  auto sb = [&](int s) { return base + (uint32_t)(s * kDwStage + kDwAStage); };
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full0 + 8 * s, 128 + 1);
      mbar_init(empty0 + 8 * s, 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (wg == 0) {
    /* producer: thread t copies 16-byte chunk c = t % 32 (atom c / 8, chunk c % 8) of samples t / 32 + 4 i */
    const int c = t & 31;
    for (int kb = 0; kb < KB; ++kb) {
      const int s = kb % kStages, k0 = k_begin + kb * kBK;
      if (kb >= kStages) mbar_wait(empty0 + 8 * s, ((kb / kStages) - 1) & 1);
      if (t == 0) {
        mbar_arrive_tx(full0 + 8 * s, (uint32_t)kDwAStage);
        tma_load_2d(sa(s), &hmap, m0, k0, full0 + 8 * s);
        tma_load_2d(sa(s) + 8192u, &hmap, m0 + 64, k0, full0 + 8 * s);
      }
#pragma unroll 4
      for (int i = 0; i < 16; ++i) {
        const int r = (t >> 5) + 4 * i, k = k0 + r;
        const bool in = k < k_end;
        const void* src = in ? (const void*)(a.feat + ((int64_t)a.bar[k] - (kWindow - 1)) * kF + n0 + c * 8)
                             : (const void*)a.feat;
        cp16(sb(s) + (uint32_t)((c >> 3) * 8192) + swz(r, c & 7), src, in ? 16 : 0);
      }
      cp_async_arrive(full0 + 8 * s);
    }
  } else {
    const int cw = wg - 1, lane = threadIdx.x & 31;
    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.0f;
    for (int kb = 0; kb < KB; ++kb) {
      const int s = kb % kStages;
      mbar_wait(full0 + 8 * s, (kb / kStages) & 1);
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
      asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
      for (int k = 0; k < kBK / 16; ++k)
        dw_wgmma_m64n256k16_tt(d, desc_mn128(sa(s) + (uint32_t)(cw * 8192 + k * 2048)),
                               desc_mn128(sb(s) + (uint32_t)(k * 2048)));
      asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
      asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
      if (kb > 0 && lane == 0) mbar_arrive(empty0 + 8 * (uint32_t)((kb - 1) % kStages));
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    /* the partial tile: warp w of the warpgroup rows 16w + lane/4 (+8), n8 group j columns 8j + 2 (lane % 4) */
    const int w = (threadIdx.x >> 5) & 3;
    float* P = a.part + ((int64_t)split * a.N + m0 + cw * 64 + w * 16 + (lane >> 2)) * kDwCols + n0 + 2 * (lane & 3);
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      *reinterpret_cast<float2*>(P + 8 * j) = make_float2(d[4 * j], d[4 * j + 1]);
      *reinterpret_cast<float2*>(P + 8 * kDwCols + 8 * j) = make_float2(d[4 * j + 2], d[4 * j + 3]);
    }
  }
}

/* dW (N rows, ld ldw) = the sum of the splits' partials, in split order; 4 columns a thread */
__global__ void dw_reduce(const float* part, int splits, int N, float* dW, int ldw) {
  const int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, n_q = (int64_t)N * kDwCols / 4;
  if (q >= n_q) return;
  const int64_t row = q / (kDwCols / 4), col = (q % (kDwCols / 4)) * 4;
  float4 acc = reinterpret_cast<const float4*>(part)[q];
  for (int s = 1; s < splits; ++s) {
    const float4 v = reinterpret_cast<const float4*>(part + (int64_t)s * N * kDwCols)[q];
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

/* dH (M, N) bf16 row-major as a 2-D tensor map: boxes of 64 columns x 64 rows, the 128-byte swizzle */
bool make_hmap(CUtensorMap* map, const void* dH, int M, int N) {
  const cuuint64_t dims[2] = {(cuuint64_t)N, (cuuint64_t)M};
  const cuuint64_t strides[1] = {(cuuint64_t)N * 2};
  const cuuint32_t box[2] = {64, (cuuint32_t)kBK}, estr[2] = {1, 1};
  const CUresult r = cuTensorMapEncodeTiled(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(dH), dims,
                                            strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) fprintf(stderr, "cuTensorMapEncodeTiled (dH) failed: %d\n", (int)r);
  return r == CUDA_SUCCESS;
}

fh_status launch_dw(const CUtensorMap& hmap, const dw_args& a, float* dW, int ldw, cudaStream_t s) {
  const int tiles = (kDwCols / kBN) * (a.N / kBM);
  dw_kernel<<<tiles * a.splits, kWThreads, kDwSmem, s>>>(hmap, a);
  const int64_t n_q = (int64_t)a.N * kDwCols / 4;
  dw_reduce<<<(unsigned)((n_q + 255) / 256), 256, 0, s>>>(a.part, a.splits, a.N, dW, ldw);
  return cudaGetLastError() == cudaSuccess ? FH_OK : FH_ERR_DEVICE;
}

/* W (N, kK) bf16 row-major as a 2-D tensor map: boxes of 64 columns x box_rows rows, the 128-byte swizzle */
bool make_wmap(CUtensorMap* map, const void* W, int N, int box_rows) {
  const cuuint64_t dims[2] = {(cuuint64_t)kK, (cuuint64_t)N};
  const cuuint64_t strides[1] = {(cuuint64_t)kK * 2};
  const cuuint32_t box[2] = {(cuuint32_t)kBK, (cuuint32_t)box_rows}, estr[2] = {1, 1};
  const CUresult r = cuTensorMapEncodeTiled(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(W), dims,
                                            strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) fprintf(stderr, "cuTensorMapEncodeTiled failed: %d\n", (int)r);
  return r == CUDA_SUCCESS;
}

fh_status launch_gw(const CUtensorMap& map, const gg_args& a, int persist_blocks, int cl, cudaStream_t s) {
  const int tn = (a.N + kBN - 1) / kBN, tm = (a.M + kBM - 1) / kBM;
  if (cl == 2) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 2;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.blockDim = dim3(kWThreads);
    cfg.dynamicSmemBytes = kSmem;
    cfg.stream = s;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    /* only as many clusters as can be resident at once (a GPC with an odd count of free SMs leaves one out): a
     * persistent cluster that waits for another to finish all of its units doubles the tail */
    static int resident = 0;
    if (resident == 0) {
      cfg.gridDim = dim3((unsigned)persist_blocks);
      if (cudaOccupancyMaxActiveClusters(&resident, gw_kernel<true, 2>, &cfg) != cudaSuccess || resident <= 0)
        resident = persist_blocks / 2;
      printf("cluster variant: %d clusters of 2 resident at once\n", resident);
    }
    const int units = tn * ((tm + 1) / 2);
    cfg.gridDim = dim3((unsigned)(2 * std::min(resident, units)));
    if (cudaLaunchKernelEx(&cfg, gw_kernel<true, 2>, map, a) != cudaSuccess) return FH_ERR_DEVICE;
  } else if (persist_blocks > 0) {
    gw_kernel<true, 1><<<std::min(persist_blocks, tn * tm), kWThreads, kSmem, s>>>(map, a);
  } else {
    gw_kernel<false, 1><<<dim3((unsigned)tn, (unsigned)tm), kWThreads, kSmem, s>>>(map, a);
  }
  return cudaGetLastError() == cudaSuccess ? FH_OK : FH_ERR_DEVICE;
}

/* the paired gather's block of one sample per warp: account, zeros to kMkt, bars t-63 .. t+3, account', zeros */
__global__ void gather_kernel(const __nv_bfloat16* feat, const int32_t* bar, const __nv_bfloat16* acc, int M,
                              __nv_bfloat16* blk) {
  const int j = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
  if (j >= M) return;
  const uint4* src = reinterpret_cast<const uint4*>(feat + ((int64_t)bar[j] - (kWindow - 1)) * kF);
  uint4* dst = reinterpret_cast<uint4*>(blk + (int64_t)j * kP);
  const int m0 = kMkt / 8, m1 = m0 + (kWindow + kNStep) * kF / 8;
  uint4 x[5];
#pragma unroll
  for (int q = 0; q < 5; ++q) {
    const int u = lane + 32 * q;
    x[q] = make_uint4(0u, 0u, 0u, 0u);
    if (u >= m0 && u < m1) x[q] = __ldg(src + (u - m0));
    else if (u == 0 || u == m1) x[q] = *reinterpret_cast<const uint4*>(acc + (int64_t)j * 8);
  }
#pragma unroll
  for (int q = 0; q < 5; ++q) {
    const int u = lane + 32 * q;
    if (u < kP / 8) dst[u] = x[q];
  }
}

fh_status launch_gg(const gg_args& a, cudaStream_t s) {
  const dim3 grid((unsigned)((a.N + kBN - 1) / kBN), (unsigned)((a.M + kBM - 1) / kBM));
  gg_kernel<<<grid, kThreads, kSmem, s>>>(a);
  return cudaGetLastError() == cudaSuccess ? FH_OK : FH_ERR_DEVICE;
}

struct timing {
  double warm, cold;
};
/* warm: best of 3 rounds of 50 back-to-back launches; cold: median of 20 launches each after an L2 scrub */
timing timed(cudaStream_t s, const std::function<fh_status()>& fn, void* scrub, size_t scrub_bytes, bool* ok) {
  timing t{0.0, 0.0};
  for (int i = 0; i < 5; ++i)
    if (fn() != FH_OK) {
      *ok = false;
      return t;
    }
  const double best = fh_probe_best_us(s, fn, 50);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<double> cold;
  for (int i = 0; i < 20; ++i) {
    cudaMemsetAsync(scrub, i & 0xff, scrub_bytes, s);
    cudaEventRecord(e0, s);
    fn();
    cudaEventRecord(e1, s);
    cudaEventSynchronize(e1);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, e0, e1);
    cold.push_back(ms * 1e3);
  }
  std::sort(cold.begin(), cold.end());
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  *ok = cudaGetLastError() == cudaSuccess;
  t.warm = best;
  t.cold = cold[cold.size() / 2];
  return t;
}

/* The dW section (`dw`): the first layer's market weight gradient as the step computes it (cuBLASLt on the
 * materialised block's market columns, on the whole GPU and on 100 SMs) against dw_kernel + dw_reduce gathering its
 * rows; checked against cuBLASLt (the fp32 sums run in another order) and against itself (the same bits twice). */
int dw_section(fh_gemm* g, void* ws, cudaStream_t s, int sms, const __nv_bfloat16* F, const __nv_bfloat16* A,
               const int32_t* bar, void* blk, int M, int N, void* scrub, size_t scrub_bytes,
               const std::function<fh_status()>& gather) {
  (void)A;
  constexpr int ldw = kDwCols + 8; /* the canonical W1 row: the market columns, then the 8 account columns */
  void* dH = fh_probe_bf16_buffer((size_t)M * N, 1.0f, 4);
  float *dW0 = nullptr, *dW1 = nullptr, *dW2 = nullptr, *part = nullptr;
  constexpr int kMaxSplits = 8;
  FH_PROBE_CK(cudaMalloc(&dW0, (size_t)N * ldw * 4), 1);
  FH_PROBE_CK(cudaMalloc(&dW1, (size_t)N * ldw * 4), 1);
  FH_PROBE_CK(cudaMalloc(&dW2, (size_t)N * ldw * 4), 1);
  FH_PROBE_CK(cudaMalloc(&part, (size_t)kMaxSplits * N * kDwCols * 4), 1);
  if (!dH) return 1;
  FH_PROBE_CK(cudaFuncSetAttribute(dw_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kDwSmem), 1);
  CUtensorMap hmap;
  if (!make_hmap(&hmap, dH, M, N)) return 1;
  const void* xm = static_cast<const __nv_bfloat16*>(blk) + kMkt;
  auto cublas_dw = [=](int sm_target) {
    return [=]() {
      fh_gemm_set_sm_target(g, sm_target);
      const fh_status r = fh_gemm_dw(g, s, ws, FH_BF16, M, N, kDwCols, dH, N, xm, kP, dW0, nullptr, ldw);
      fh_gemm_set_sm_target(g, 0);
      return r;
    };
  };
  auto ours = [=](int splits, float* out) {
    dw_args a{F, bar, part, M, N, splits};
    return [=]() { return launch_dw(hmap, a, out, ldw, s); };
  };
  auto ours_kernel_only = [=](int splits) {
    dw_args a{F, bar, part, M, N, splits};
    return [=]() {
      dw_kernel<<<(kDwCols / kBN) * (N / kBM) * splits, kWThreads, kDwSmem, s>>>(hmap, a);
      return cudaGetLastError() == cudaSuccess ? FH_OK : FH_ERR_DEVICE;
    };
  };
  const size_t n_w = (size_t)N * ldw;
  FH_PROBE_CK(cudaMemsetAsync(dW0, 0, n_w * 4, s), 1);
  FH_PROBE_CK(cudaMemsetAsync(dW1, 0xff, n_w * 4, s), 1); /* NaN: unwritten */
  FH_PROBE_CK(cudaMemsetAsync(dW2, 0xff, n_w * 4, s), 1);
  const fh_status r0 = gather(), r1 = r0 == FH_OK ? cublas_dw(0)() : r0;
  const fh_status r2 = ours(kMaxSplits, dW1)(), r3 = ours(kMaxSplits, dW2)();
  FH_PROBE_CK(cudaStreamSynchronize(s), 1);
  if (r1 != FH_OK || r2 != FH_OK || r3 != FH_OK) {
    fprintf(stderr, "dw: a launch failed: %s / %s\n", fh_gemm_last_error(), cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  std::vector<float> h0(n_w), h1(n_w), h2(n_w);
  FH_PROBE_CK(cudaMemcpy(h0.data(), dW0, n_w * 4, cudaMemcpyDeviceToHost), 1);
  FH_PROBE_CK(cudaMemcpy(h1.data(), dW1, n_w * 4, cudaMemcpyDeviceToHost), 1);
  FH_PROBE_CK(cudaMemcpy(h2.data(), dW2, n_w * 4, cudaMemcpyDeviceToHost), 1);
  double worst = 0.0, rms = 0.0, ref_max = 0.0;
  size_t beyond = 0, differ = 0;
  for (int r = 0; r < N; ++r)
    for (int c = 0; c < kDwCols; ++c) {
      const size_t i = (size_t)r * ldw + c;
      rms += (double)h0[i] * h0[i];
      ref_max = std::max(ref_max, fabs((double)h0[i]));
    }
  rms = sqrt(rms / ((double)N * kDwCols));
  for (int r = 0; r < N; ++r)
    for (int c = 0; c < kDwCols; ++c) {
      const size_t i = (size_t)r * ldw + c;
      const double dd = fabs((double)h1[i] - h0[i]);
      worst = std::max(worst, dd);
      if (!(dd <= 1e-4 * rms + 1e-5 * fabs((double)h0[i]))) ++beyond; /* NaN counts */
      differ += memcmp(&h1[i], &h2[i], 4) != 0;
    }
  printf("check dW gathering (%d splits) against cuBLASLt on the block: rms %.4g, max |ref| %.4g, max |diff| %.3g, "
         "%zu of %zu beyond 1e-4 rms + 1e-5 |ref|; %zu differ between two runs\n",
         kMaxSplits, rms, ref_max, worst, beyond, (size_t)N * kDwCols, differ);
  fflush(stdout);
  int bad = beyond != 0 || differ != 0 || rms == 0.0;
  struct row {
    const char* name;
    std::function<fh_status()> fn;
  };
  const double fl = 2.0 * M * kDwCols * N;
  const int sm100 = std::min(sms, 100);
  std::vector<row> rows = {
      {"gather: the paired block", gather},
      {"cuBLASLt dW on the block, whole GPU", cublas_dw(0)},
      {"cuBLASLt dW on the block, 100 SMs (the step's)", cublas_dw(sm100)},
      {"gather + cuBLASLt dW (100 SMs)", [=]() { fh_status r = gather(); return r != FH_OK ? r : cublas_dw(sm100)(); }},
      {"wgmma dW gathering, 8 splits (128 blocks) + reduce", ours(8, dW1)},
      {"wgmma dW gathering, 8 splits, kernel alone", ours_kernel_only(8)},
      {"wgmma dW gathering, 6 splits (96 blocks) + reduce", ours(6, dW1)},
      {"wgmma dW gathering, 4 splits (64 blocks) + reduce", ours(4, dW1)},
  };
  printf("\n| what | us, L2 warm | TFLOP/s | us, L2 cold | TFLOP/s |\n| --- | ---: | ---: | ---: | ---: |\n");
  for (const row& r : rows) {
    bool ok = true;
    const timing t = timed(s, r.fn, scrub, scrub_bytes, &ok);
    if (!ok) {
      printf("| %s | failed | | | |\n", r.name);
      ++bad;
      continue;
    }
    const bool gemm = strncmp(r.name, "gather:", 7) != 0;
    if (gemm)
      printf("| %s | %.1f | %.0f | %.1f | %.0f |\n", r.name, t.warm, fl / t.warm / 1e6, t.cold, fl / t.cold / 1e6);
    else
      printf("| %s | %.1f | | %.1f | |\n", r.name, t.warm, t.cold);
    fflush(stdout);
  }
  return bad ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int M = argc > 1 ? atoi(argv[1]) : 16384, N = 512;
  const bool cluster_only = argc > 2 && strcmp(argv[2], "cluster") == 0;
  const bool dw_only = argc > 2 && strcmp(argv[2], "dw") == 0;
  if (M <= 0 || M % 8) {
    fprintf(stderr, "gather_gemm_probe: B must be a positive multiple of 8 (got %s)\n", argv[1]);
    return 2;
  }
  const int64_t n_bars = 556416; /* the reference's train range: 80% of 504 x 1380 bars */
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  fh_gemm* g = nullptr;
  if (fh_gemm_create(&g) != FH_OK) {
    fprintf(stderr, "gather_gemm_probe: fh_gemm_create: %s\n", fh_gemm_last_error());
    return 1;
  }
  void* ws = nullptr;
  CK(cudaMalloc(&ws, fh_gemm_workspace_bytes()));
  void* feat = fh_probe_bf16_buffer((size_t)n_bars * kF, 1.0f, 1);
  void* acc = fh_probe_bf16_buffer((size_t)M * 8, 1.0f, 2);
  /* W in the s run's arrangement: account columns 0..7, zeros to kMkt, the market columns after */
  std::vector<__nv_bfloat16> hw((size_t)N * kK);
  unsigned st = 12345u;
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < kK; ++k) {
      st = st * 1664525u + 1013904223u;
      const float v = 0.03f * ((float)(st >> 8) / 8388608.0f - 1.0f);
      hw[(size_t)n * kK + k] = __float2bfloat16(k < 8 || k >= kMkt ? v : 0.0f);
    }
  void* W = nullptr;
  CK(cudaMalloc(&W, hw.size() * 2));
  CK(cudaMemcpy(W, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice));
  void* bias = fh_probe_bf16_buffer((size_t)N, 0.1f, 3);
  std::vector<int32_t> hb((size_t)M);
  for (int j = 0; j < M; ++j) {
    st = st * 1664525u + 1013904223u;
    hb[(size_t)j] = (int32_t)(kWindow - 1 + (int64_t)(st >> 4) % (n_bars - kWindow - kNStep));
  }
  int32_t* bar = nullptr;
  CK(cudaMalloc(&bar, hb.size() * 4));
  CK(cudaMemcpy(bar, hb.data(), hb.size() * 4, cudaMemcpyHostToDevice));
  void *blk = nullptr, *scrub = nullptr;
  const size_t scrub_bytes = (size_t)256 << 20;
  CK(cudaMalloc(&blk, (size_t)M * kP * 2));
  /* outputs: ys[0] cuBLASLt's, ys[1 + q] wgmma variant q's (vname below) */
  constexpr int kVariants = 8;
  void* ys[1 + kVariants] = {};
  for (void*& y : ys) CK(cudaMalloc(&y, (size_t)M * N * 2));
  void* const y0 = ys[0];
  CK(cudaMalloc(&scrub, scrub_bytes));
  if (!feat || !acc || !bias) {
    fprintf(stderr, "gather_gemm_probe: out of device memory\n");
    return 1;
  }
  CK(cudaFuncSetAttribute(gg_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const auto* F = static_cast<const __nv_bfloat16*>(feat);
  const auto* A = static_cast<const __nv_bfloat16*>(acc);
  auto gather = [=]() {
    gather_kernel<<<(M + 7) / 8, 256, 0, s>>>(F, bar, A, M, static_cast<__nv_bfloat16*>(blk));
    return cudaGetLastError() == cudaSuccess ? FH_OK : FH_ERR_DEVICE;
  };
  auto cublas = [=]() {
    return fh_gemm_fwd(g, s, ws, FH_BF16, M, N, kK, blk, kP, W, bias, FH_EPI_RELU_BIAS, y0, FH_BF16, N);
  };
  gg_args ab{};
  ab.feat = F;
  ab.blk = static_cast<const __nv_bfloat16*>(blk);
  ab.W = static_cast<const __nv_bfloat16*>(W);
  ab.bias = static_cast<const __nv_bfloat16*>(bias);
  auto out = [&](int q) { return static_cast<__nv_bfloat16*>(ys[1 + q]); };
  ab.Y = out(0);
  ab.M = M;
  ab.N = N;
  gg_args ai = ab;
  ai.bar = bar;
  ai.acc = A;
  ai.Y = out(1);
  auto gg_blk = [=]() { return launch_gg(ab, s); };
  auto gg_imp = [=]() { return launch_gg(ai, s); };
  CUtensorMap wmap, wmap2;
  if (!make_wmap(&wmap, W, N, kBN) || !make_wmap(&wmap2, W, N, kBN / 2)) return 1;
  CK(cudaFuncSetAttribute(gw_kernel<false, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  CK(cudaFuncSetAttribute(gw_kernel<true, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  CK(cudaFuncSetAttribute(gw_kernel<true, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  gg_args wb = ab, wi = ai;
  wb.Y = out(2);
  wi.Y = out(3);
  const int sms = prop.multiProcessorCount;
  auto gw_blk = [=]() { return launch_gw(wmap, wb, 0, 1, s); };
  auto gw_imp = [=]() { return launch_gw(wmap, wi, 0, 1, s); };
  gg_args pb = wb, pi = wi;
  pb.Y = out(4);
  pi.Y = out(5);
  auto gp_blk = [=]() { return launch_gw(wmap, pb, sms, 1, s); };
  auto gp_imp = [=]() { return launch_gw(wmap, pi, sms, 1, s); };
  /* the ReLU bit mask the backward reads (the step writes it for the s rows): cuBLASLt's against the epilogue's */
  const int64_t mld = 512;
  void *mbits0 = nullptr, *mbits1 = nullptr;
  CK(cudaMalloc(&mbits0, (size_t)M * mld / 8));
  CK(cudaMalloc(&mbits1, (size_t)M * mld / 8));
  auto cublas_mask = [=]() {
    return fh_gemm_fwd(g, s, ws, FH_BF16, M, N, kK, blk, kP, W, bias, FH_EPI_RELU_BIAS, y0, FH_BF16, N,
                       fh_relu_mask{mbits0, mld});
  };
  gg_args pm = pi;
  pm.mask = static_cast<uint32_t*>(mbits1);
  pm.mask_ld = mld;
  auto gp_imp_mask = [=]() { return launch_gw(wmap, pm, sms, 1, s); };
  gg_args cb = wb, ci = wi;
  cb.Y = out(6);
  ci.Y = out(7);
  auto gc_blk = [=]() { return launch_gw(wmap2, cb, sms, 2, s); };
  auto gc_imp = [=]() { return launch_gw(wmap2, ci, sms, 2, s); };
  printf("gather_gemm_probe: %s, B %d, K %d, N %d, %lld bars\n", prop.name, M, kK, N, (long long)n_bars);
  if (dw_only) {
    const int rc = dw_section(g, ws, s, sms, F, A, bar, blk, M, N, scrub, scrub_bytes, gather);
    fh_gemm_destroy(g);
    return rc;
  }
  /* correctness */
  for (int q = 0; q < kVariants; ++q) CK(cudaMemsetAsync(out(q), 0xff, (size_t)M * N * 2, s)); /* NaN: unwritten */
  const fh_status r0 = gather(), r1 = r0 == FH_OK ? cublas() : r0;
  /* the cluster variants alone with "cluster" (a hang there must not cost the other variants' table) */
  const std::function<fh_status()> vfn[kVariants] = {gg_blk, gg_imp, gw_blk, gw_imp, gp_blk, gp_imp, gc_blk, gc_imp};
  auto wanted = [&](int q) { return cluster_only == (q >= 6); };
  bool launched = r0 == FH_OK && r1 == FH_OK;
  for (int q = 0; q < kVariants; ++q)
    if (wanted(q)) launched = launched && vfn[q]() == FH_OK;
  CK(cudaStreamSynchronize(s));
  if (!launched) {
    fprintf(stderr, "gather_gemm_probe: a launch failed: %s / %s\n", fh_gemm_last_error(),
            cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  const size_t n_out = (size_t)M * N;
  std::vector<__nv_bfloat16> h[1 + kVariants];
  for (int q = 0; q <= kVariants; ++q) {
    h[q].resize(n_out);
    CK(cudaMemcpy(h[q].data(), ys[q], n_out * 2, cudaMemcpyDeviceToHost));
  }
  const char* vname[kVariants] = {"simple, block",      "simple, gather",     "specialised, block",
                                  "specialised, gather", "persistent, block", "persistent, gather",
                                  "cluster 2, block",    "cluster 2, gather"};
  int bad = 0;
  size_t pos = 0;
  double ymax = 0.0;
  for (size_t i = 0; i < n_out; ++i) {
    const double ref = __bfloat162float(h[0][i]);
    ymax = std::max(ymax, fabs(ref));
    pos += ref > 0.0;
  }
  printf("cuBLASLt: max |y| %.3g, %.1f%% positive\n", ymax, 100.0 * pos / n_out);
  fflush(stdout);
  for (int q = 1; q <= kVariants; ++q) {
    if (!wanted(q - 1)) continue;
    size_t mism = 0, differ = 0;
    double worst = 0.0;
    for (size_t i = 0; i < n_out; ++i) {
      const double ref = __bfloat162float(h[0][i]), v = __bfloat162float(h[q][i]);
      const double dd = fabs(v - ref), m = std::max(fabs(v), fabs(ref));
      worst = std::max(worst, dd);
      if (!(dd <= 2.0 * m / 128.0 + 1e-3)) ++mism; /* NaN (an unwritten output) counts */
      differ += memcmp(&h[cluster_only ? 7 : 1][i], &h[q][i], 2) != 0;
    }
    printf("check wgmma %-20s max |wgmma - cuBLASLt| %.3g, %zu of %zu beyond 2 bf16 ulps + 1e-3; %zu differ from "
           "the %s block variant\n", vname[q - 1], worst, mism, n_out, differ, cluster_only ? "cluster" : "simple");
    bad += mism != 0 || differ != 0;
  }
  if (!cluster_only) {
    CK(cudaMemsetAsync(mbits0, 0xff, (size_t)M * mld / 8, s));
    CK(cudaMemsetAsync(mbits1, 0x5a, (size_t)M * mld / 8, s));
    const fh_status m0 = cublas_mask(), m1 = gp_imp_mask();
    CK(cudaStreamSynchronize(s));
    std::vector<uint32_t> b0((size_t)M * mld / 32), b1(b0.size());
    CK(cudaMemcpy(b0.data(), mbits0, b0.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b1.data(), mbits1, b1.size() * 4, cudaMemcpyDeviceToHost));
    size_t off = 0, wrong_y = 0;
    for (int r = 0; r < M; ++r)
      for (int c = 0; c < N; c += 32) {
        const size_t w = ((size_t)r * mld + c) / 32;
        off += __builtin_popcount(b0[w] ^ b1[w]);
      }
    /* and the epilogue's bits against its own outputs: bit set exactly where y > 0 */
    std::vector<__nv_bfloat16> yh((size_t)M * N);
    CK(cudaMemcpy(yh.data(), pm.Y, yh.size() * 2, cudaMemcpyDeviceToHost));
    for (int r = 0; r < M; ++r)
      for (int c = 0; c < N; ++c) {
        const bool bit = (b1[((size_t)r * mld + c) / 32] >> (c % 32)) & 1u;
        wrong_y += bit != (__bfloat162float(yh[(size_t)r * N + c]) > 0.0f);
      }
    printf("check ReLU mask (persistent, gather): %s; %zu of %zu bits differ from cuBLASLt's RELU_AUX mask, %zu "
           "disagree with the outputs' signs\n",
           m0 == FH_OK && m1 == FH_OK ? "ran" : "FAILED", off, (size_t)M * N, wrong_y);
    bad += m0 != FH_OK || m1 != FH_OK || off != 0 || wrong_y != 0;
    fflush(stdout);
  }
  struct row {
    const char* name;
    double flops;
    std::function<fh_status()> fn;
    int kind; /* 0 a baseline, 1 a wgmma variant without clusters, 2 with */
  };
  const double fl = 2.0 * M * kK * N;
  std::vector<row> rows = {
      {"gather: the paired block (1152 bf16 a sample)", 0.0, gather, 0},
      {"cuBLASLt on the block (bias + ReLU)", fl, cublas, 0},
      {"gather + cuBLASLt", fl, [=]() { fh_status r = gather(); return r != FH_OK ? r : cublas(); }, 0},
      {"wgmma simple, on the block", fl, gg_blk, 1},
      {"wgmma simple, gathering its rows", fl, gg_imp, 1},
      {"wgmma specialised, on the block", fl, gw_blk, 1},
      {"wgmma specialised, gathering its rows", fl, gw_imp, 1},
      {"wgmma specialised + persistent, on the block", fl, gp_blk, 1},
      {"wgmma specialised + persistent, gathering its rows", fl, gp_imp, 1},
      {"cuBLASLt on the block + ReLU mask", fl, cublas_mask, 1},
      {"wgmma specialised + persistent, gathering + ReLU mask", fl, gp_imp_mask, 1},
      {"wgmma specialised + persistent, clusters of 2 (W multicast), on the block", fl, gc_blk, 2},
      {"wgmma specialised + persistent, clusters of 2 (W multicast), gathering", fl, gc_imp, 2},
  };
  printf("\n| what | us, L2 warm | TFLOP/s | us, L2 cold | TFLOP/s |\n| --- | ---: | ---: | ---: | ---: |\n");
  for (const row& r : rows) {
    if (r.kind == (cluster_only ? 1 : 2)) continue;
    bool ok = true;
    const timing t = timed(s, r.fn, scrub, scrub_bytes, &ok);
    if (!ok) {
      printf("| %s | failed | | | |\n", r.name);
      ++bad;
      continue;
    }
    if (r.flops > 0.0)
      printf("| %s | %.1f | %.0f | %.1f | %.0f |\n", r.name, t.warm, r.flops / t.warm / 1e6, t.cold,
             r.flops / t.cold / 1e6);
    else
      printf("| %s | %.1f | | %.1f | |\n", r.name, t.warm, t.cold);
    fflush(stdout);
  }
  fh_gemm_destroy(g);
  return bad ? 1 : 0;
}
