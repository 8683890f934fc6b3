/*
 * per.cu — prioritised replay on the device (DESIGN §6; layout in native/src/cuda/replay.h).
 *
 *   tree_rebuild      padded/8192 blocks x 256: leaves -> l1, cnt1 (32 leaves each) -> l2, cnt2 (=);
 *                     the last block to finish sums l2 -> l3 -> total, count (=). Drift-free: every
 *                     level is recomputed from its children each time; fixed summation order
 *                     (deterministic). <full>: every l1 node from its leaves (checkpoint load,
 *                     collect_end, tree_set). <partial> (the priority update): only the l1 nodes
 *                     flagged in `dirty` (by leaves_zero) from their leaves, clearing the flag; every
 *                     other l1 node keeps l1/cnt1 as the last rebuild computed them from the same,
 *                     unchanged leaves; l2 up exactly as <full>. Same code and launch for both, so the
 *                     tree is bit for bit what a full rebuild gives (FH_PER_FULL_REBUILD=1 keeps <full>)
 *   tree_set          leaf[idx] = fh_per_priority(p, 0, alpha) (tests), then rebuild <full>
 *   per_sample        one warp per sample: u = fh_per_stratum_u(total, j, B, philox(seed, j, step,
 *                     SAMPLE)[0]), 4-level descent with warp prefix scans (never lands on a zero
 *                     leaf); min leaf of the batch by atomicMin on float bits (order-independent), one
 *                     per block after the block's own minimum (FH_PER_REDUCE=0: one per sample).
 *                     step = *train_step + step_offset (the offset lets the trainer sample step k+1's
 *                     batch before step k's Adam bumps the counter; beta uses the same step)
 *   per_weights       weight = fh_per_weight(size, leaf, total, beta) / fh_per_weight(size, min, ...); with the
 *                     early zero (the trainer's, fh_launch_per_sample's zero) also the priority update's first part: the sampled
 *                     leaves zeroed and flagged, the leaf values passed from per_sample in `weight`
 *   priority_update   zero the sampled leaves (flagging their l1 nodes dirty; unless the sampler did), then atomicMax of
 *                     (signal+eps)^alpha on the float bits: duplicates keep the max whatever the order
 *                     (and flag the same node: deduplicated); *max_priority likewise, one atomic per
 *                     block after the block's maximum; rebuild <partial>
 *
 * Positive floats compare like their bit patterns as unsigned ints, which makes the atomics exact.
 */
#include "../native/src/cuda/replay.h" /* first: foxhunt.h before the math headers */
#include "per.cuh"

#define FH_REBUILD_THREADS 256 /* one l1 node per thread, one l2 node per warp: 8192 leaves per block */
#define FH_SAMPLE_WARPS 8
#define FH_SMALL_BLOCK 256

/* ---------------------------------------------------------------- rebuild */

/* kPartial: l1 node k is recomputed from its leaves only when dirty[k] (then dirty[k] = 0); otherwise
 * l1[k] and cnt1[k] are what the last rebuild stored for the same leaves. Everything else is shared. */
template <bool kPartial>
static __global__ void __launch_bounds__(FH_REBUILD_THREADS)
tree_rebuild_kernel(const float* __restrict__ leaf, double* __restrict__ l1, uint8_t* __restrict__ cnt1,
                    uint8_t* __restrict__ dirty, double* l2, int32_t* cnt2, double* l3, int64_t* cnt3, double* total,
                    int64_t* count, unsigned int* ticket, int32_t n_top) {
  __shared__ double s_sum[FH_REBUILD_THREADS / 32];
  __shared__ int64_t s_cnt[FH_REBUILD_THREADS / 32];
  __shared__ bool s_last;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int nw = FH_REBUILD_THREADS / 32;
  const int64_t node1 = (int64_t)blockIdx.x * FH_REBUILD_THREADS + tid;
  double sum = 0.0;
  int32_t cnt = 0;
  bool from_leaves = true;
  if (kPartial) { /* the stored node is loaded alongside its flag (no second round trip when clean) */
    const uint8_t d = dirty[node1];
    const double kept = l1[node1];
    const int32_t kept_cnt = cnt1[node1];
    from_leaves = d != 0;
    if (!from_leaves) {
      sum = kept;
      cnt = kept_cnt;
    }
  }
  if (from_leaves) {
    /* l1: 32 consecutive leaves, 8 x 16-byte loads, summed in order */
    const float4* src = reinterpret_cast<const float4*>(leaf + node1 * FH_TREE_FANOUT);
    float4 v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = __ldcg(src + k);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      sum += (double)v[k].x; sum += (double)v[k].y; sum += (double)v[k].z; sum += (double)v[k].w;
      cnt += (v[k].x > 0.0f) + (v[k].y > 0.0f) + (v[k].z > 0.0f) + (v[k].w > 0.0f);
    }
    l1[node1] = sum;
    cnt1[node1] = (uint8_t)cnt;
    if (kPartial) dirty[node1] = 0; /* ready for the next update (graph replays) */
  }
  /* l2: a warp's 32 l1 nodes (fixed butterfly order) */
  for (int o = 16; o > 0; o >>= 1) {
    sum += __shfl_xor_sync(0xffffffffu, sum, o);
    cnt += __shfl_xor_sync(0xffffffffu, cnt, o);
  }
  if (lane == 0) {
    const int64_t node2 = (int64_t)blockIdx.x * nw + warp;
    l2[node2] = sum;
    cnt2[node2] = cnt;
    __threadfence(); /* visible to the last block before the ticket below */
  }
  __syncthreads();
  if (tid == 0) {
    const unsigned int t = atomicAdd(ticket, 1u);
    s_last = (t == gridDim.x - 1);
  }
  __syncthreads();
  if (!s_last) return;
  /* last block: l3 from l2 (one warp per l3 node), then total and count over l3; fixed orders */
  __threadfence();
  for (int32_t k3 = warp; k3 < n_top; k3 += nw) {
    double s3 = __ldcg(l2 + (int64_t)k3 * FH_TREE_FANOUT + lane);
    int64_t c3 = __ldcg(cnt2 + (int64_t)k3 * FH_TREE_FANOUT + lane);
    for (int o = 16; o > 0; o >>= 1) {
      s3 += __shfl_xor_sync(0xffffffffu, s3, o);
      c3 += __shfl_xor_sync(0xffffffffu, c3, o);
    }
    if (lane == 0) {
      l3[k3] = s3;
      cnt3[k3] = c3;
    }
  }
  __syncthreads(); /* l3 written by this block: visible to it after the barrier */
  double ts = 0.0;
  int64_t tc = 0;
  for (int32_t i = tid; i < n_top; i += FH_REBUILD_THREADS) {
    ts += l3[i];
    tc += cnt3[i];
  }
  for (int o = 16; o > 0; o >>= 1) {
    ts += __shfl_xor_sync(0xffffffffu, ts, o);
    tc += __shfl_xor_sync(0xffffffffu, tc, o);
  }
  if (lane == 0) {
    s_sum[warp] = ts;
    s_cnt[warp] = tc;
  }
  __syncthreads();
  if (tid == 0) {
    double t_sum = 0.0;
    int64_t t_cnt = 0;
    for (int w = 0; w < nw; ++w) {
      t_sum += s_sum[w];
      t_cnt += s_cnt[w];
    }
    *total = t_sum;
    *count = t_cnt;
    *ticket = 0u; /* ready for the next rebuild (graph replays) */
  }
}

static __global__ void tree_set_kernel(float* leaf, int64_t capacity, int32_t n, const int64_t* __restrict__ idx,
                                       const float* __restrict__ priority, float alpha) {
  const int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int64_t k = idx[i];
  if (k < 0 || k >= capacity) return;
  const float p = priority[i];
  leaf[k] = p > 0.0f ? fh_per_priority(p, 0.0f, alpha) : 0.0f;
}

/* ---------------------------------------------------------------- sampling */

/* Within one group of 32 children (values val per lane, 0 beyond the end), find the child where
 * the prefix passes u: the first lane with val > 0 and u < prefix_incl. Returns the lane, or -1 with
 * *sum = the group's sum (u then moves on) and *last_nz = last lane with val > 0 (or -1). *excl = the
 * lane's exclusive prefix (fh_child_excl reads the chosen one). */
template <typename V>
__device__ __forceinline__ int fh_pick_child(V val, double u, int lane, double* sum, int* last_nz, double* excl) {
  double incl = (double)val;
  for (int o = 1; o < 32; o <<= 1) {
    const double y = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += y;
  }
  *excl = incl - (double)val;
  const unsigned hit = __ballot_sync(0xffffffffu, val > (V)0 && u < incl);
  const unsigned nz = __ballot_sync(0xffffffffu, val > (V)0);
  *sum = __shfl_sync(0xffffffffu, incl, 31);
  *last_nz = nz ? 31 - __clz(nz) : -1;
  if (hit) {
    const int l = __ffs(hit) - 1;
    return l;
  }
  return -1;
}

/* u relative to the chosen child: u - exclusive prefix of that child (excl: fh_pick_child's). */
__device__ __forceinline__ double fh_child_excl(double excl, int chosen) {
  return __shfl_sync(0xffffffffu, excl, chosen);
}

/* One level below node `k`: children[k*32 + lane]. Returns the child index and updates u. */
template <typename V>
__device__ __forceinline__ int64_t fh_descend_level(const V* __restrict__ children, int64_t k, double* u, int lane) {
  const V val = children[k * FH_TREE_FANOUT + lane];
  double sum;
  int last_nz;
  double lane_excl;
  int c = fh_pick_child(val, *u, lane, &sum, &last_nz, &lane_excl);
  if (c < 0) c = last_nz >= 0 ? last_nz : 0; /* rounding: u >= sum of the children */
  const double excl = fh_child_excl(lane_excl, c);
  const double cv = __shfl_sync(0xffffffffu, (double)val, c);
  double nu = *u - excl;
  if (nu >= cv) nu = cv * (1.0 - 1e-12); /* keep u inside the chosen child */
  if (nu < 0.0) nu = 0.0;
  *u = nu;
  return k * FH_TREE_FANOUT + c;
}

/* Sample j of the batch (one warp): its slot and probability; returns the chosen leaf's bits (lane 0's). */
__device__ __forceinline__ unsigned int fh_sample_one(const fh_cuda_sumtree& t, int32_t B, uint64_t seed,
                                                      const int64_t* __restrict__ train_step, int64_t step_offset,
                                                      int32_t* __restrict__ slot, double* __restrict__ prob,
                                                      int32_t j, int lane) {
  const double total = *t.total;
  double u = 0.0;
  if (lane == 0) {
    uint32_t w[4];
    fh_philox(seed, (uint32_t)j, (uint64_t)(*train_step + step_offset), FH_PURPOSE_SAMPLE, w);
    u = fh_per_stratum_u(total, j, B, w[0]);
  }
  u = __shfl_sync(0xffffffffu, u, 0);
  /* top: scan l3 in groups of 32 */
  int64_t k3 = -1, last_k3 = -1;
  double carry = 0.0;
  for (int32_t base = 0; base < t.n_top; base += 32) {
    const double val = base + lane < t.n_top ? t.l3[base + lane] : 0.0;
    double sum;
    int last_nz;
    double lane_excl;
    const int c = fh_pick_child(val, u - carry, lane, &sum, &last_nz, &lane_excl);
    if (last_nz >= 0) last_k3 = base + last_nz;
    if (c >= 0) {
      k3 = base + c;
      u = (u - carry) - fh_child_excl(lane_excl, c);
      break;
    }
    carry += sum;
  }
  if (k3 < 0) { /* rounding at the very top: take the last non-empty node, u at its end */
    k3 = last_k3 >= 0 ? last_k3 : 0;
    u = t.l3[k3] * (1.0 - 1e-12);
  }
  if (u < 0.0) u = 0.0;
  const int64_t k2 = fh_descend_level(t.l2, k3, &u, lane);
  const int64_t k1 = fh_descend_level(t.l1, k2, &u, lane);
  const int64_t k0 = fh_descend_level(t.leaf, k1, &u, lane);
  if (lane == 0) {
    const float lv = t.leaf[k0];
    slot[j] = (int32_t)k0;
    prob[j] = (double)lv / total;
    return __float_as_uint(lv);
  }
  return 0xFFFFFFFFu;
}

/* The batch's minimum leaf: each block's lanes 0 put their sample's leaf bits in s_min, and one thread per block
 * takes the minimum of the block's and issues the block's one atomicMin (reduce; else one atomic per sample, all on
 * one address: 16 384 serialised atomics per reference batch). The minimum does not depend on the order. */
static __global__ void per_sample_kernel(fh_cuda_sumtree t, int32_t B, uint64_t seed,
                                         const int64_t* __restrict__ train_step, int64_t step_offset,
                                         int32_t* __restrict__ slot, double* __restrict__ prob,
                                         unsigned int* min_leaf_bits, bool reduce, float* __restrict__ leaf_out) {
  __shared__ unsigned int s_min[FH_SAMPLE_WARPS];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int32_t j = blockIdx.x * FH_SAMPLE_WARPS + warp;
  if (reduce) {
    const unsigned int bits = j < B ? fh_sample_one(t, B, seed, train_step, step_offset, slot, prob, j, lane)
                                    : 0xFFFFFFFFu;
    if (lane == 0) s_min[warp] = bits;
    if (leaf_out && lane == 0 && j < B) leaf_out[j] = __uint_as_float(bits);
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned int m = s_min[0];
      for (int w = 1; w < FH_SAMPLE_WARPS; ++w) m = s_min[w] < m ? s_min[w] : m;
      if (m != 0xFFFFFFFFu) atomicMin(min_leaf_bits, m);
    }
  } else if (j < B) { /* FH_PER_REDUCE=0: one atomic per sample (A/B) */
    const unsigned int bits = fh_sample_one(t, B, seed, train_step, step_offset, slot, prob, j, lane);
    if (lane == 0) atomicMin(min_leaf_bits, bits);
    if (leaf_out && lane == 0) leaf_out[j] = __uint_as_float(bits);
  }
}

/* Leaf k set to 0 by the priority update's first part, its l1 node flagged for the partial rebuild (dirty NULL: a
 * full rebuild follows). Duplicates store the same values. */
__device__ __forceinline__ void fh_leaf_zero(float* leaf, uint8_t* dirty, int32_t k) {
  leaf[k] = 0.0f;
  if (dirty) dirty[k / FH_TREE_FANOUT] = 1;
}

/* zero (the early zero of the priority update, fh_launch_per_sample): weight[j] holds the sample's leaf (per_sample's
 * leaf_out) instead of a second read of it; the sampled leaves are then zeroed and their l1 nodes flagged dirty (dirty
 * NULL: a full rebuild follows), as leaves_zero_kernel does. No thread reads a leaf, so duplicates cannot race. */
static __global__ void per_weights_kernel(fh_cuda_sumtree t, int32_t B, const int32_t* __restrict__ slot,
                                          const int64_t* __restrict__ train_step, int64_t step_offset,
                                          float beta_start, float beta_end, int64_t beta_steps,
                                          const unsigned int* __restrict__ min_leaf_bits,
                                          float* __restrict__ weight, float* beta_out, bool zero, uint8_t* dirty) {
  const int32_t j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= B) return;
  const float beta = fh_per_beta(beta_start, beta_end, beta_steps, *train_step + step_offset);
  if (j == 0) *beta_out = beta;
  const double total = *t.total;
  const double size = (double)*t.count;
  const double lmin = (double)__uint_as_float(*min_leaf_bits);
  const int32_t k = slot[j];
  const double lv = (double)(zero ? weight[j] : t.leaf[k]);
  const double wmax = fh_per_weight(size, lmin, total, (double)beta);
  weight[j] = (float)(fh_per_weight(size, lv, total, (double)beta) / wmax);
  if (zero) fh_leaf_zero(t.leaf, dirty, k);
}

/* ---------------------------------------------------------------- priority update */

/* dirty: NULL when a full rebuild follows (FH_PER_FULL_REBUILD=1); duplicates store the same 1. */
static __global__ void leaves_zero_kernel(float* leaf, uint8_t* dirty, const int32_t* __restrict__ slot, int32_t B) {
  const int32_t j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= B) return;
  fh_leaf_zero(leaf, dirty, slot[j]);
}

/* The l1 flags the priority update's zeroing sets: none when it is followed by a full rebuild. */
static uint8_t* per_dirty(const fh_cuda_replay& r) { return r.full_rebuild ? nullptr : r.tree.dirty; }

/* *max_priority: the block's maximum first (warp reduce, then one thread over the block's warps), one atomic per
 * block (reduce; else one per sample on one address). The maximum does not depend on the order. */
static __global__ void leaves_max_kernel(float* leaf, const int32_t* __restrict__ slot,
                                         const float* __restrict__ signal, int32_t B, float eps, float alpha,
                                         float* max_priority, bool reduce) {
  __shared__ unsigned int s_max[FH_SMALL_BLOCK / 32];
  const int32_t j = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned bits = 0u; /* +0.0f: below every priority */
  if (j < B) {
    float sig = signal[j];
    if (!(sig >= 0.0f) || isinf(sig)) sig = 0.0f; /* NaN/Inf/negative: the trainer reports divergence */
    const float p = fh_per_priority(sig, eps, alpha);
    bits = __float_as_uint(p);
    atomicMax(reinterpret_cast<unsigned int*>(leaf + slot[j]), bits);
    if (!reduce) atomicMax(reinterpret_cast<unsigned int*>(max_priority), bits);
  }
  if (!reduce) return;
  const unsigned wm = __reduce_max_sync(0xffffffffu, bits);
  if ((threadIdx.x & 31) == 0) s_max[threadIdx.x >> 5] = wm;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned m = s_max[0];
    for (int w = 1; w < (int)(blockDim.x >> 5); ++w) m = s_max[w] > m ? s_max[w] : m;
    if (m) atomicMax(reinterpret_cast<unsigned int*>(max_priority), m);
  }
}

/* FH_PER_REDUCE=0: the batch minimum and the maximum priority by one atomic per sample (A/B; read at each launch,
 * i.e. when a graph is captured) */
static bool per_reduce() { return !fh_env_is("FH_PER_REDUCE", "0"); }

/* ---------------------------------------------------------------- launchers */

template <bool kPartial>
static fh_status launch_rebuild(const fh_cuda_sumtree& t, cudaStream_t s) {
  const unsigned blocks = (unsigned)(t.padded / ((int64_t)FH_REBUILD_THREADS * FH_TREE_FANOUT));
  tree_rebuild_kernel<kPartial><<<blocks, FH_REBUILD_THREADS, 0, s>>>(t.leaf, t.l1, t.cnt1, t.dirty, t.l2, t.cnt2,
                                                                      t.l3, t.cnt3, t.total, t.count, t.ticket,
                                                                      t.n_top);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

fh_status fh_launch_tree_rebuild(const fh_cuda_sumtree& t, cudaStream_t s) { return launch_rebuild<false>(t, s); }

fh_status fh_launch_tree_set(const fh_cuda_sumtree& t, int32_t n, const int64_t* idx, const float* priority,
                             float alpha, cudaStream_t s) {
  if (n > 0) {
    tree_set_kernel<<<CEIL_DIV(n, FH_SMALL_BLOCK), FH_SMALL_BLOCK, 0, s>>>(t.leaf, t.capacity, n, idx, priority,
                                                                        alpha);
    FH_LAUNCH_CHECK();
  }
  return fh_launch_tree_rebuild(t, s);
}

fh_status fh_launch_per_sample(const fh_cuda_sumtree& t, const fh_cuda_batch& b, int32_t B, uint64_t seed,
                               const int64_t* train_step, float beta_start, float beta_end, int64_t beta_steps,
                               cudaStream_t s, int64_t step_offset, const fh_cuda_replay* zero, cudaStream_t ws,
                               cudaEvent_t fork) {
  if (B <= 0 || B > b.cap) return FH_ERR_INVALID_ARGUMENT;
  const bool z = zero != nullptr;
  FH_CUDA_TRY(cudaMemsetAsync(b.min_prob_bits, 0xFF, sizeof(unsigned int), s));
  per_sample_kernel<<<CEIL_DIV(B, FH_SAMPLE_WARPS), 32 * FH_SAMPLE_WARPS, 0, s>>>(
      t, B, seed, train_step, step_offset, b.slot, b.prob, b.min_prob_bits, per_reduce(), z ? b.weight : nullptr);
  FH_LAUNCH_CHECK();
  if (ws) { /* the weights on stream ws, forked after the sampler */
    FH_CUDA_TRY(cudaEventRecord(fork, s));
    FH_CUDA_TRY(cudaStreamWaitEvent(ws, fork, 0));
  }
  per_weights_kernel<<<CEIL_DIV(B, FH_SMALL_BLOCK), FH_SMALL_BLOCK, 0, ws ? ws : s>>>(
      t, B, b.slot, train_step, step_offset, beta_start, beta_end, beta_steps, b.min_prob_bits, b.weight, b.beta, z,
      z ? per_dirty(*zero) : nullptr);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

fh_status fh_launch_priority_update(const fh_cuda_replay& r, const int32_t* slot, const float* signal, int32_t B,
                                    cudaStream_t s, bool zero) {
  if (B <= 0) return FH_OK;
  if (zero) {
    leaves_zero_kernel<<<CEIL_DIV(B, FH_SMALL_BLOCK), FH_SMALL_BLOCK, 0, s>>>(r.tree.leaf, per_dirty(r), slot, B);
    FH_LAUNCH_CHECK();
  }
  leaves_max_kernel<<<CEIL_DIV(B, FH_SMALL_BLOCK), FH_SMALL_BLOCK, 0, s>>>(r.tree.leaf, slot, signal, B, r.eps,
                                                                        r.alpha, r.max_priority, per_reduce());
  FH_LAUNCH_CHECK();
  return r.full_rebuild ? launch_rebuild<false>(r.tree, s) : launch_rebuild<true>(r.tree, s);
}
