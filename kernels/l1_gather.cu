/*
 * l1_gather.cu — the host side of the gathering first layer (kernels/l1_gather.cuh): setup checks, TMA maps,
 * launch shapes. Built for sm_90a alone (native/src/cuda/CMakeLists.txt); fh_l1g_setup leaves the path off on
 * any other GPU.
 */
#include <cudaTypedefs.h>
#include <stdio.h>

#include <algorithm>

#include "l1_gather.cuh"
#include "l1_gather_device.cuh"

namespace {

using fh_l1g::kBK;
using fh_l1g::kBM;
using fh_l1g::kBN;

/* the path stays off for `why`: not an error, the caller keeps its materialised block */
fh_status leave_off(fh_l1g_plan* p, const char* why) {
  p->on = false;
  snprintf(p->why, sizeof p->why, "%s", why);
  return FH_OK;
}

PFN_cuTensorMapEncodeTiled_v12000 encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  if (!fn) {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
    else
      cudaGetLastError();
  }
  return fn;
}

bool aligned16(const void* p) { return ((uintptr_t)p & 15u) == 0; }

int cluster_of(int variant) { return variant == 3 ? 4 : variant == 2 ? 2 : 1; }

/* a launch of `blocks` blocks in clusters of cl along x */
void cluster_launch(cudaLaunchConfig_t* cfg, cudaLaunchAttribute* attr, int cl, int blocks, cudaStream_t s) {
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = (unsigned)cl;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg->gridDim = dim3((unsigned)blocks);
  cfg->blockDim = dim3(fh_l1g::kThreads);
  cfg->dynamicSmemBytes = fh_l1g::kSmem;
  cfg->stream = s;
  cfg->attrs = attr;
  cfg->numAttrs = 1;
}

}  // namespace

bool fh_l1g_encode_2d(CUtensorMap* map, const void* base, int64_t rows, int64_t cols, int box_cols, int box_rows) {
  PFN_cuTensorMapEncodeTiled_v12000 fn = encoder();
  if (!fn) return false;
  const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
  const cuuint64_t strides[1] = {(cuuint64_t)cols * 2};
  const cuuint32_t box[2] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows}, estr[2] = {1, 1};
  return fn(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box, estr,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

fh_status fh_l1g_setup(fh_l1g_plan* p, int variant, const fh_bf16* feat, int64_t n_bars, int32_t F, int32_t window,
                       const fh_bf16* W, int32_t N, int32_t K, const fh_bf16* dH, int32_t dw_rows) {
  fh_l1g_free(p);
  p->variant = variant;
  int dev = 0;
  cudaDeviceProp prop{};
  FH_CUDA_TRY(cudaGetDevice(&dev));
  FH_CUDA_TRY(cudaGetDeviceProperties(&prop, dev));
  if (prop.major != 9 || prop.minor != 0) return leave_off(p, "needs a compute capability 9.0 GPU (sm_90a code)");
  cudaFuncAttributes fa{};
  if (cudaFuncGetAttributes(&fa, fh_l1g_fwd_kernel<true, 1>) != cudaSuccess) {
    cudaGetLastError();
    return leave_off(p, "the library has no sm_90a code for this GPU");
  }
  if (variant < 1 || variant > 3)
    return leave_off(p, "variant must be 1 (blocks), 2 (clusters of two) or 3 (clusters of four)");
  const int cl = cluster_of(variant);
  if (!feat || !W || !dH || !aligned16(feat) || !aligned16(W) || !aligned16(dH))
    return leave_off(p, "feature matrix, W and dH must be 16-byte aligned device buffers");
  if (F <= 0 || F % 8 || window <= 0 || (int64_t)window * F % kBN || K != fh_l1g::kAcc + window * F)
    return leave_off(p, "needs F % 8 == 0, window F a multiple of 256 and K = 64 + window F");
  if (N <= 0 || N % kBM || dw_rows <= 0 || n_bars < window)
    return leave_off(p, "needs N a multiple of 128, dw_rows > 0 and at least `window` bars");
  /* (the weight gradient's kernel also holds its bar table in static shared memory) */
  if ((int)prop.sharedMemPerBlockOptin < std::max(fh_l1g::kSmem, fh_l1g::kDwSmem + fh_l1g::kDwBars * 4 + 64))
    return leave_off(p, "not enough shared memory per block");
  constexpr cudaFuncAttribute kDyn = cudaFuncAttributeMaxDynamicSharedMemorySize;
  FH_CUDA_TRY(cudaFuncSetAttribute(fh_l1g_fwd_kernel<true, 1>, kDyn, fh_l1g::kSmem));
  FH_CUDA_TRY(cudaFuncSetAttribute(fh_l1g_fwd_kernel<true, 2>, kDyn, fh_l1g::kSmem));
  FH_CUDA_TRY(cudaFuncSetAttribute(fh_l1g_fwd_kernel<true, 4>, kDyn, fh_l1g::kSmem));
  FH_CUDA_TRY(cudaFuncSetAttribute(fh_l1g_dw_kernel<false>, kDyn, fh_l1g::kDwSmem));
  FH_CUDA_TRY(cudaFuncSetAttribute(fh_l1g_dw_kernel<true>, kDyn, fh_l1g::kDwSmem));
  if (!fh_l1g_encode_2d(&p->wmap, W, N, K, kBK, kBN / cl) || !fh_l1g_encode_2d(&p->hmap, dH, dw_rows, N, 64, kBK))
    return leave_off(p, "the TMA maps could not be encoded (cuTensorMapEncodeTiled)");
  p->sms = prop.multiProcessorCount;
  p->clusters = 0;
  if (cl > 1) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    cluster_launch(&cfg, attr, cl, p->sms / cl * cl, nullptr);
    int resident = 0;
    const cudaError_t e = cudaOccupancyMaxActiveClusters(
        &resident, cl == 2 ? fh_l1g_fwd_kernel<true, 2> : fh_l1g_fwd_kernel<true, 4>, &cfg);
    if (e != cudaSuccess || resident <= 0) {
      cudaGetLastError();
      return leave_off(p, "no cluster of the variant's size can be resident");
    }
    p->clusters = resident;
  }
  /* FH_L1G_DW_SWAP=1 (opt-in with the path): the weight gradient's tile transposed, where N allows (window F, a
   * multiple of 256 above, always fits the transposed tile's 128 rows) */
  p->dw_swap = fh_env_is("FH_L1G_DW_SWAP", "1") && N % kBN == 0;
  const int tiles = (window * F / kBN) * (N / kBM);
  fh_l1g_dw_args& d = p->dw;
  d.splits = std::max(1, std::min(p->sms / tiles, (dw_rows + kBK - 1) / kBK));
  FH_CUDA_TRY(cudaMalloc(&d.part, (size_t)d.splits * N * window * F * sizeof(float)));
  d.feat = feat;
  d.M = dw_rows;
  d.N = N;
  d.F = F;
  d.window = window;
  d.n_bars = n_bars;
  fh_l1g_fwd_args& a = p->fwd;
  a.feat = feat;
  a.W = W;
  a.N = N;
  a.K = K;
  a.F = F;
  a.window = window;
  a.n_bars = n_bars;
  p->on = true;
  p->why[0] = 0;
  return FH_OK;
}

void fh_l1g_free(fh_l1g_plan* p) {
  if (p->dw.part) cudaFree(p->dw.part);
  p->dw.part = nullptr;
  p->on = false;
}

fh_status fh_l1g_launch_fwd_args(const fh_l1g_plan& p, const fh_l1g_fwd_args& a, cudaStream_t s) {
  const int tn = (a.N + kBN - 1) / kBN, tm = (a.M + kBM - 1) / kBM;
  const int cl = cluster_of(p.variant);
  if (cl > 1) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    const int units = tn * ((tm + cl - 1) / cl);
    cluster_launch(&cfg, attr, cl, cl * std::min(p.clusters, units), s);
    if (cl == 2)
      FH_CUDA_TRY(cudaLaunchKernelEx(&cfg, fh_l1g_fwd_kernel<true, 2>, p.wmap, a));
    else
      FH_CUDA_TRY(cudaLaunchKernelEx(&cfg, fh_l1g_fwd_kernel<true, 4>, p.wmap, a));
  } else {
    fh_l1g_fwd_kernel<true, 1><<<std::min(p.sms, tn * tm), fh_l1g::kThreads, fh_l1g::kSmem, s>>>(p.wmap, a);
    FH_LAUNCH_CHECK();
  }
  return FH_OK;
}

fh_status fh_launch_l1g_fwd(const fh_l1g_plan& p, const int32_t* bar, const fh_bf16* acc, const fh_bf16* bias,
                            fh_bf16* Y, int64_t ldy, int32_t M, uint32_t* mask, int64_t mask_ld, int32_t mask_rows,
                            cudaStream_t s) {
  const int32_t N = p.fwd.N;
  if (!p.on || !bar || !acc || !bias || !Y || M <= 0 || ldy < N || ldy % 2 || !aligned16(acc) ||
      (mask && (mask_ld < N || mask_ld % 128)))
    return FH_ERR_INVALID_ARGUMENT;
  fh_l1g_fwd_args a = p.fwd;
  a.bar = bar;
  a.acc = acc;
  a.bias = bias;
  a.Y = Y;
  a.ldy = ldy;
  a.mask = mask;
  a.mask_ld = mask_ld;
  a.mask_rows = mask ? mask_rows : 0;
  a.M = M;
  return fh_l1g_launch_fwd_args(p, a, s);
}

fh_status fh_launch_l1g_dw(const fh_l1g_plan& p, const int32_t* bar, int32_t M, float* dW, int64_t ldw,
                           cudaStream_t s) {
  const fh_l1g_dw_args& d = p.dw;
  const int cols = d.window * d.F;
  if (!p.on || !bar || !dW || M != d.M || ldw < cols) return FH_ERR_INVALID_ARGUMENT;
  fh_l1g_dw_args a = d;
  a.bar = bar;
  const int tiles = (cols / kBN) * (d.N / kBM);
  if (p.dw_swap)
    fh_l1g_dw_kernel<true><<<tiles * d.splits, fh_l1g::kThreads, fh_l1g::kDwSmem, s>>>(p.hmap, a);
  else
    fh_l1g_dw_kernel<false><<<tiles * d.splits, fh_l1g::kThreads, fh_l1g::kDwSmem, s>>>(p.hmap, a);
  FH_LAUNCH_CHECK();
  const int64_t n_q = (int64_t)d.N * cols / 4;
  fh_l1g_dw_reduce<<<(unsigned)CEIL_DIV(n_q, 256), 256, 0, s>>>(d.part, d.splits, d.N, cols, dW, ldw);
  FH_LAUNCH_CHECK();
  return FH_OK;
}
