/* graph_hoist.cu — see graph_hoist.h */
#include "graph_hoist.h"

#include <vector>

#include "cuda_common.cuh"

static bool inside(const fh_dev_range* r, int n, uintptr_t lo, uintptr_t hi) {
  for (int i = 0; i < n; ++i) {
    const uintptr_t b = reinterpret_cast<uintptr_t>(r[i].base);
    if (b && lo >= b && hi <= b + r[i].bytes) return true;
  }
  return false;
}

static fh_status node_list(cudaGraphNode_t node, bool deps, std::vector<cudaGraphNode_t>* out) {
  size_t n = 0;
  if (deps)
    FH_CUDA_TRY(cudaGraphNodeGetDependencies(node, nullptr, nullptr, &n));
  else
    FH_CUDA_TRY(cudaGraphNodeGetDependentNodes(node, nullptr, nullptr, &n));
  out->assign(n, nullptr);
  if (n == 0) return FH_OK;
  if (deps)
    FH_CUDA_TRY(cudaGraphNodeGetDependencies(node, out->data(), nullptr, &n));
  else
    FH_CUDA_TRY(cudaGraphNodeGetDependentNodes(node, out->data(), nullptr, &n));
  out->resize(n);
  return FH_OK;
}

static fh_status is_kernel(cudaGraphNode_t node, bool* yes) {
  cudaGraphNodeType t;
  FH_CUDA_TRY(cudaGraphNodeGetType(node, &t));
  *yes = t == cudaGraphNodeTypeKernel;
  return FH_OK;
}

fh_status fh_graph_hoist_memsets(cudaGraph_t g, const fh_dev_range* ranges, int n_ranges, fh_hoist_count* count) {
  if (!g || !count || (n_ranges > 0 && !ranges)) return FH_ERR_INVALID_ARGUMENT;
  size_t n = 0;
  FH_CUDA_TRY(cudaGraphGetNodes(g, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  if (n) FH_CUDA_TRY(cudaGraphGetNodes(g, nodes.data(), &n));
  std::vector<cudaGraphNode_t> dm, gs, dx, dg;
  for (cudaGraphNode_t m : nodes) {
    cudaGraphNodeType type;
    FH_CUDA_TRY(cudaGraphNodeGetType(m, &type));
    if (type != cudaGraphNodeTypeMemset) continue;
    ++count->memsets;
    cudaMemsetParams p{};
    FH_CUDA_TRY(cudaGraphMemsetNodeGetParams(m, &p));
    const uintptr_t lo = reinterpret_cast<uintptr_t>(p.dst);
    const size_t rows = p.height ? p.height : 1;
    const uintptr_t hi = lo + (rows - 1) * p.pitch + (size_t)p.width * p.elementSize;
    if (!inside(ranges, n_ranges, lo, hi)) continue;
    /* M: one kernel X before it, only kernels after it */
    FH_TRY(node_list(m, true, &dm));
    if (dm.size() != 1) continue;
    const cudaGraphNode_t x = dm[0];
    bool ok = false;
    FH_TRY(is_kernel(x, &ok));
    if (!ok) continue;
    FH_TRY(node_list(m, false, &gs));
    if (gs.empty()) continue;
    for (cudaGraphNode_t gn : gs) {
      FH_TRY(is_kernel(gn, &ok));
      if (!ok) break;
    }
    if (!ok) continue;
    FH_TRY(node_list(x, true, &dx));
    /* each dependent of M waits for X itself (unless it already does), then M leaves X for X's dependencies */
    for (cudaGraphNode_t gn : gs) {
      FH_TRY(node_list(gn, true, &dg));
      bool has = false;
      for (cudaGraphNode_t d : dg) has = has || d == x;
      if (!has) FH_CUDA_TRY(cudaGraphAddDependencies(g, &x, &gn, nullptr, 1));
    }
    FH_CUDA_TRY(cudaGraphRemoveDependencies(g, &x, &m, nullptr, 1));
    for (cudaGraphNode_t d : dx) FH_CUDA_TRY(cudaGraphAddDependencies(g, &d, &m, nullptr, 1));
    ++count->hoisted;
  }
  return FH_OK;
}
