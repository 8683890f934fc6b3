/*
 * net.h — the BDQ network on the CPU: forward and backward in fp32 on the flat parameter layout
 * (layout.h), batched, parallel over rows (forward, dX) or output units (dW) so results do not
 * depend on the thread count.
 *
 *   forward(P, X (B, D), B, cache)       fills cache.h1 (B,h1), h2 (B,h2), hh (B,nh*hh),
 *                                        out (B, OP) head outputs, logits (B, NA) after the dueling
 *                                        combine; branch d's logits are (n_d, A) at offset
 *                                        logit_off[d], NA = sum_d n_d*A
 *   backward(P, X, cache, dlogits (B,NA), grad)   grad (n_params) = d(loss)/dP  (=, pad rows 0)
 *   q_values(cache, b, q)                expected Q of every action of sample b, branch-major
 */
#ifndef FOXHUNT_CPU_NET_H
#define FOXHUNT_CPU_NET_H

#include <stdint.h>

#include <vector>

#include "layout.h"
#include "pool.h"

struct fh_net_cache {
  int32_t B = 0;
  std::vector<float> h1, h2, hh, out, logits;
};

class fh_net {
 public:
  fh_net(const fh_layout& L, float v_min, float v_max);
  const fh_layout& layout() const { return L_; }
  int32_t NA() const { return NA_; }       /* logits per sample */
  int32_t OP() const { return OP_; }       /* head outputs per sample (padded) */
  int32_t n_actions() const { return nact_; } /* sum of branch sizes */
  int32_t logit_off(int d) const { return loff_[d]; }

  void forward(fh_pool& pool, const float* P, const float* X, int32_t B, fh_net_cache& c) const;
  void backward(fh_pool& pool, const float* P, const float* X, const fh_net_cache& c, const float* dlogits,
                float* grad) const;
  /* Expected Q of all actions of sample b: q[sum n_d], branch 0 actions first. */
  void q_values(const fh_net_cache& c, int32_t b, float* q) const;

 private:
  fh_layout L_;
  float v_min_, v_max_;
  int32_t NA_ = 0, OP_ = 0, nact_ = 0;
  int32_t loff_[FH_LAYOUT_MAX_HEADS - 1] = {0, 0, 0};
  int32_t ooff_[FH_LAYOUT_MAX_HEADS] = {0, 0, 0, 0};
  mutable std::vector<float> dout_, dhh_, dh2_, dh1_;
};

#endif /* FOXHUNT_CPU_NET_H */
