/*
 * net.cpp — BDQ forward/backward on the CPU (see net.h).
 *
 * Linear layers are y = x W^T + b with W (out, in) row-major. Dot products use 8 fixed partial
 * sums (vectorisable without reassociation, so results are deterministic for any thread count).
 */
#include "net.h"

#include <string.h>

#include "loss.cuh"

namespace {

inline float dot(const float* a, const float* b, int32_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int32_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

inline void axpy(float alpha, const float* x, float* y, int32_t n) {
  for (int32_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

/* Y (B, out; ld ldy) = X (B, in; ld ldx) W^T + bias, optional ReLU. Parallel over rows. */
void linear_fwd(fh_pool& pool, const float* X, int64_t ldx, int32_t B, int32_t in, const float* W, const float* bias,
                int32_t out, float* Y, int64_t ldy, bool relu) {
  pool.run(B, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const float* x = X + b * ldx;
      float* y = Y + b * ldy;
      for (int32_t o = 0; o < out; ++o) {
        const float v = bias[o] + dot(x, W + (int64_t)o * in, in);
        y[o] = relu && v < 0.0f ? 0.0f : v;
      }
    }
  }, (int64_t)in * out);
}

/* dW (out, in) = sum_b dY[b,o] X[b,:], db[o] = sum_b dY[b,o]  (=). Parallel over output units. */
void linear_bwd_w(fh_pool& pool, const float* dY, int64_t ldy, const float* X, int64_t ldx, int32_t B, int32_t in,
                  int32_t out, float* dW, float* db) {
  const int32_t blk = 8;
  const int32_t nblk = (out + blk - 1) / blk;
  pool.run(nblk, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k) {
      const int32_t o0 = (int32_t)k * blk;
      const int32_t o1 = o0 + blk < out ? o0 + blk : out;
      for (int32_t o = o0; o < o1; ++o) {
        memset(dW + (int64_t)o * in, 0, sizeof(float) * (size_t)in);
        db[o] = 0.0f;
      }
      for (int32_t b = 0; b < B; ++b) {
        const float* x = X + (int64_t)b * ldx;
        const float* dy = dY + (int64_t)b * ldy;
        for (int32_t o = o0; o < o1; ++o) {
          const float g = dy[o];
          if (g == 0.0f) continue;
          db[o] += g;
          axpy(g, x, dW + (int64_t)o * in, in);
        }
      }
    }
  }, (int64_t)B * in * blk);
}

/* dX (B, in; ld ldx) = dY (B, out) W  (=), then dX *= (act > 0) when act is given. Parallel over rows. */
void linear_bwd_x(fh_pool& pool, const float* dY, int64_t ldy, const float* W, int32_t B, int32_t in, int32_t out,
                  float* dX, int64_t ldx, const float* act, int64_t ld_act) {
  pool.run(B, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      float* dx = dX + b * ldx;
      memset(dx, 0, sizeof(float) * (size_t)in);
      const float* dy = dY + b * ldy;
      for (int32_t o = 0; o < out; ++o)
        if (dy[o] != 0.0f) axpy(dy[o], W + (int64_t)o * in, dx, in);
      if (act) {
        const float* a = act + b * ld_act;
        for (int32_t i = 0; i < in; ++i)
          if (!(a[i] > 0.0f)) dx[i] = 0.0f;
      }
    }
  }, (int64_t)in * out);
}

}  // namespace

fh_net::fh_net(const fh_layout& L, float v_min, float v_max) : L_(L), v_min_(v_min), v_max_(v_max) {
  for (int d = 0; d < L.n_branches; ++d) {
    loff_[d] = NA_;
    NA_ += L.branch_sizes[d] * L.atoms;
    nact_ += L.branch_sizes[d];
  }
  for (int k = 0; k < L.n_heads; ++k) {
    ooff_[k] = OP_;
    OP_ += L.out_pad[k];
  }
}

void fh_net::forward(fh_pool& pool, const float* P, const float* X, int32_t B, fh_net_cache& c) const {
  const fh_layout& L = L_;
  const int32_t nhh = L.n_heads * L.hh;
  c.B = B;
  c.h1.resize((size_t)B * L.h1);
  c.h2.resize((size_t)B * L.h2);
  c.hh.resize((size_t)B * nhh);
  c.out.resize((size_t)B * OP_);
  c.logits.resize((size_t)B * NA_);
  linear_fwd(pool, X, L.D, B, L.D, P + L.W1, P + L.b1, L.h1, c.h1.data(), L.h1, true);
  linear_fwd(pool, c.h1.data(), L.h1, B, L.h1, P + L.W2, P + L.b2, L.h2, c.h2.data(), L.h2, true);
  linear_fwd(pool, c.h2.data(), L.h2, B, L.h2, P + L.WH, P + L.bH, nhh, c.hh.data(), nhh, true);
  for (int k = 0; k < L.n_heads; ++k)
    linear_fwd(pool, c.hh.data() + (int64_t)k * L.hh, nhh, B, L.hh, P + L.WO[k], P + L.bO[k], L.out[k],
               c.out.data() + ooff_[k], OP_, false);
  const int32_t A = L.atoms;
  pool.run(B, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const float* o = c.out.data() + b * OP_;
      for (int d = 0; d < L.n_branches; ++d)
        fh_dueling_combine(o + ooff_[0], o + ooff_[d + 1], L.branch_sizes[d], A, c.logits.data() + b * NA_ + loff_[d]);
    }
  }, 2 * NA_);
}

void fh_net::backward(fh_pool& pool, const float* P, const float* X, const fh_net_cache& c, const float* dlogits,
                      float* grad) const {
  const fh_layout& L = L_;
  const int32_t B = c.B;
  const int32_t nhh = L.n_heads * L.hh;
  const int32_t A = L.atoms;
  memset(grad, 0, sizeof(float) * (size_t)L.total);
  dout_.assign((size_t)B * OP_, 0.0f);
  dhh_.resize((size_t)B * nhh);
  dh2_.resize((size_t)B * L.h2);
  dh1_.resize((size_t)B * L.h1);
  pool.run(B, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      float* g = dout_.data() + b * OP_;
      for (int d = 0; d < L.n_branches; ++d)
        fh_dueling_backward(dlogits + b * NA_ + loff_[d], L.branch_sizes[d], A, g + ooff_[0], g + ooff_[d + 1]);
    }
  }, 2 * NA_);
  for (int k = 0; k < L.n_heads; ++k) {
    linear_bwd_w(pool, dout_.data() + ooff_[k], OP_, c.hh.data() + (int64_t)k * L.hh, nhh, B, L.hh, L.out[k],
                 grad + L.WO[k], grad + L.bO[k]);
    linear_bwd_x(pool, dout_.data() + ooff_[k], OP_, P + L.WO[k], B, L.hh, L.out[k], dhh_.data() + (int64_t)k * L.hh,
                 nhh, c.hh.data() + (int64_t)k * L.hh, nhh);
  }
  linear_bwd_w(pool, dhh_.data(), nhh, c.h2.data(), L.h2, B, L.h2, nhh, grad + L.WH, grad + L.bH);
  linear_bwd_x(pool, dhh_.data(), nhh, P + L.WH, B, L.h2, nhh, dh2_.data(), L.h2, c.h2.data(), L.h2);
  linear_bwd_w(pool, dh2_.data(), L.h2, c.h1.data(), L.h1, B, L.h1, L.h2, grad + L.W2, grad + L.b2);
  linear_bwd_x(pool, dh2_.data(), L.h2, P + L.W2, B, L.h1, L.h2, dh1_.data(), L.h1, c.h1.data(), L.h1);
  linear_bwd_w(pool, dh1_.data(), L.h1, X, L.D, B, L.D, L.h1, grad + L.W1, grad + L.b1);
}

void fh_net::q_values(const fh_net_cache& c, int32_t b, float* q) const {
  const int32_t A = L_.atoms;
  int32_t j = 0;
  for (int d = 0; d < L_.n_branches; ++d)
    for (int32_t a = 0; a < L_.branch_sizes[d]; ++a)
      q[j++] = fh_expected_q(c.logits.data() + (int64_t)b * NA_ + loff_[d] + (int64_t)a * A, A, v_min_, v_max_);
}
