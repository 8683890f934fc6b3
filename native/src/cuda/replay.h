/*
 * replay.h — prioritised replay on the device (DESIGN §6): a ring of rows of N transitions that
 * stores bar indices and account features (never observations), a drift-free sum tree, stratified
 * exact proportional sampling with importance weights, n-step assembly and the observation gather.
 *
 * Sum tree: fan-out 32, four stored levels over the leaves, all sums recomputed from the children
 * on every rebuild (never delta-accumulated), so nothing drifts:
 *   leaf   (padded)            float, stored priority p^alpha; 0 = not sampleable
 *   l1     (padded / 32)       double   (+ cnt1, uint8: leaves > 0 under the node)
 *   l2     (padded / 1024)     double   (+ cnt2)
 *   l3     (padded / 32768)    double   (+ cnt3; n_top nodes; 64 at capacity 2^21)
 *   total, count               double / int64 (leaves > 0)
 * padded = capacity rounded up to 32768. A rebuild is ONE launch (each block sums 8192 leaves into
 * l1/l2; the last block to finish sums l2 into l3 and total/count): 8 MB read at 2^21. The priority
 * update's rebuild is partial, the same launch: only the l1 nodes it flagged dirty are summed from
 * their leaves (at most B of them), every other l1 node is read back (l1, cnt1 and the flags: 640 KB at 2^21),
 * and l2 up are recomputed as in the full rebuild, so the tree is bit for bit the full rebuild's.
 * That needs every l1/cnt1 node to match its leaves between rebuilds: whatever writes leaves
 * (env step, checkpoint load, tree_set) is followed by a full rebuild before the next priority update.
 *
 * Train step, all graph-capturable:
 *   fh_launch_per_sample(r, b, B, seed, train_step, beta..., s, offset)  slots + IS weights (2 launches)
 *   fh_launch_replay_gather(r, m, envs, b, B, dtype, obs, next_obs, ld)  act, ret, disc, obs, s'
 *   ... loss ...
 *   fh_launch_priority_update(r, b.slot, signal, B)   leaf = (signal+eps)^alpha, duplicates take the
 *                                                      max (deterministic), max_priority, partial
 *                                                      rebuild (FH_PER_FULL_REBUILD=1: full)
 * The trainer (trainer_cuda.cu) prefetches: right after step k's loss and priority update it samples
 * and gathers step k+1's batch on a side stream into a second fh_cuda_batch and input buffer, while
 * step k's backward and Adam run. The sampler reads only the sum tree (leaf, l1..l3, total, count)
 * and the step counter, so after priority_update_k it sees what it would see after Adam of step k,
 * given offset 1 (Adam bumps the counter; the trainer orders the bump after the sampler's reads).
 */
#ifndef FH_CUDA_REPLAY_H
#define FH_CUDA_REPLAY_H

#include "collect.h"
#include "../../../kernels/replay.cuh"

#define FH_TREE_FANOUT 32
#define FH_TREE_BLOCK_LEAVES 32768 /* leaves summed by one rebuild block (32^3) */

struct fh_cuda_sumtree {
  int64_t capacity;      /* leaves in use */
  int64_t padded;        /* capacity rounded up to FH_TREE_BLOCK_LEAVES */
  int32_t n_top;         /* padded / FH_TREE_BLOCK_LEAVES */
  float* leaf;           /* (padded) p^alpha, pad leaves 0 */
  double* l1;            /* (padded / 32) */
  uint8_t* cnt1;         /* (padded / 32) leaves > 0 under each l1 node (read back by the partial rebuild) */
  uint8_t* dirty;        /* (padded / 32) 1 = l1 node with a leaf the priority update wrote (partial
                            rebuild scratch; the rebuild returns it to 0) */
  double* l2;            /* (padded / 1024) */
  int32_t* cnt2;         /* (padded / 1024) leaves > 0 under each l2 node */
  double* l3;            /* (n_top) */
  int64_t* cnt3;         /* (n_top) leaves > 0 under each l3 node */
  double* total;         /* (1) sum of all leaves */
  int64_t* count;        /* (1) leaves > 0 (the "size" of the weights) */
  unsigned int* ticket;  /* (1) last-block-done counter of the rebuild (returns to 0) */
};

fh_status fh_cuda_sumtree_alloc(int64_t capacity, fh_cuda_sumtree* out); /* all zero */
void fh_cuda_sumtree_free(fh_cuda_sumtree* t);

struct fh_cuda_replay {
  int64_t capacity;      /* rows * N transitions */
  int64_t rows;          /* capacity / N */
  int32_t n_envs;        /* N */
  int32_t n_step;        /* n */
  float gamma;
  float alpha;           /* stored priority = (signal + eps)^alpha */
  float eps;
  fh_replay_view v;      /* device arrays, the layout the CPU backend uses (kernels/replay.cuh):
                            bar (C), act (C, 3) uint8, done (C) uint8, reward (C), account (C, 8) */
  float* max_priority;   /* (1) largest stored priority seen, starts at 1 */
  fh_cuda_sumtree tree;
  int32_t full_rebuild;  /* FH_PER_FULL_REBUILD=1 (read at alloc): priority updates rebuild the whole tree
                            (the reference the partial rebuild must equal bit for bit) */
};

/* capacity is rounded down to a multiple of n_envs; rows must be > n_step. */
fh_status fh_cuda_replay_alloc(const fh_config& cfg, fh_cuda_replay* out);
void fh_cuda_replay_free(fh_cuda_replay* r);

/* One sampled batch (device). */
struct fh_cuda_batch {
  int32_t cap;           /* largest B */
  int32_t* slot;         /* (B) sampled slots */
  double* prob;          /* (B) P(i) = leaf / total */
  float* weight;         /* (B) (P(i)/min_j P(j))^-beta = (size P(i))^-beta / max_j */
  float* beta;           /* (1) beta used by the last sample */
  unsigned int* min_prob_bits; /* (1) float bits of min_j P(j) (scratch) */
  int32_t* act;          /* (B, 3) */
  float* ret;            /* (B) n-step return (stops at done) */
  float* disc;           /* (B) gamma^n, or 0 when the episode ended inside the n steps */
  int32_t* nbar;         /* (B) bar of s' (its row of the target's first-layer table, kernels/p1.cuh) */
  int32_t* nslot;        /* (B) slot of s' (the stored state n rows later: its row of the target cache, net.h) */
};

fh_status fh_cuda_batch_alloc(int32_t cap, fh_cuda_batch* out);
void fh_cuda_batch_free(fh_cuda_batch* b);

/* Rebuild every internal level of the tree from the leaves, cnt1 included (1 launch). */
fh_status fh_launch_tree_rebuild(const fh_cuda_sumtree& t, cudaStream_t s);

/* leaf[idx[i]] = priority[i]^alpha for i < n (host-driven tests; idx/priority on the device);
 * duplicates: the last one wins is NOT guaranteed, give distinct indices. Rebuilds. */
fh_status fh_launch_tree_set(const fh_cuda_sumtree& t, int32_t n, const int64_t* idx, const float* priority,
                             float alpha, cudaStream_t s);

/* Stratified proportional sample of B slots: sample j draws
 * u = (j + fh_u01(philox(seed, j, step, SAMPLE)[0])) / B * total and descends the tree.
 * step = *train_step + step_offset (device counter, read by both kernels);
 * beta = beta_start + (beta_end-beta_start)*min(1, step/beta_steps).
 * Writes b.slot, b.prob, b.weight, b.beta (and b.min_prob_bits, scratch); reads nothing but the
 * tree and *train_step. Requires total > 0. (2 launches + 1 memset.) ws: the weights kernel runs on stream ws,
 * forked after the sampler by the event `fork` (the caller joins ws; only b.slot is ready on s).
 * zero (the early zero; NULL: none): the weights kernel also zeroes the batch's leaves of replay *zero (t must be
 * its tree), as fh_launch_priority_update's first part does, which then skips it (zero = false there). The caller
 * guarantees that nothing reads the leaves or the tree between the sample and the batch's priority update (the
 * train step: only the batch's own gather, forward and loss), so the tree after that update is bit for bit the one
 * of zeroing there; it takes a dependent launch off the replay's chain. */
fh_status fh_launch_per_sample(const fh_cuda_sumtree& t, const fh_cuda_batch& b, int32_t B, uint64_t seed,
                               const int64_t* train_step, float beta_start, float beta_end,
                               int64_t beta_steps, cudaStream_t s, int64_t step_offset = 0,
                               const fh_cuda_replay* zero = nullptr, cudaStream_t ws = nullptr,
                               cudaEvent_t fork = nullptr);

/* n-step assembly from b.slot (fh_replay_nstep) and the observation gather (DESIGN §6): act (B,3),
 * ret, disc, nbar and nslot (with next_obs), and obs/next_obs (B, D; row stride ld) = features rows of the stored bar + stored
 * account features (s, and s' = the row n later). obs/next_obs may be NULL. One block per sample. */
fh_status fh_launch_replay_gather(const fh_cuda_replay& r, const fh_cuda_market& m, int32_t window,
                                  const fh_cuda_batch& b, int32_t B, fh_dtype dtype, void* obs, void* next_obs,
                                  int32_t ld, cudaStream_t s);

/* The paired layout of a bf16 batch (fh_pair_layout, kernels/net_kernels.cuh; kernels/collect.cu replay_gather_pair):
 * blk holds B blocks of l.P elements, in which s and s' share their market rows. Also act, ret, disc, nbar, nslot as
 * fh_launch_replay_gather. Needs F % 8 == 0, the market's bf16 features, l == fh_pair_make(window, F, n_step) and a
 * 16-byte aligned blk. One warp per sample. */
struct fh_pair_layout;
fh_status fh_launch_replay_gather_pair(const fh_cuda_replay& r, const fh_cuda_market& m, int32_t window,
                                       const fh_cuda_batch& b, int32_t B, void* blk, const fh_pair_layout& l,
                                       cudaStream_t s);

/* The gathering first layer's batch (FH_L1_GATHER; net.h fh_l1g_bars / fh_l1g_acc): act, ret, disc, nbar, nslot as
 * fh_launch_replay_gather, and bars (2B: s rows, then the stored s' rows) and acc (2B x 8 bf16, 16-byte aligned), the
 * rows' account features; no market rows. One thread per sample. */
fh_status fh_launch_replay_gather_l1g(const fh_cuda_replay& r, const fh_cuda_batch& b, int32_t B, int32_t* bars,
                                      void* acc, cudaStream_t s);

/* New priorities for the sampled slots: leaf = (signal[j] + eps)^alpha; a slot sampled twice gets
 * the max (deterministic); *max_priority = max(*max_priority, new); then the partial rebuild (the
 * full one with r.full_rebuild), bit for bit the tree a full rebuild gives. (3 launches; 2 with zero = false, when
 * the sampler zeroed the batch's leaves: fh_launch_per_sample's zero.) */
fh_status fh_launch_priority_update(const fh_cuda_replay& r, const int32_t* slot, const float* signal, int32_t B,
                                    cudaStream_t s, bool zero = true);

#endif /* FH_CUDA_REPLAY_H */
