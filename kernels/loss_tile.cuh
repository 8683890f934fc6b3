/*
 * loss_tile.cuh — the bf16 mode's C51 loss as a block kernel (kernels/loss_tile.cu): the same loss and
 * gradient as loss.cu's approximate-math register kernel, for bf16 head outputs and gradients with
 * branches of <= 4 actions and <= 64 atoms.
 *
 * fh_launch_c51_loss_tile returns FH_ERR_UNSUPPORTED, launching nothing and setting no error, when the
 * shapes or the row layouts do not fit it (the caller then runs the register kernel).
 */
#ifndef FH_LOSS_TILE_CUH
#define FH_LOSS_TILE_CUH

#include "net_kernels.cuh"

fh_status fh_launch_c51_loss_tile(const fh_heads_view_t<fh_bf16>& on_s, const fh_heads_view_t<fh_bf16>& on_sn,
                                  const fh_heads_view_t<fh_bf16>& tg_sn, const int32_t* act, const float* ret,
                                  const float* disc, const float* weight, int B, float* wloss, float* signal,
                                  const fh_heads_grad<fh_bf16>& grad, cudaStream_t s);

#endif /* FH_LOSS_TILE_CUH */
