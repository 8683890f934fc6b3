/*
 * graph_hoist.h — takes cuBLASLt's 4-byte memsets off a captured train step's critical path.
 *
 * A cuBLASLt GEMM with the RELU_AUX epilogue (the ReLU bit masks, net.h relu_masks) queues a small memset before its
 * kernel. Captured into a graph it becomes a node between two kernels of the forward's chain: the previous kernel,
 * then the memset, then the GEMM, each edge a launch latency (bench/RESULTS.md, twenty-first session: 3 of them a step,
 * ~4-12 µs each with the trace on). The same holds for the sampler's minimum-probability reset (kernels/per.cu).
 *
 * fh_graph_hoist_memsets moves each such memset one level up: a memset node M whose destination lies in one of the
 * given ranges, with exactly one dependency X and only kernel nodes depending on it, is made to depend on X's
 * dependencies instead of on X, and each of M's dependents gets X as a dependency of its own. M then runs beside X
 * instead of between X and its GEMM. The caller names only ranges that X and whatever runs beside X never touch
 * (net.cu gives each masked forward GEMM of pass 0 a workspace of its own for that reason), so the bits stay the same.
 * A memset without a dependency (the graph's first node) stays where it is.
 */
#ifndef FH_CUDA_GRAPH_HOIST_H
#define FH_CUDA_GRAPH_HOIST_H

#include <cuda_runtime.h>
#include <stddef.h>
#include "foxhunt.h"

struct fh_dev_range {
  const void* base; /* device address; nullptr: unused */
  size_t bytes;
};

struct fh_hoist_count {
  int memsets;  /* memset nodes seen in the graph */
  int hoisted;  /* of those, moved */
};

/* Hoists the memsets of g that write inside one of the n ranges (see above); adds to *count. */
fh_status fh_graph_hoist_memsets(cudaGraph_t g, const fh_dev_range* ranges, int n, fh_hoist_count* count);

#endif
