/*
 * p1.cuh — the first layer's market part per bar (DESIGN §5): an observation row is the market window of
 * its bar (W*F columns, fixed by the bar) and 8 account features, so for weights that stay fixed,
 *   x W1^T + b1 = P1[bar] + b1 + acc W1acc^T     with  P1[bar] = window(bar) W1mkt^T
 * and P1 can be computed once per bar with one GEMM over the market windows (zero account columns) and
 * reused by every row of that bar. The fused evaluation does it for the validation bars with the online
 * net each evaluation; the trainer does it for the target net, which changes only at its hard updates
 * (every K train steps), so target(s')'s first layer becomes a gather instead of a GEMM.
 *
 *   fh_launch_market_windows(m, W, begin, n, D, out, s)   out (n, D) bf16 = the market windows of bars
 *                                                         begin..begin+n-1, account columns 0 (one warp
 *                                                         per row, 16-byte loads where they apply)
 *   fh_launch_layer1_p1(...)                              a1 (B, h1) bf16 = relu(P1[bar_r - bar0] + b1 +
 *                                                         acc_r W1acc^T), acc_r = the 8 account columns of
 *                                                         input row r (bf16, as the GEMM would read them),
 *                                                         b1 / W1 the bf16 shadow the GEMM would read;
 *                                                         fp32 sums, one bf16 rounding. h1 % 8 == 0.
 *   fh_launch_slot_states(bar, account, slot0, n, bars, x, D, s)
 *                                                         the stored states of replay slots slot0..slot0+n-1
 *                                                         as input rows of fh_launch_layer1_p1: bars (n) =
 *                                                         their bars, the account columns D-8..D-1 of x (n, D)
 *                                                         = their account features in bf16 (as the gather
 *                                                         writes them); the market columns are not written
 *
 * The launchers are graph-capturable and synchronise nothing.
 */
#ifndef FH_P1_CUH
#define FH_P1_CUH

#include "cuda_common.cuh"
#include "env.cuh"

fh_status fh_launch_market_windows(const fh_market_view& m, int32_t window, int64_t begin, int64_t n, int32_t D,
                                   fh_bf16* out, cudaStream_t s);

/* bars (B) int32: the row's bar; a bar outside [bar0, bar0 + n_p1) reads the nearest P1 row (the trainer
 * tables every bar a replay row can hold). x: (B, D) input rows (the account features in columns
 * D-8..D-1); w1: (h1, D) bf16 weights, b1: (h1) bf16 bias. */
fh_status fh_launch_layer1_p1(const float* p1, int64_t bar0, int64_t n_p1, const int32_t* bars, const fh_bf16* x,
                              int32_t D, const fh_bf16* w1, const fh_bf16* b1, int32_t h1, int32_t B, fh_bf16* a1,
                              cudaStream_t s);

fh_status fh_launch_slot_states(const int32_t* bar, const float* account, int64_t slot0, int32_t n, int32_t* bars,
                                fh_bf16* x, int32_t D, cudaStream_t s);

#endif /* FH_P1_CUH */
