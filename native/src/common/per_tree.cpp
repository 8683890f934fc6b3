/* per_tree.cpp — host sum tree and the standalone fh_per_* entry points of foxhunt.h. */
#include "per_tree.h"

#include <math.h>

#include <algorithm>
#include <new>
#include <utility>

#include "foxhunt.h"
#include "per.cuh"

void fh_per_tree::init(int64_t cap) {
  capacity = cap;
  L = 1;
  while (L < cap) L <<= 1;
  tree.assign((size_t)(2 * L), 0.0);
  size = 0;
  max_priority = 1.0f;
}

void fh_per_tree::set(int64_t i, float stored) {
  const double old = tree[L + i];
  if (old > 0.0) --size;
  if (stored > 0.0f) ++size;
  tree[L + i] = (double)stored;
  fh_per_recompute_up(tree.data(), L, i);
}

void fh_per_tree::set_batch(int64_t n, const int64_t* idx, const float* stored) {
  std::vector<std::pair<int64_t, float>> v((size_t)n);
  for (int64_t j = 0; j < n; ++j) v[(size_t)j] = {idx[j], stored[j]};
  std::sort(v.begin(), v.end());
  for (size_t j = 0; j < v.size(); ++j) {
    if (j + 1 < v.size() && v[j + 1].first == v[j].first) continue; /* the last of a run is its max */
    set(v[j].first, v[j].second);
    if (v[j].second > max_priority) max_priority = v[j].second;
  }
}

void fh_per_tree::sample(int32_t n, uint64_t seed, uint64_t draw, float beta, int64_t* idx, float* weight) const {
  const double tot = total();
  std::vector<double> w((size_t)n);
  double wmax = 0.0;
  for (int32_t j = 0; j < n; ++j) {
    uint32_t r[4];
    fh_philox(seed, (uint32_t)j, draw, FH_PURPOSE_SAMPLE, r);
    const double u = fh_per_stratum_u(tot, j, n, r[0]);
    const int64_t i = fh_per_descend(tree.data(), L, u);
    idx[j] = i;
    w[(size_t)j] = fh_per_weight((double)size, tree[L + i], tot, (double)beta);
    if (w[(size_t)j] > wmax) wmax = w[(size_t)j];
  }
  for (int32_t j = 0; j < n; ++j) weight[j] = (float)(w[(size_t)j] / wmax);
}

/* ---- standalone ABI ---- */

struct fh_per {
  fh_per_tree tree;
  float alpha;
  uint64_t seed;
};

extern "C" FH_API fh_status fh_per_create(int64_t capacity, float alpha, uint64_t seed, fh_per** out) {
  if (out == NULL) return FH_ERR_INVALID_ARGUMENT;
  *out = NULL;
  if (capacity < 1 || capacity > ((int64_t)1 << 31) || !(alpha >= 0.0f && alpha <= 10.0f)) return FH_ERR_INVALID_ARGUMENT;
  try {
    fh_per* p = new fh_per();
    p->tree.init(capacity);
    p->alpha = alpha;
    p->seed = seed;
    *out = p;
    return FH_OK;
  } catch (const std::bad_alloc&) {
    return FH_ERR_OUT_OF_MEMORY;
  } catch (...) {
    return FH_ERR_INTERNAL;
  }
}

extern "C" FH_API void fh_per_destroy(fh_per* p) { delete p; }

extern "C" FH_API fh_status fh_per_set(fh_per* p, int64_t n, const int64_t* idx, const float* priority) {
  if (p == NULL || n < 0 || (n > 0 && (idx == NULL || priority == NULL))) return FH_ERR_INVALID_ARGUMENT;
  for (int64_t j = 0; j < n; ++j) {
    if (idx[j] < 0 || idx[j] >= p->tree.capacity) return FH_ERR_INVALID_ARGUMENT;
    if (!(priority[j] >= 0.0f) || !isfinite(priority[j])) return FH_ERR_INVALID_ARGUMENT;
  }
  try {
    std::vector<float> stored((size_t)n);
    for (int64_t j = 0; j < n; ++j)
      stored[(size_t)j] = priority[j] > 0.0f ? (float)pow((double)priority[j], (double)p->alpha) : 0.0f;
    p->tree.set_batch(n, idx, stored.data());
    return FH_OK;
  } catch (const std::bad_alloc&) {
    return FH_ERR_OUT_OF_MEMORY;
  } catch (...) {
    return FH_ERR_INTERNAL;
  }
}

extern "C" FH_API fh_status fh_per_sample(fh_per* p, int32_t n, uint64_t draw, float beta, int64_t* idx, float* weight) {
  if (p == NULL || n < 1 || idx == NULL || weight == NULL || !(beta >= 0.0f && beta <= 1.0f)) return FH_ERR_INVALID_ARGUMENT;
  if (!(p->tree.total() > 0.0)) return FH_ERR_INVALID_ARGUMENT; /* nothing to sample */
  try {
    p->tree.sample(n, p->seed, draw, beta, idx, weight);
    return FH_OK;
  } catch (const std::bad_alloc&) {
    return FH_ERR_OUT_OF_MEMORY;
  } catch (...) {
    return FH_ERR_INTERNAL;
  }
}

extern "C" FH_API fh_status fh_per_total(fh_per* p, double* out) {
  if (p == NULL || out == NULL) return FH_ERR_INVALID_ARGUMENT;
  *out = p->tree.total();
  return FH_OK;
}
