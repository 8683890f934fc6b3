/*
 * l1_gather.cuh — the train step's first layer without the materialised batch block (FH_L1_GATHER): the forward
 * and the market columns' weight gradient as GEMMs that gather each row's market window from the feature matrix by
 * its bar (kernels/l1_gather_device.cuh; Hopper warpgroup MMA, so sm_90a GPUs only: H100, H200).
 *
 *   fh_l1g_setup       once, outside any capture: checks the GPU and the shapes, encodes the TMA maps of W (the
 *                      paired layout's w1s: [8 account | 56 zeros | the window]) and of dH (the layer's input
 *                      gradient, dw_rows rows), allocates the weight gradient's split partials. Leaves p->on false
 *                      with the reason in p->why when the path cannot run (no error: the caller keeps its block).
 *   fh_launch_l1g_fwd  Y (M rows, ldy) = relu(X W^T + b) in bf16, X's row r = [acc[r] | zeros | window of bar[r]],
 *                      and the ReLU bit mask of rows < mask_rows (cuBLASLt's RELU_AUX layout) when mask is set
 *   fh_launch_l1g_dw   dW (N rows of window F columns, ld ldw, fp32, `=`) = dH^T Xm over the M = dw_rows samples,
 *                      Xm's row j the window of bar[j]; the splits' partials summed in split order (deterministic)
 *
 * Graph-capturable after the setup; nothing synchronises the host. Bars outside [window-1, n_bars-1] are clamped.
 */
#ifndef FH_L1_GATHER_CUH
#define FH_L1_GATHER_CUH

#include <cuda.h>

#include "cuda_common.cuh"

struct fh_l1g_fwd_args {
  const __nv_bfloat16* feat; /* (n_bars, F) bf16 feature matrix */
  const int32_t* bar;        /* (M) each row's bar t; nullptr: the rows come from blk */
  const __nv_bfloat16* acc;  /* (M, 8) account features (with bar) */
  const __nv_bfloat16* blk;  /* materialised rows (without bar): the account block at 0, the window at 64 */
  int64_t blk_ld;
  const __nv_bfloat16* W;    /* (N, K): only its address for the zero-byte copies; the slices come by TMA */
  const __nv_bfloat16* bias; /* (N) */
  __nv_bfloat16* Y;          /* (M, ldy) */
  int64_t ldy;
  uint32_t* mask;            /* optional ReLU bits of rows < mask_rows, mask_ld bits a row (a multiple of 128 >= N) */
  int64_t mask_ld;
  int32_t mask_rows;
  int32_t M, N, K;           /* K = 64 + window F */
  int32_t F, window;
  int64_t n_bars;
};

struct fh_l1g_dw_args {
  const __nv_bfloat16* feat; /* (n_bars, F) */
  const int32_t* bar;        /* (M) */
  float* part;               /* (splits, N, window F) fp32 partials */
  int32_t M, N, F, window, splits;
  int64_t n_bars;
};

/* plain data (zero-initialised = off; the nets that hold one are memset) */
struct fh_l1g_plan {
  bool on;
  char why[192];
  int variant;              /* 1 persistent blocks; 2, 3 persistent clusters of two, four (W slices by TMA multicast) */
  CUtensorMap wmap;         /* W (N, K), boxes of 64 columns x 256 / cluster size rows */
  CUtensorMap hmap;         /* dH (dw_rows, N), boxes of 64 x 64 */
  fh_l1g_fwd_args fwd;      /* the launches' arguments as far as the setup knows them (feature matrix, W, shapes) */
  fh_l1g_dw_args dw;        /* (and the split count, the partials: (splits, N, window F) fp32; M = dw_rows) */
  int32_t sms, clusters;    /* clusters: how many of the variant's can be resident at once */
  bool dw_swap;             /* the weight gradient's tile transposed (fh_l1g_dw_kernel<true>; FH_L1G_DW_SWAP=1) */
};

fh_status fh_l1g_setup(fh_l1g_plan* p, int variant, const fh_bf16* feat, int64_t n_bars, int32_t F, int32_t window,
                       const fh_bf16* W, int32_t N, int32_t K, const fh_bf16* dH, int32_t dw_rows);
void fh_l1g_free(fh_l1g_plan* p);
/* a row-major (rows, cols) bf16 matrix as a 2-D tensor map of box_cols x box_rows boxes with the 128-byte swizzle
 * (cuTensorMapEncodeTiled through the runtime's driver entry point); false when it cannot be encoded */
bool fh_l1g_encode_2d(CUtensorMap* map, const void* base, int64_t rows, int64_t cols, int box_cols, int box_rows);
fh_status fh_launch_l1g_fwd(const fh_l1g_plan& p, const int32_t* bar, const fh_bf16* acc, const fh_bf16* bias,
                            fh_bf16* Y, int64_t ldy, int32_t M, uint32_t* mask, int64_t mask_ld, int32_t mask_rows,
                            cudaStream_t s);
fh_status fh_launch_l1g_dw(const fh_l1g_plan& p, const int32_t* bar, int32_t M, float* dW, int64_t ldw,
                           cudaStream_t s);
/* The forward with arguments given whole (the probe's variants: rows from a materialised block too), launched as
 * the plan's variant; no checks beyond the launch's. */
fh_status fh_l1g_launch_fwd_args(const fh_l1g_plan& p, const fh_l1g_fwd_args& a, cudaStream_t s);

#endif /* FH_L1_GATHER_CUH */
