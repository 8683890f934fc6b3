/*
 * sn_argmax.cu — the double-DQN argmax of online(s') straight from the head layer's activations (bf16 mode, opt-in
 * with FH_SN_ARGMAX; DESIGN §5).
 *
 * The loss needs only a*_d = argmax_a Q_online,d(s', a) from online(s'), yet the unfused step writes its 2B rows of
 * logits (B of them for s': 51 x (1 + 3 + 4 + 3) bf16 a row, ~20 MB at B 16 384) and the loss reads them back. Here a
 * warp takes 16 rows of s' (pass 0's activations, rows B..2B-1), multiplies them by the head-output weights in shared
 * memory with mma.sync (heads_mma.cuh, the tiles of the fused head outputs + loss), and keeps per row only a*_d:
 *   V = h_v W_v + b_v; per branch M = sum_a (h_d W_a + b_a); per action x = V + A_a - M / n, its softmax over the atoms
 *   and Q_a = sum_j p_j z_j; a*_d = the first argmax.
 * Each logit is rounded to bf16 before use, as the unfused path stores it, so a*_d differs from that path's only where
 * two expected Qs agree to within the order of the sums. Output: one byte a sample, a*_d in bits 2 d .. 2 d + 1. The
 * head GEMMs then run over the B rows of s alone, and the loss (fh_launch_bdq_loss_astar) reads the bytes instead of
 * the s' logits.
 *
 * Variants (FH_SN_ARGMAX = 1 + variant): 1 and 2, 8 and 12 warps a block (16 spill), two GEMM passes an action, the
 * dueling mean's and then the logits'; 3, 8 warps, one GEMM pass an action, its rounded logits kept as bf16 pairs in
 * the warp's part of shared memory (7 KB) for the softmax loop after the mean (half the mma; in registers they spilled).
 * One block an SM (the weights take ~170 KB of shared memory at the reference, 227 KB with 3's kept logits), a warp a
 * tile of 16 rows; the grid is one tile a warp (at B 16 384: 128 or 86 blocks), or at most max_blocks blocks that loop
 * over the tiles.
 */
#include "heads_mma.cuh"

#include <mutex>

using namespace fh_hm;

/* Shared bytes of a launch of WARPS warps (KEEP: the kept logits too) with nblk weight blocks. */
static size_t sa_smem_bytes(int nblk, int warps, bool keep) {
  return weight_bytes(nblk) + (keep ? (size_t)warps * kMaxN * kHlKeepWords * sizeof(uint32_t) : 0);
}

template <int WARPS, bool KEEP>
static __global__ void __launch_bounds__(WARPS * 32, 1) fh_sn_argmax_kernel(const fh_sn_argmax_args p) {
  extern __shared__ __align__(16) unsigned char fh_sa_smem[];
  const int nb = p.nb, atoms = p.atoms;
  fh_bf16* sW;
  float* sBias;
  const int nblk = fh_hl_carve(p, fh_sa_smem, sW, sBias);
  fh_hl_load_weights<WARPS * 32>(p, nblk, atoms, sW, sBias);
  /* KEEP: this warp's kept logits, kMaxN actions of kHlKeepWords words (after the biases; unused otherwise) */
  uint32_t* sKeep = reinterpret_cast<uint32_t*>(sBias + nblk * kCols) + (threadIdx.x >> 5) * kMaxN * kHlKeepWords;
  __syncthreads();

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const float vmin = p.v_min, vmax = p.v_max;
  const float dz = (vmax - vmin) * fh_rcp_refined((float)(atoms - 1));
  bool ok[kNT][2];  /* this lane's atoms: j = 8 c + 2 t + e, z_j = vmin + j dz (computed where used: registers) */
#pragma unroll
  for (int c = 0; c < kNT; ++c)
#pragma unroll
    for (int e = 0; e < 2; ++e) ok[c][e] = 8 * c + 2 * t + e < atoms;
  const int B = p.B, tiles = (B + kRows - 1) / kRows;
  for (int tile = blockIdx.x * WARPS + warp; tile < tiles; tile += gridDim.x * WARPS) {
    const int i0 = tile * kRows;
    const int ir[2] = {i0 + g < B ? i0 + g : B - 1, i0 + g + 8 < B ? i0 + g + 8 : B - 1};
    const fh_bf16* h0 = p.H + (int64_t)ir[0] * p.ldh;
    const fh_bf16* h1 = p.H + (int64_t)ir[1] * p.ldh;
    const uint32_t astar = fh_hl_argmax_rows<true, KEEP>(h0, h1, p.n, nb, ok, sW, sBias, sKeep, lane, t, vmin, dz);
    if (t == 0) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        if (i0 + g + 8 * r >= B) continue;
        uint32_t packed = 0u;
        for (int d = 0; d < nb; ++d) packed |= ((astar >> (2 * (2 * d + r))) & 3u) << (2 * d);
        p.astar[i0 + g + 8 * r] = (uint8_t)packed;
      }
    }
  }
}

/* The variants (FH_SN_ARGMAX - 1): 8 or 12 warps a block with two GEMM passes an action; 8 warps with one, the logits
 * kept in shared memory (12 warps of kept logits do not fit beside the weights). */
using fh_sa_kernel = void (*)(const fh_sn_argmax_args);
static const fh_sa_kernel kSaKernels[FH_SN_ARGMAX_VARIANTS] = {fh_sn_argmax_kernel<8, false>, fh_sn_argmax_kernel<12, false>,
                                                              fh_sn_argmax_kernel<8, true>};
static const int kSaWarps[FH_SN_ARGMAX_VARIANTS] = {8, 12, 8};
static const bool kSaKeep[FH_SN_ARGMAX_VARIANTS] = {false, false, true};

int fh_sn_argmax_warps(int variant) { return variant >= 0 && variant < FH_SN_ARGMAX_VARIANTS ? kSaWarps[variant] : 0; }

/* Variant's shared memory for these shapes into *smem; false outside the variants, the layout or smem_optin. */
static bool sa_fits(int variant, int hh, int atoms, int nb, const int* n, int ldh, int smem_optin, size_t* smem) {
  int nblk = 0;
  if (variant < 0 || variant >= FH_SN_ARGMAX_VARIANTS || !shapes_fit(hh, atoms, nb, n, ldh, &nblk)) return false;
  *smem = sa_smem_bytes(nblk, kSaWarps[variant], kSaKeep[variant]);
  return *smem <= FH_HEADS_LOSS_SMEM_MAX && *smem <= (size_t)smem_optin;
}

bool fh_sn_argmax_supported(int variant, int hh, int atoms, int nb, const int* n, int ldh, int smem_optin) {
  size_t smem = 0;
  return sa_fits(variant, hh, atoms, nb, n, ldh, smem_optin, &smem);
}

fh_status fh_sn_argmax_setup() {
  static std::once_flag once;
  static cudaError_t attr = cudaSuccess;
  std::call_once(once, [] {
    for (int v = 0; v < FH_SN_ARGMAX_VARIANTS && attr == cudaSuccess; ++v)
      attr = cudaFuncSetAttribute(kSaKernels[v], cudaFuncAttributeMaxDynamicSharedMemorySize, FH_HEADS_LOSS_SMEM_MAX);
  });
  if (attr != cudaSuccess) {
    fh_cuda_set_error(__FILE__, __LINE__, "fh_sn_argmax_setup", cudaGetErrorString(attr));
    return FH_ERR_DEVICE;
  }
  return FH_OK;
}

fh_status fh_launch_sn_argmax(const fh_sn_argmax_args& a, int variant, int max_blocks, cudaStream_t s) {
  if (a.B <= 0) return FH_OK;
  size_t smem = 0;
  if (!sa_fits(variant, kK, a.atoms, a.nb, a.n, a.ldh, FH_HEADS_LOSS_SMEM_MAX, &smem) || !a.H || !a.astar) {
    fh_cuda_set_error(__FILE__, __LINE__, "fh_launch_sn_argmax", "shapes or variant outside the s' argmax kernel");
    return FH_ERR_INVALID_ARGUMENT;
  }
  FH_TRY(fh_sn_argmax_setup());
  const int warps = kSaWarps[variant];
  const int tiles = (a.B + kRows - 1) / kRows;
  int blocks = (tiles + warps - 1) / warps;
  if (max_blocks > 0 && blocks > max_blocks) blocks = max_blocks;
  kSaKernels[variant]<<<blocks, warps * 32, smem, s>>>(a);
  FH_LAUNCH_CHECK();
  return FH_OK;
}
