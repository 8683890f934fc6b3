/*
 * per_tree.h — host prioritised-replay sum tree (DESIGN §6) used by the CPU trainer and by the
 * standalone fh_per_* ABI (per_tree.cpp). The math per node/sample is kernels/per.cuh.
 *
 * Leaves hold stored priorities (p^alpha); internal nodes are recomputed from their children after
 * every change, so the sums never drift. `size` counts leaves > 0. Batch updates give a leaf that
 * appears several times the max of its new values (deterministic regardless of order).
 */
#ifndef FOXHUNT_NATIVE_PER_TREE_H
#define FOXHUNT_NATIVE_PER_TREE_H

#include <stdint.h>

#include <vector>

struct fh_per_tree {
  int64_t capacity = 0;
  int64_t L = 1;                 /* leaves, a power of two >= capacity */
  std::vector<double> tree;      /* (2L): root at 1, leaf i at L + i */
  int64_t size = 0;              /* leaves with priority > 0 */
  float max_priority = 1.0f;     /* largest stored priority seen (new transitions get it) */

  void init(int64_t cap);
  double total() const { return tree[1]; }
  float leaf(int64_t i) const { return (float)tree[L + i]; }
  /* Set one stored leaf value and recompute its ancestors. */
  void set(int64_t i, float stored);
  /* Set many stored values; duplicates take the max. Updates max_priority. */
  void set_batch(int64_t n, const int64_t* idx, const float* stored);
  /* Stratified proportional sample of n leaves for (seed, draw); weights (size*P)^-beta / batch max.
   * Requires total() > 0. */
  void sample(int32_t n, uint64_t seed, uint64_t draw, float beta, int64_t* idx, float* weight) const;
};

#endif /* FOXHUNT_NATIVE_PER_TREE_H */
