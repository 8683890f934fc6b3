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
 * Launch: WARPS warps a block (8 or 12: FH_SN_ARGMAX=1 | 2; ptxas: 198 and 168 registers, no spills; 16 warps spill),
 * one block an SM (the weights take ~170 KB of shared memory at the reference), a warp a tile of 16 rows; the grid is
 * one tile a warp (at B 16 384: 128 or 86 blocks), or at most max_blocks blocks that loop over the tiles.
 */
#include "heads_mma.cuh"

#include <mutex>

using namespace fh_hm;

template <int WARPS>
static __global__ void __launch_bounds__(WARPS * 32, 1) fh_sn_argmax_kernel(const fh_sn_argmax_args p) {
  extern __shared__ __align__(16) unsigned char fh_sa_smem[];
  const int nb = p.nb, atoms = p.atoms;
  int nblk = 1;
  for (int d = 0; d < nb; ++d) nblk += p.n[d];
  fh_bf16* sW = reinterpret_cast<fh_bf16*>(fh_sa_smem);
  float* sBias = reinterpret_cast<float*>(sW + (size_t)nblk * kCols * kRowS);
  fh_hl_load_weights<WARPS * 32>(p, nblk, atoms, sW, sBias);
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
    uint32_t astar = 0u;  /* a*_d of row r in bits 2 (2 d + r) .. +1 */
    float V[kNT][4];
    {
      uint32_t af[8][4];
      fh_hl_frags(af, h0, h1, t);
      fh_hl_gemm(V, af, sW, sBias, 0, lane);
#pragma unroll
      for (int c = 0; c < kNT; ++c)
#pragma unroll
        for (int e = 0; e < 4; ++e) V[c][e] = fh_bf16_round(V[c][e]);
    }
#pragma unroll 1
    for (int d = 0, so = 1; d < nb; so += p.n[d], ++d) {
      uint32_t af[8][4];
      fh_hl_frags(af, h0 + (d + 1) * kK, h1 + (d + 1) * kK, t);
      const int n = p.n[d];
      const float inv_n = fh_rcp_refined((float)n);
      float M[kNT][4];
      for (int a = 0; a < n; ++a) {
        float acc[kNT][4];
        fh_hl_gemm(acc, af, sW, sBias, so + a, lane);
#pragma unroll
        for (int c = 0; c < kNT; ++c)
#pragma unroll
          for (int e = 0; e < 4; ++e) M[c][e] = a == 0 ? fh_bf16_round(acc[c][e]) : M[c][e] + fh_bf16_round(acc[c][e]);
      }
#pragma unroll
      for (int c = 0; c < kNT; ++c)
#pragma unroll
        for (int e = 0; e < 4; ++e) M[c][e] *= inv_n;
      float bq[2] = {-INFINITY, -INFINITY};
      for (int a = 0; a < n; ++a) {
        float x[kNT][4];
        fh_hl_gemm(x, af, sW, sBias, so + a, lane);
#pragma unroll
        for (int c = 0; c < kNT; ++c)
#pragma unroll
          for (int e = 0; e < 4; ++e) x[c][e] = ok[c][e & 1] ? V[c][e] + fh_bf16_round(x[c][e]) - M[c][e] : -INFINITY;
        float mx[2], S[2];
        fh_hl_softmax(x, mx, S);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          float az = 0.0f;
#pragma unroll
          for (int c = 0; c < kNT; ++c)
#pragma unroll
            for (int e = 0; e < 2; ++e) az = __fmaf_rn(x[c][2 * r + e], vmin + (float)(8 * c + 2 * t + e) * dz, az);
          const float q = fh_quad_sum(az) * fh_rcp_approx(S[r]);
          if (q > bq[r]) {
            bq[r] = q;
            astar = (astar & ~(3u << (2 * (2 * d + r)))) | ((uint32_t)a << (2 * (2 * d + r)));
          }
        }
      }
    }
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

bool fh_sn_argmax_supported(int hh, int atoms, int nb, const int* n, int ldh, int smem_optin) {
  int nblk = 0;
  return shapes_fit(hh, atoms, nb, n, ldh, &nblk) && weight_bytes(nblk) <= FH_HEADS_LOSS_SMEM_MAX &&
         weight_bytes(nblk) <= (size_t)smem_optin;
}

fh_status fh_sn_argmax_setup() {
  static std::once_flag once;
  static cudaError_t attr = cudaSuccess;
  std::call_once(once, [] {
    attr = cudaFuncSetAttribute(fh_sn_argmax_kernel<8>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                FH_HEADS_LOSS_SMEM_MAX);
    if (attr == cudaSuccess)
      attr = cudaFuncSetAttribute(fh_sn_argmax_kernel<12>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  FH_HEADS_LOSS_SMEM_MAX);

  });
  if (attr != cudaSuccess) {
    fh_cuda_set_error(__FILE__, __LINE__, "fh_sn_argmax_setup", cudaGetErrorString(attr));
    return FH_ERR_DEVICE;
  }
  return FH_OK;
}

fh_status fh_launch_sn_argmax(const fh_sn_argmax_args& a, int warps, int max_blocks, cudaStream_t s) {
  if (a.B <= 0) return FH_OK;
  int nblk = 0;
  if (!shapes_fit(kK, a.atoms, a.nb, a.n, a.ldh, &nblk) || !a.H || !a.astar || (warps != 8 && warps != 12)) {
    fh_cuda_set_error(__FILE__, __LINE__, "fh_launch_sn_argmax", "shapes outside the s' argmax kernel");
    return FH_ERR_INVALID_ARGUMENT;
  }
  FH_TRY(fh_sn_argmax_setup());
  const size_t smem = weight_bytes(nblk);
  const int tiles = (a.B + kRows - 1) / kRows;
  int blocks = (tiles + warps - 1) / warps;
  if (max_blocks > 0 && blocks > max_blocks) blocks = max_blocks;
  if (warps == 8)
    fh_sn_argmax_kernel<8><<<blocks, 8 * 32, smem, s>>>(a);
  else
    fh_sn_argmax_kernel<12><<<blocks, 12 * 32, smem, s>>>(a);
  FH_LAUNCH_CHECK();
  return FH_OK;
}
