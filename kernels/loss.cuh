/*
 * loss.cuh — per-sample pieces of the BDQ loss (DESIGN §5), float32.
 *
 *   fh_dueling_combine(V[A], Adv[n*A], n, A, logit[n*A])   logit(a,z) = V(z) + Adv(a,z) - mean_a' Adv(a',z)  (=)
 *   fh_dueling_backward(g[n*A], n, A, dV[A], dAdv[n*A])   dV += sum_a g(a,:); dAdv(a,:) += g(a,:) - mean_a' g(a',:)
 *   fh_softmax(x[n], out[n]) / fh_log_softmax(x[n], out[n])  max-subtracted, sequential sums
 *   fh_expected_q(p[A], A, v_min, v_max)                  sum_z p(z) z  (A == 1: the logit itself)
 *   fh_argmax(x[n])                                        first index of the maximum
 *   fh_ce_grad(logit[A], m[A], A, scale, g[A]) -> CE     CE = -sum m log softmax(logit); g = scale*(p - m)  (=)
 *   fh_huber(d, delta) / fh_huber_grad(d, delta)          0.5 d^2 inside delta, delta(|d| - delta/2) outside
 *
 * Double DQN target selection is fh_argmax over the online net's Q of s' per branch; the BDQ target
 * averages the target net's branch values (atoms: distributions) at those actions, in branch order.
 */
#ifndef FOXHUNT_KERNELS_LOSS_CUH
#define FOXHUNT_KERNELS_LOSS_CUH

#include "hd.cuh"
#include "c51.cuh"

#if !defined(__CUDACC__)
#include <cmath>
#define FH_EXPF std::exp
#define FH_LOGF std::log
#else
#define FH_EXPF expf
#define FH_LOGF logf
#endif

FH_HD void fh_dueling_combine(const float* V, const float* Adv, int32_t n, int32_t A, float* logit) {
  for (int32_t z = 0; z < A; ++z) {
    float sum = 0.0f;
    for (int32_t a = 0; a < n; ++a) sum += Adv[a * A + z];
    const float mean = sum / (float)n;
    for (int32_t a = 0; a < n; ++a) logit[a * A + z] = V[z] + Adv[a * A + z] - mean;
  }
}

/* Backward of the combine: accumulates (+=) into dV and dAdv. */
FH_HD void fh_dueling_backward(const float* g, int32_t n, int32_t A, float* dV, float* dAdv) {
  for (int32_t z = 0; z < A; ++z) {
    float sum = 0.0f;
    for (int32_t a = 0; a < n; ++a) sum += g[a * A + z];
    const float mean = sum / (float)n;
    dV[z] += sum;
    for (int32_t a = 0; a < n; ++a) dAdv[a * A + z] += g[a * A + z] - mean;
  }
}

FH_HD void fh_softmax(const float* x, int32_t n, float* out) {
  float mx = x[0];
  for (int32_t i = 1; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  float sum = 0.0f;
  for (int32_t i = 0; i < n; ++i) {
    out[i] = FH_EXPF(x[i] - mx);
    sum += out[i];
  }
  const float inv = 1.0f / sum;
  for (int32_t i = 0; i < n; ++i) out[i] *= inv;
}

FH_HD void fh_log_softmax(const float* x, int32_t n, float* out) {
  float mx = x[0];
  for (int32_t i = 1; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  float sum = 0.0f;
  for (int32_t i = 0; i < n; ++i) sum += FH_EXPF(x[i] - mx);
  const float lse = mx + FH_LOGF(sum);
  for (int32_t i = 0; i < n; ++i) out[i] = x[i] - lse;
}

/* Q of one action from its logits: A == 1 -> the logit; else the mean of the support under softmax. */
FH_HD float fh_expected_q(const float* logit, int32_t A, float v_min, float v_max) {
  if (A == 1) return logit[0];
  float mx = logit[0];
  for (int32_t i = 1; i < A; ++i) mx = logit[i] > mx ? logit[i] : mx;
  float sum = 0.0f, acc = 0.0f;
  for (int32_t i = 0; i < A; ++i) {
    const float e = FH_EXPF(logit[i] - mx);
    sum += e;
    acc += e * fh_c51_support(A, v_min, v_max, i);
  }
  return acc / sum;
}

FH_HD int32_t fh_argmax(const float* x, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

/* Cross-entropy of target distribution m against softmax(logit); g = scale * (softmax - m) (=).
 * Assumes sum(m) == 1 (a projected distribution). */
FH_HD float fh_ce_grad(const float* logit, const float* m, int32_t A, float scale, float* g) {
  float mx = logit[0];
  for (int32_t i = 1; i < A; ++i) mx = logit[i] > mx ? logit[i] : mx;
  float sum = 0.0f;
  for (int32_t i = 0; i < A; ++i) sum += FH_EXPF(logit[i] - mx);
  const float lse = mx + FH_LOGF(sum);
  float ce = 0.0f;
  for (int32_t i = 0; i < A; ++i) {
    const float logp = logit[i] - lse;
    ce -= m[i] * logp;
    if (g) g[i] = scale * (FH_EXPF(logp) - m[i]);
  }
  return ce;
}

FH_HD float fh_huber(float d, float delta) {
  const float a = d < 0.0f ? -d : d;
  return a <= delta ? 0.5f * d * d : delta * (a - 0.5f * delta);
}

FH_HD float fh_huber_grad(float d, float delta) {
  if (d > delta) return delta;
  if (d < -delta) return -delta;
  return d;
}

#endif /* FOXHUNT_KERNELS_LOSS_CUH */
