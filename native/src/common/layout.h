/*
 * layout.h — the flat parameter layout of the BDQ network (DESIGN §5), shared by both backends so
 * parameters, gradients, Adam moments and checkpoints are one float32 vector each, carved by offsets.
 *
 * Weights are (out, in) row-major, y = x W^T + b. Order (every block starts at a multiple of 64 floats):
 *   W1 (h1, D)          b1 (h1)
 *   W2 (h2, h1)         b2 (h2)
 *   WH ((1+nb)*hh, h2)  bH ((1+nb)*hh)        first layer of all heads: value first, then branch 0..nb-1
 *   for head k = 0 (value), 1..nb (branch k-1):
 *     WO_k (pad8(out_k), hh)  bO_k (pad8(out_k))   out_value = atoms, out_branch_d = n_d * atoms;
 *                                                  rows out_k..pad8(out_k)-1 are zero and stay zero
 */
#ifndef FOXHUNT_NATIVE_LAYOUT_H
#define FOXHUNT_NATIVE_LAYOUT_H

#include <math.h>
#include <stdint.h>

#include "philox.cuh"

#define FH_LAYOUT_MAX_HEADS 4 /* value + FH_MAX_BRANCHES */

struct fh_layout {
  int32_t D, h1, h2, hh, atoms, n_branches;
  int32_t n_heads;                           /* 1 + n_branches */
  int32_t branch_sizes[FH_LAYOUT_MAX_HEADS - 1];
  int32_t out[FH_LAYOUT_MAX_HEADS];          /* real output rows of head k */
  int32_t out_pad[FH_LAYOUT_MAX_HEADS];      /* pad8(out[k]) */
  int64_t W1, b1, W2, b2, WH, bH;            /* float offsets */
  int64_t WO[FH_LAYOUT_MAX_HEADS], bO[FH_LAYOUT_MAX_HEADS];
  int64_t total;                             /* floats in one parameter copy */
};

static inline int64_t fh_align64(int64_t n) { return (n + 63) / 64 * 64; }
static inline int32_t fh_pad8(int32_t n) { return (n + 7) / 8 * 8; }

/* Fill the layout; returns 0 on success, -1 when a size is out of range (non-positive, nb > 3). */
static inline int fh_layout_make(fh_layout* L, int32_t D, int32_t h1, int32_t h2, int32_t hh, int32_t atoms,
                                 int32_t n_branches, const int32_t* branch_sizes) {
  if (D <= 0 || h1 <= 0 || h2 <= 0 || hh <= 0 || atoms <= 0 || n_branches <= 0 ||
      n_branches > FH_LAYOUT_MAX_HEADS - 1)
    return -1;
  L->D = D;
  L->h1 = h1;
  L->h2 = h2;
  L->hh = hh;
  L->atoms = atoms;
  L->n_branches = n_branches;
  L->n_heads = 1 + n_branches;
  for (int d = 0; d < FH_LAYOUT_MAX_HEADS - 1; ++d) L->branch_sizes[d] = d < n_branches ? branch_sizes[d] : 0;
  for (int k = 0; k < FH_LAYOUT_MAX_HEADS; ++k) {
    L->out[k] = 0;
    L->out_pad[k] = 0;
    L->WO[k] = 0;
    L->bO[k] = 0;
  }
  int64_t off = 0;
  L->W1 = off; off = fh_align64(off + (int64_t)h1 * D);
  L->b1 = off; off = fh_align64(off + h1);
  L->W2 = off; off = fh_align64(off + (int64_t)h2 * h1);
  L->b2 = off; off = fh_align64(off + h2);
  L->WH = off; off = fh_align64(off + (int64_t)L->n_heads * hh * h2);
  L->bH = off; off = fh_align64(off + (int64_t)L->n_heads * hh);
  for (int k = 0; k < L->n_heads; ++k) {
    if (k > 0 && branch_sizes[k - 1] <= 0) return -1;
    L->out[k] = k == 0 ? atoms : branch_sizes[k - 1] * atoms;
    L->out_pad[k] = fh_pad8(L->out[k]);
    L->WO[k] = off; off = fh_align64(off + (int64_t)L->out_pad[k] * hh);
    L->bO[k] = off; off = fh_align64(off + L->out_pad[k]);
  }
  L->total = off;
  return 0;
}

/* Fan-in of the layer a parameter belongs to (for init); 0 for biases and pad rows (init 0). */
static inline int32_t fh_layout_fan_in(const fh_layout* L, int64_t i) {
  if (i >= L->W1 && i < L->W1 + (int64_t)L->h1 * L->D) return L->D;
  if (i >= L->W2 && i < L->W2 + (int64_t)L->h2 * L->h1) return L->h1;
  if (i >= L->WH && i < L->WH + (int64_t)L->n_heads * L->hh * L->h2) return L->h2;
  for (int k = 0; k < L->n_heads; ++k)
    if (i >= L->WO[k] && i < L->WO[k] + (int64_t)L->out[k] * L->hh) return L->hh;
  return 0;
}

/* Initial value of parameter i (Philox purpose INIT, a = i/4, b = 0, word i%4): uniform in
 * +-sqrt(3/fan_in) for weights (unit-variance-preserving for ReLU-free fan-in), 0 for biases and pads. */
static inline float fh_layout_init_value(const fh_layout* L, uint64_t seed, int64_t i) {
  const int32_t fan_in = fh_layout_fan_in(L, i);
  if (fan_in == 0) return 0.0f;
  uint32_t w[4];
  fh_philox(seed, (uint32_t)(i / 4), 0, FH_PURPOSE_INIT, w);
  const double u = (double)fh_u01(w[i % 4]) * 2.0 - 1.0;
  return (float)(u * sqrt(3.0 / (double)fan_in));
}

#endif /* FOXHUNT_NATIVE_LAYOUT_H */
