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
 *     simple        gg_kernel (here): every thread copies and computes, a block barrier a K slice
 *     specialised   the library's fh_l1g_fwd_kernel (kernels/l1_gather_device.cuh): a producer warpgroup (cp.async
 *                   rows, TMA W slices) and two consumer warpgroups joined by full/empty mbarriers, one tile a block
 *     persistent    the same walking the tiles with at most one block an SM (the library's FH_L1_GATHER=1)
 *     cluster 2, 4  the same persistent in clusters of two (four) CTAs that share each W slice by TMA multicast (=2, =3)
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
 * `dw` measures the weight gradient of the same layer's market columns instead (fh_l1g_dw_kernel, dw_section).
 *
 *   gather_gemm_probe [B] [cluster|dw]   (cluster: the cluster variants only, against the same baselines)
 */
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

#include "../../kernels/l1_gather.cuh"
#include "../../kernels/l1_gather_device.cuh"
#include "../../native/src/cuda/gemm_cublaslt.h"
#include "probe_check.cuh"

#define CK(x) FH_PROBE_CK(x, 1)

namespace {

using namespace fh_l1g;
constexpr int kWindow = 64, kF = 16, kMkt = kAcc, kK = kMkt + kWindow * kF, kP = 1152, kNStep = 3;
constexpr int kSimpleThreads = 256, kDwCols = kWindow * kF;

/* K slice kb of the block's A rows (kBM x 64) and W rows (kBN x 64) into stage buffers sa, sb */
__device__ __forceinline__ void gg_load(const fh_l1g_fwd_args& a, int m0, int n0, int kb, uint32_t sa, uint32_t sb) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < kBM * 8 / kSimpleThreads; ++i) {
    const int q = tid + kSimpleThreads * i, r = q >> 3, c = q & 7, row = m0 + r;
    int bytes = 0;
    const void* src = fh_l1g_a_src(a, fh_l1g_row_base(a, row, c), row, kb, c, &bytes);
    fh_cp16(sa + fh_swz(r, c), src, bytes);
  }
#pragma unroll
  for (int i = 0; i < kBN * 8 / kSimpleThreads; ++i) {
    const int q = tid + kSimpleThreads * i, r = q >> 3, c = q & 7, n = n0 + r;
    fh_cp16(sb + fh_swz(r, c), n < a.N ? a.W + (int64_t)n * kK + kb * kBK + c * 8 : a.W, n < a.N ? 16 : 0);
  }
}

/* the simple variant: every thread copies and computes, a block barrier a K slice */
__global__ void __launch_bounds__(kSimpleThreads, 1) gg_kernel(fh_l1g_fwd_args a) {
  extern __shared__ unsigned char smem_raw[];
  const uint32_t base = (fh_smem_addr(smem_raw) + 1023u) & ~1023u;
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
    fh_fence_proxy_async();
    __syncthreads();
    const int nxt = kb + kStages - 2;
    if (nxt < KB) gg_load(a, m0, n0, nxt, sa(nxt % kStages), sb(nxt % kStages));
    asm volatile("cp.async.commit_group;\n" ::);
    const int s = kb % kStages;
    fh_wgmma_fence();
#pragma unroll
    for (int k = 0; k < kBK / 16; ++k)
      fh_wgmma_m64n256k16<0, 0>(d, fh_desc_k128(sa(s) + (uint32_t)(wg * 64 * 128 + k * 32)),
                                fh_desc_k128(sb(s) + (uint32_t)(k * 32)));
    fh_wgmma_commit();
    fh_wgmma_wait<1>();
  }
  fh_wgmma_wait<0>();
  fh_l1g_store(a, d, m0 + wg * 64, n0);
}

/* the warp-specialised forward: one tile a block (persistent false, this file's instance), else the library's
 * launch as plans[v]'s variant (persistent blocks, clusters of two or four) */
fh_status launch_gw(const fh_l1g_plan* plans, const fh_l1g_fwd_args& a, int variant, cudaStream_t s) {
  if (variant > 0) return fh_l1g_launch_fwd_args(plans[variant - 1], a, s);
  const dim3 grid((unsigned)((a.N + kBN - 1) / kBN), (unsigned)((a.M + kBM - 1) / kBM));
  fh_l1g_fwd_kernel<false, 1><<<grid, kThreads, kSmem, s>>>(plans[0].wmap, a);
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

fh_status launch_gg(const fh_l1g_fwd_args& a, cudaStream_t s) {
  const dim3 grid((unsigned)((a.N + kBN - 1) / kBN), (unsigned)((a.M + kBM - 1) / kBM));
  gg_kernel<<<grid, kSimpleThreads, kSmem, s>>>(a);
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

/* one row of the probe's tables: µs and TFLOP/s (flops 0: µs only) with the L2 warm and cold; false if it failed */
bool table_row(cudaStream_t s, const char* name, double flops, const std::function<fh_status()>& fn, void* scrub,
               size_t scrub_bytes) {
  bool ok = true;
  const timing t = timed(s, fn, scrub, scrub_bytes, &ok);
  if (!ok)
    printf("| %s | failed | | | |\n", name);
  else if (flops > 0.0)
    printf("| %s | %.1f | %.0f | %.1f | %.0f |\n", name, t.warm, flops / t.warm / 1e6, t.cold, flops / t.cold / 1e6);
  else
    printf("| %s | %.1f | | %.1f | |\n", name, t.warm, t.cold);
  fflush(stdout);
  return ok;
}
const char* const kTableHead = "\n| what | us, L2 warm | TFLOP/s | us, L2 cold | TFLOP/s |\n| --- | ---: | ---: | ---: | ---: |\n";

/* The dW section (`dw`): the first layer's market weight gradient as the step computes it (cuBLASLt on the
 * materialised block's market columns, on the whole GPU and on 100 SMs) against fh_l1g_dw_kernel + fh_l1g_dw_reduce gathering its
 * rows; checked against cuBLASLt (the fp32 sums run in another order) and against itself (the same bits twice). */
int dw_section(fh_gemm* g, void* ws, cudaStream_t s, const fh_l1g_plan& plan, const void* dH, const int32_t* bar,
               void* blk, int M, int N, void* scrub, size_t scrub_bytes, const std::function<fh_status()>& gather) {
  constexpr int ldw = kDwCols + 8; /* the canonical W1 row: the market columns, then the 8 account columns */
  float *dW0 = nullptr, *dW1 = nullptr, *dW2 = nullptr;
  FH_PROBE_CK(cudaMalloc(&dW0, (size_t)N * ldw * 4), 1);
  FH_PROBE_CK(cudaMalloc(&dW1, (size_t)N * ldw * 4), 1);
  FH_PROBE_CK(cudaMalloc(&dW2, (size_t)N * ldw * 4), 1);
  const int kMaxSplits = plan.dw.splits;
  const void* xm = static_cast<const __nv_bfloat16*>(blk) + kMkt;
  auto cublas_dw = [=](int sm_target) {
    return [=]() {
      fh_gemm_set_sm_target(g, sm_target);
      const fh_status r = fh_gemm_dw(g, s, ws, FH_BF16, M, N, kDwCols, dH, N, xm, kP, dW0, nullptr, ldw);
      fh_gemm_set_sm_target(g, 0);
      return r;
    };
  };
  /* the library's launch at `splits` (at most the plan's: its partials hold that many) */
  auto ours = [=](int splits, float* out) {
    fh_l1g_plan q = plan;
    q.dw.splits = std::min(splits, plan.dw.splits);
    return [=]() { return fh_launch_l1g_dw(q, bar, M, out, ldw, s); };
  };
  auto ours_swapped = [=](float* out) {
    fh_l1g_plan q = plan;
    q.dw_swap = true;
    return [=]() { return fh_launch_l1g_dw(q, bar, M, out, ldw, s); };
  };
  auto ours_kernel_only = [=](bool swap) {
    fh_l1g_dw_args a = plan.dw;
    a.bar = bar;
    return [=]() {
      const int blocks = (kDwCols / kBN) * (N / kBM) * a.splits;
      if (swap)
        fh_l1g_dw_kernel<true><<<blocks, kThreads, kDwSmem, s>>>(plan.hmap, a);
      else
        fh_l1g_dw_kernel<false><<<blocks, kThreads, kDwSmem, s>>>(plan.hmap, a);
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
  /* h against cuBLASLt's h0 (worst |diff|, how many beyond 1e-4 rms + 1e-5 |ref|; NaN counts) and bit for bit
   * against other (how many differ) */
  auto compare = [&](const std::vector<float>& h, const std::vector<float>& other, double& worst_d, size_t& n_beyond,
                     size_t& n_differ) {
    for (int r = 0; r < N; ++r)
      for (int c = 0; c < kDwCols; ++c) {
        const size_t i = (size_t)r * ldw + c;
        const double dd = fabs((double)h[i] - h0[i]);
        worst_d = std::max(worst_d, dd);
        if (!(dd <= 1e-4 * rms + 1e-5 * fabs((double)h0[i]))) ++n_beyond;
        n_differ += memcmp(&h[i], &other[i], 4) != 0;
      }
  };
  compare(h1, h2, worst, beyond, differ);
  printf("check dW gathering (%d splits, the library's plan) against cuBLASLt on the block: rms %.4g, max |ref| %.4g, "
         "max |diff| %.3g, %zu of %zu beyond 1e-4 rms + 1e-5 |ref|; %zu differ between two runs\n",
         kMaxSplits, rms, ref_max, worst, beyond, (size_t)N * kDwCols, differ);
  fflush(stdout);
  int bad = beyond != 0 || differ != 0 || rms == 0.0;
  /* the transposed tile: against cuBLASLt the same way; against the untransposed kernel for information (the
   * instruction's internal order of a k16 step may differ between the operand layouts) */
  FH_PROBE_CK(cudaMemsetAsync(dW2, 0xff, n_w * 4, s), 1);
  const fh_status r4 = ours_swapped(dW2)();
  FH_PROBE_CK(cudaStreamSynchronize(s), 1);
  FH_PROBE_CK(cudaMemcpy(h2.data(), dW2, n_w * 4, cudaMemcpyDeviceToHost), 1);
  double worst_t = 0.0;
  size_t beyond_t = 0, differ_t = 0;
  compare(h2, h1, worst_t, beyond_t, differ_t);
  printf("check dW gathering transposed: %s; max |diff| %.3g against cuBLASLt, %zu beyond; %zu differ from the "
         "untransposed kernel\n", r4 == FH_OK ? "ran" : "FAILED", worst_t, beyond_t, differ_t);
  fflush(stdout);
  bad += r4 != FH_OK || beyond_t != 0;
  struct row {
    const char* name;
    std::function<fh_status()> fn;
  };
  const double fl = 2.0 * M * kDwCols * N;
  const int sm100 = 100; /* the step's SM target for dW1 (FH_DW1_SMS at the reference) */
  std::vector<row> rows = {
      {"gather: the paired block", gather},
      {"cuBLASLt dW on the block, whole GPU", cublas_dw(0)},
      {"cuBLASLt dW on the block, 100 SMs (the step's)", cublas_dw(sm100)},
      {"gather + cuBLASLt dW (100 SMs)", [=]() { fh_status r = gather(); return r != FH_OK ? r : cublas_dw(sm100)(); }},
      {"wgmma dW gathering, the plan's splits + reduce (the library's launch)", ours(kMaxSplits, dW1)},
      {"wgmma dW gathering, the plan's splits, kernel alone", ours_kernel_only(false)},
      {"wgmma dW gathering transposed (windows as A, dH by TMA as B) + reduce", ours_swapped(dW2)},
      {"wgmma dW gathering transposed, kernel alone", ours_kernel_only(true)},
      {"wgmma dW gathering, 4 splits + reduce", ours(4, dW1)},
  };
  printf("%s", kTableHead);
  for (const row& r : rows)
    if (!table_row(s, r.name, strncmp(r.name, "gather:", 7) != 0 ? fl : 0.0, r.fn, scrub, scrub_bytes)) ++bad;
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
  constexpr int kVariants = 10;
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
  CK(cudaFuncSetAttribute(fh_l1g_fwd_kernel<false, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  /* the `dw` section's kernel-alone rows launch this file's instances of the dW kernel (the library's own have
   * their attribute from fh_l1g_setup) */
  CK(cudaFuncSetAttribute(fh_l1g_dw_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, kDwSmem));
  CK(cudaFuncSetAttribute(fh_l1g_dw_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kDwSmem));
  /* the library's plans (kernels/l1_gather.cu) of its three variants: tensor maps, resident clusters, the dW's
   * splits and partials (dH: the `dw` section's input gradient) */
  void* dH = fh_probe_bf16_buffer((size_t)M * N, 1.0f, 4);
  if (!dH) return 1;
  fh_l1g_plan plans[3] = {};
  for (int v = 1; v <= 3; ++v) {
    fh_l1g_plan& p = plans[v - 1];
    if (fh_l1g_setup(&p, v, F, n_bars, kF, kWindow, static_cast<const __nv_bfloat16*>(W), N, kK,
                     static_cast<const __nv_bfloat16*>(dH), M) != FH_OK || !p.on) {
      fprintf(stderr, "gather_gemm_probe: fh_l1g_setup (variant %d): %s %s\n", v, p.why, fh_cuda_last_error_text());
      return 1;
    }
    if (v > 1) printf("variant %d: %d clusters of %d resident at once\n", v, p.clusters, v == 2 ? 2 : 4);
  }
  fh_l1g_fwd_args ab = plans[0].fwd; /* the feature matrix, W and the shapes as the library's setup set them */
  ab.blk_ld = kP;
  ab.ldy = N;
  ab.mask_rows = M;
  ab.blk = static_cast<const __nv_bfloat16*>(blk);
  ab.bias = static_cast<const __nv_bfloat16*>(bias);
  auto out = [&](int q) { return static_cast<__nv_bfloat16*>(ys[1 + q]); };
  ab.Y = out(0);
  ab.M = M;
  fh_l1g_fwd_args ai = ab;
  ai.bar = bar;
  ai.acc = A;
  ai.Y = out(1);
  auto gg_blk = [=]() { return launch_gg(ab, s); };
  auto gg_imp = [=]() { return launch_gg(ai, s); };
  fh_l1g_fwd_args wb = ab, wi = ai;
  wb.Y = out(2);
  wi.Y = out(3);
  auto gw_blk = [=]() { return launch_gw(plans, wb, 0, s); };
  auto gw_imp = [=]() { return launch_gw(plans, wi, 0, s); };
  fh_l1g_fwd_args pb = wb, pi = wi;
  pb.Y = out(4);
  pi.Y = out(5);
  auto gp_blk = [=]() { return launch_gw(plans, pb, 1, s); };
  auto gp_imp = [=]() { return launch_gw(plans, pi, 1, s); };
  /* the ReLU bit mask the backward reads (the step writes it for the s rows): cuBLASLt's against the epilogue's */
  const int64_t mld = 512;
  void *mbits0 = nullptr, *mbits1 = nullptr;
  CK(cudaMalloc(&mbits0, (size_t)M * mld / 8));
  CK(cudaMalloc(&mbits1, (size_t)M * mld / 8));
  auto cublas_mask = [=]() {
    return fh_gemm_fwd(g, s, ws, FH_BF16, M, N, kK, blk, kP, W, bias, FH_EPI_RELU_BIAS, y0, FH_BF16, N,
                       fh_relu_mask{mbits0, mld});
  };
  fh_l1g_fwd_args pm = pi;
  pm.mask = static_cast<uint32_t*>(mbits1);
  pm.mask_ld = mld;
  auto gp_imp_mask = [=]() { return launch_gw(plans, pm, 1, s); };
  fh_l1g_fwd_args cb = wb, ci = wi;
  cb.Y = out(6);
  ci.Y = out(7);
  auto gc_blk = [=]() { return launch_gw(plans, cb, 2, s); };
  auto gc_imp = [=]() { return launch_gw(plans, ci, 2, s); };
  fh_l1g_fwd_args c4b = wb, c4i = wi;
  c4b.Y = out(8);
  c4i.Y = out(9);
  auto gc4_blk = [=]() { return launch_gw(plans, c4b, 3, s); };
  auto gc4_imp = [=]() { return launch_gw(plans, c4i, 3, s); };
  printf("gather_gemm_probe: %s, B %d, K %d, N %d, %lld bars\n", prop.name, M, kK, N, (long long)n_bars);
  if (dw_only) {
    const int rc = dw_section(g, ws, s, plans[0], dH, bar, blk, M, N, scrub, scrub_bytes, gather);
    fh_gemm_destroy(g);
    return rc;
  }
  /* correctness */
  for (int q = 0; q < kVariants; ++q) CK(cudaMemsetAsync(out(q), 0xff, (size_t)M * N * 2, s)); /* NaN: unwritten */
  const fh_status r0 = gather(), r1 = r0 == FH_OK ? cublas() : r0;
  /* the cluster variants alone with "cluster" (a hang there must not cost the other variants' table) */
  const std::function<fh_status()> vfn[kVariants] = {gg_blk, gg_imp, gw_blk, gw_imp, gp_blk, gp_imp,
                                                      gc_blk, gc_imp, gc4_blk, gc4_imp};
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
                                  "cluster 2, block",    "cluster 2, gather",  "cluster 4, block",
                                  "cluster 4, gather"};
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
      {"wgmma specialised + persistent, clusters of 4 (W multicast), on the block", fl, gc4_blk, 2},
      {"wgmma specialised + persistent, clusters of 4 (W multicast), gathering", fl, gc4_imp, 2},
  };
  printf("%s", kTableHead);
  for (const row& r : rows)
    if (r.kind != (cluster_only ? 1 : 2) && !table_row(s, r.name, r.flops, r.fn, scrub, scrub_bytes)) ++bad;
  fh_gemm_destroy(g);
  return bad ? 1 : 0;
}
