/*
 * test_entry.cu — the narrow test entry points of foxhunt.h that exercise the env and replay half of
 * the CUDA backend:
 *   fh_per_create / _destroy / _set / _sample / _total     standalone PER on the device (whole ABI)
 *   fh_per_update / fh_per_read                             CUDA only, not in foxhunt.h: the trainer's
 *                                                           priority update (partial or full rebuild)
 *                                                           on that tree, and the whole tree read back
 *                                                           (the bit-identity test, test/gpu/per.test.ts)
 *   fh_cuda_env_step_host / fh_cuda_env_observe_host        bodies of fh_trainer_env_step and
 *                                                           fh_trainer_env_observe; the trainer
 *                                                           (trainer_cuda.cu) forwards to them
 * These synchronise (host arrays in and out); they are for tests and tools, never for the epoch.
 */
#include "collect.h"
#include "replay.h"

#include <stdlib.h>
#include <string.h>

#include <new>
#include <vector>

/* n elements of device array src into host array dst, on s (nothing when dst is NULL: an output not asked for). */
template <typename T>
static fh_status fh_copy_out(T* dst, const T* src, size_t n, cudaStream_t s) {
  if (dst) FH_CUDA_TRY(cudaMemcpyAsync(dst, src, sizeof(T) * n, cudaMemcpyDeviceToHost, s));
  return FH_OK;
}

/* ---------------------------------------------------------------- env (trainer forwards) */

/* One env step of every env with host actions (N, 3), as fh_trainer_env_step documents: ended
 * episodes reset with counter *env_step + 1, which then advances by one when advance != 0. Outputs
 * (may be NULL) are the step's result before the reset. Synchronous. */
fh_status fh_cuda_env_step_host(const fh_cuda_envs& e, const fh_cuda_market& m, const int32_t* actions,
                                float* reward, uint8_t* done, int32_t* position, int64_t* cursor, double* equity,
                                double* cost, int32_t advance, cudaStream_t s) {
  if (!actions) return FH_ERR_INVALID_ARGUMENT;
  const size_t n = (size_t)e.n;
  FH_CUDA_TRY(cudaMemcpyAsync(e.actions, actions, sizeof(int32_t) * 3 * n, cudaMemcpyHostToDevice, s));
  FH_TRY(fh_launch_env_step(e, m, nullptr, 0, s));
  if (advance) FH_TRY(fh_launch_collect_end(e, nullptr, 1, s));
  FH_TRY(fh_copy_out(reward, e.reward, n, s));
  FH_TRY(fh_copy_out(done, e.done, n, s));
  FH_TRY(fh_copy_out(position, e.position, n, s));
  FH_TRY(fh_copy_out(cost, e.cost, n, s));
  FH_TRY(fh_copy_out(cursor, e.cursor, n, s));
  FH_TRY(fh_copy_out(equity, e.equity, n, s));
  FH_CUDA_TRY(cudaStreamSynchronize(s));
  return FH_OK;
}

/* Observations (N, D) fp32 of every env into host out. scratch: device (N, D) floats. Synchronous. */
fh_status fh_cuda_env_observe_host(const fh_cuda_envs& e, const fh_cuda_market& m, float* scratch, float* out,
                                   cudaStream_t s) {
  if (!out || !scratch) return FH_ERR_INVALID_ARGUMENT;
  FH_TRY(fh_launch_env_observe(e, m, FH_F32, scratch, e.obs_dim, s));
  FH_CUDA_TRY(cudaMemcpyAsync(out, scratch, sizeof(float) * (size_t)e.n * e.obs_dim, cudaMemcpyDeviceToHost, s));
  FH_CUDA_TRY(cudaStreamSynchronize(s));
  return FH_OK;
}

/* ---------------------------------------------------------------- standalone PER (ABI) */

struct fh_per {
  int device;
  float alpha;
  uint64_t seed;
  cudaStream_t s;
  fh_cuda_sumtree tree;
  fh_cuda_batch batch;
  int64_t* d_step;   /* (1) the draw number */
  float* d_maxp;     /* (1) max priority of fh_per_update, starts at 1 (as the replay's) */
  int64_t* d_idx;    /* (scratch_cap) */
  float* d_prio;     /* (scratch_cap) */
  int32_t* d_slot;   /* (scratch_cap) */
  int64_t scratch_cap;
};

static void per_release(fh_per* p) {
  if (!p) return;
  cudaSetDevice(p->device);
  fh_cuda_sumtree_free(&p->tree);
  fh_cuda_batch_free(&p->batch);
  cudaFree(p->d_step);
  cudaFree(p->d_maxp);
  cudaFree(p->d_idx);
  cudaFree(p->d_prio);
  cudaFree(p->d_slot);
  if (p->s) cudaStreamDestroy(p->s);
  delete p;
}

static fh_status per_init(fh_per* p, int64_t capacity) {
  FH_CUDA_TRY(cudaStreamCreateWithFlags(&p->s, cudaStreamNonBlocking));
  FH_TRY(fh_cuda_sumtree_alloc(capacity, &p->tree));
  FH_CUDA_TRY(cudaMalloc(&p->d_step, sizeof(int64_t)));
  FH_CUDA_TRY(cudaMalloc(&p->d_maxp, sizeof(float)));
  const float one = 1.0f;
  FH_CUDA_TRY(cudaMemcpy(p->d_maxp, &one, sizeof one, cudaMemcpyHostToDevice));
  return FH_OK;
}

extern "C" FH_API fh_status fh_per_create(int64_t capacity, float alpha, uint64_t seed, fh_per** out) {
  if (!out) return FH_ERR_INVALID_ARGUMENT;
  *out = nullptr;
  if (capacity <= 0 || capacity > ((int64_t)1 << 30) || !(alpha >= 0.0f)) return FH_ERR_INVALID_ARGUMENT;
  fh_per* p = new (std::nothrow) fh_per();
  if (!p) return FH_ERR_OUT_OF_MEMORY;
  cudaGetDevice(&p->device);
  p->alpha = alpha;
  p->seed = seed;
  const fh_status st = per_init(p, capacity);
  if (st != FH_OK) {
    per_release(p);
    return st;
  }
  *out = p;
  return FH_OK;
}

extern "C" FH_API void fh_per_destroy(fh_per* p) { per_release(p); }

static fh_status per_scratch(fh_per* p, int64_t n) {
  if (n <= p->scratch_cap) return FH_OK;
  cudaFree(p->d_idx);
  cudaFree(p->d_prio);
  cudaFree(p->d_slot);
  p->d_idx = nullptr;
  p->d_prio = nullptr;
  p->d_slot = nullptr;
  p->scratch_cap = 0;
  FH_CUDA_TRY(cudaMalloc(&p->d_idx, sizeof(int64_t) * (size_t)n));
  FH_CUDA_TRY(cudaMalloc(&p->d_prio, sizeof(float) * (size_t)n));
  FH_CUDA_TRY(cudaMalloc(&p->d_slot, sizeof(int32_t) * (size_t)n));
  p->scratch_cap = n;
  return FH_OK;
}

extern "C" FH_API fh_status fh_per_set(fh_per* p, int64_t n, const int64_t* idx, const float* priority) {
  if (!p || n < 0 || (n > 0 && (!idx || !priority)) || n > INT32_MAX) return FH_ERR_INVALID_ARGUMENT;
  FH_CUDA_TRY(cudaSetDevice(p->device));
  for (int64_t i = 0; i < n; ++i)
    if (idx[i] < 0 || idx[i] >= p->tree.capacity || !(priority[i] >= 0.0f)) return FH_ERR_INVALID_ARGUMENT;
  FH_TRY(per_scratch(p, n > 0 ? n : 1));
  if (n > 0) {
    FH_CUDA_TRY(cudaMemcpyAsync(p->d_idx, idx, sizeof(int64_t) * (size_t)n, cudaMemcpyHostToDevice, p->s));
    FH_CUDA_TRY(cudaMemcpyAsync(p->d_prio, priority, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice, p->s));
  }
  FH_TRY(fh_launch_tree_set(p->tree, (int32_t)n, p->d_idx, p->d_prio, p->alpha, p->s));
  FH_CUDA_TRY(cudaStreamSynchronize(p->s));
  return FH_OK;
}

extern "C" FH_API fh_status fh_per_total(fh_per* p, double* out) {
  if (!p || !out) return FH_ERR_INVALID_ARGUMENT;
  FH_CUDA_TRY(cudaSetDevice(p->device));
  FH_CUDA_TRY(cudaMemcpyAsync(out, p->tree.total, sizeof(double), cudaMemcpyDeviceToHost, p->s));
  FH_CUDA_TRY(cudaStreamSynchronize(p->s));
  return FH_OK;
}

extern "C" FH_API fh_status fh_per_sample(fh_per* p, int32_t n, uint64_t draw, float beta, int64_t* idx,
                                         float* weight) {
  if (!p || n <= 0 || !idx || !weight) return FH_ERR_INVALID_ARGUMENT;
  FH_CUDA_TRY(cudaSetDevice(p->device));
  double total = 0.0;
  FH_TRY(fh_per_total(p, &total));
  if (!(total > 0.0)) return FH_ERR_INVALID_ARGUMENT; /* nothing sampleable */
  if (n > p->batch.cap) {
    fh_cuda_batch_free(&p->batch);
    FH_TRY(fh_cuda_batch_alloc(n, &p->batch));
  }
  const int64_t step = (int64_t)draw;
  FH_CUDA_TRY(cudaMemcpyAsync(p->d_step, &step, sizeof step, cudaMemcpyHostToDevice, p->s));
  FH_TRY(fh_launch_per_sample(p->tree, p->batch, n, p->seed, p->d_step, beta, beta, 1, p->s));
  std::vector<int32_t> slot((size_t)n);
  FH_CUDA_TRY(cudaMemcpyAsync(slot.data(), p->batch.slot, sizeof(int32_t) * (size_t)n, cudaMemcpyDeviceToHost, p->s));
  FH_CUDA_TRY(cudaMemcpyAsync(weight, p->batch.weight, sizeof(float) * (size_t)n, cudaMemcpyDeviceToHost, p->s));
  FH_CUDA_TRY(cudaStreamSynchronize(p->s));
  for (int32_t i = 0; i < n; ++i) idx[i] = slot[(size_t)i];
  return FH_OK;
}

/* ---------------------------------------------------------------- optimiser step (fused vs chain) */

#include "../../../kernels/net_kernels.cuh"

namespace {
/* What fh_cuda_optimise_check owns on the device; freed on every return. */
struct optim_check {
  cudaStream_t s = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  void* d[12] = {};
  ~optim_check() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    for (void* x : d) cudaFree(x);
    if (s) cudaStreamDestroy(s);
  }
};
}  // namespace

template <typename T>
static fh_status optim_check_run(optim_check& c, int32_t fused, int32_t graph, int64_t n, int32_t steps,
                                 const float* grads, float* p, float* m, float* v, float* tgt, int64_t* step,
                                 float clip, float lr, float beta1, float beta2, float eps, int32_t every, float tau,
                                 void* shadow, void* tgt_shadow, float* norm, float* scale) {
  const size_t fb = sizeof(float) * (size_t)n, tb = sizeof(T) * (size_t)n;
  const size_t bytes[12] = {fb, fb, fb, fb, fb, shadow ? tb : 0, tgt_shadow ? tb : 0,
                            sizeof(double) * (size_t)fh_sum_partial_doubles(), 4, 4, 8, 8};
  for (int k = 0; k < 12; ++k)
    if (bytes[k]) FH_CUDA_TRY(cudaMalloc(&c.d[k], bytes[k] < 16 ? 16 : bytes[k]));
  float *dp = static_cast<float*>(c.d[0]), *dg = static_cast<float*>(c.d[1]), *dm = static_cast<float*>(c.d[2]);
  float *dv = static_cast<float*>(c.d[3]), *dt = static_cast<float*>(c.d[4]);
  T *dsh = static_cast<T*>(c.d[5]), *dtsh = static_cast<T*>(c.d[6]);
  double* part = static_cast<double*>(c.d[7]);
  float *dnorm = static_cast<float*>(c.d[8]), *dscale = static_cast<float*>(c.d[9]);
  int64_t* dstep = static_cast<int64_t*>(c.d[10]);
  unsigned int* ticket = static_cast<unsigned int*>(c.d[11]);
  FH_CUDA_TRY(cudaStreamCreateWithFlags(&c.s, cudaStreamNonBlocking));
  cudaStream_t s = c.s;
  FH_CUDA_TRY(cudaMemcpyAsync(dp, p, fb, cudaMemcpyHostToDevice, s));
  FH_CUDA_TRY(cudaMemcpyAsync(dm, m, fb, cudaMemcpyHostToDevice, s));
  FH_CUDA_TRY(cudaMemcpyAsync(dv, v, fb, cudaMemcpyHostToDevice, s));
  FH_CUDA_TRY(cudaMemcpyAsync(dt, tgt, fb, cudaMemcpyHostToDevice, s));
  FH_CUDA_TRY(cudaMemcpyAsync(dstep, step, 8, cudaMemcpyHostToDevice, s));
  FH_CUDA_TRY(cudaMemsetAsync(ticket, 0, 8, s));
  if (dsh) FH_TRY(fh_launch_cast<T>(dp, dsh, n, s));
  if (dtsh) FH_TRY(fh_launch_cast<T>(dt, dtsh, n, s));
  /* one optimiser step: fh_net_optimise's chain or the fused launcher */
  auto one = [&]() -> fh_status {
    if (fused)
      return fh_launch_optimise_fused<T>(n, dp, dsh, dg, dm, dv, dt, dtsh, part, dnorm, dscale, dstep, ticket, clip, lr,
                                         beta1, beta2, eps, every, tau, s, nullptr, nullptr, fused == 2 ? 1 : 2);
    FH_TRY(fh_launch_grad_norm(dg, n, clip, part, dnorm, dscale, s));
    FH_TRY(fh_launch_adam<T>(n, dp, dsh, dg, dm, dv, dscale, dstep, lr, beta1, beta2, eps, s));
    return fh_launch_target_update<T>(n, dp, dt, dtsh, dstep, every, tau, s);
  };
  if (graph) {
    FH_CUDA_TRY(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    const fh_status st = one();
    const cudaError_t e = cudaStreamEndCapture(s, &c.graph);
    FH_TRY(st);
    FH_CUDA_TRY(e);
    FH_CUDA_TRY(cudaGraphInstantiate(&c.exec, c.graph, 0));
  }
  for (int32_t k = 0; k < steps; ++k) {
    FH_CUDA_TRY(cudaMemcpyAsync(dg, grads + (size_t)k * (size_t)n, fb, cudaMemcpyHostToDevice, s));
    if (graph)
      FH_CUDA_TRY(cudaGraphLaunch(c.exec, s));
    else
      FH_TRY(one());
    FH_CUDA_TRY(cudaMemcpyAsync(norm + k, dnorm, 4, cudaMemcpyDeviceToHost, s));
    FH_CUDA_TRY(cudaMemcpyAsync(scale + k, dscale, 4, cudaMemcpyDeviceToHost, s));
  }
  FH_CUDA_TRY(cudaMemcpyAsync(p, dp, fb, cudaMemcpyDeviceToHost, s));
  FH_CUDA_TRY(cudaMemcpyAsync(m, dm, fb, cudaMemcpyDeviceToHost, s));
  FH_CUDA_TRY(cudaMemcpyAsync(v, dv, fb, cudaMemcpyDeviceToHost, s));
  FH_CUDA_TRY(cudaMemcpyAsync(tgt, dt, fb, cudaMemcpyDeviceToHost, s));
  FH_CUDA_TRY(cudaMemcpyAsync(step, dstep, 8, cudaMemcpyDeviceToHost, s));
  if (dsh) FH_CUDA_TRY(cudaMemcpyAsync(shadow, dsh, tb, cudaMemcpyDeviceToHost, s));
  if (dtsh) FH_CUDA_TRY(cudaMemcpyAsync(tgt_shadow, dtsh, tb, cudaMemcpyDeviceToHost, s));
  FH_CUDA_TRY(cudaStreamSynchronize(s));
  return FH_OK;
}

/* `steps` optimiser steps on host state with fh_net_optimise's 5-launch chain (fused == 0: grad norm ->
 * Adam -> step bump -> target update) or fh_launch_optimise_fused (fused 1: its two launches, the squares partials
 * and the kernel; fused 2: its one launch, a grid barrier between the partials and the update); T = fh_bf16 when
 * bf16 != 0, else float; eagerly, or (graph != 0) one step captured as a CUDA graph and replayed.
 * grads (steps, n): step k's gradient. p, m, v, tgt (n) and *step: in and out. shadow / tgt_shadow:
 * NULL (no shadows, as the fp32 trainer runs) or n T values out (starting as T(p), T(tgt)). norm, scale
 * (steps): each step's gradient norm and clip factor. Synchronous. */
extern "C" FH_API fh_status fh_cuda_optimise_check(int32_t fused, int32_t bf16, int32_t graph, int64_t n, int32_t steps,
                                                   const float* grads, float* p, float* m, float* v, float* tgt,
                                                   int64_t* step, float clip, float lr, float beta1, float beta2,
                                                   float eps, int32_t target_every, float tau, void* shadow,
                                                   void* tgt_shadow, float* norm, float* scale) {
  if (n <= 0 || steps <= 0 || fused < 0 || fused > 2 || !grads || !p || !m || !v || !tgt || !step || !norm || !scale)
    return FH_ERR_INVALID_ARGUMENT;
  optim_check c;
  return bf16 ? optim_check_run<fh_bf16>(c, fused, graph, n, steps, grads, p, m, v, tgt, step, clip, lr, beta1, beta2,
                                         eps, target_every, tau, shadow, tgt_shadow, norm, scale)
              : optim_check_run<float>(c, fused, graph, n, steps, grads, p, m, v, tgt, step, clip, lr, beta1, beta2,
                                       eps, target_every, tau, shadow, tgt_shadow, norm, scale);
}

/* The train step's priority update (fh_launch_priority_update) on the standalone tree: leaf[slot[j]] =
 * (signal[j] + eps)^alpha (NaN/Inf/negative signals as 0), duplicates take the max, the max priority
 * (d_maxp) likewise; then the partial rebuild, or the full one when full != 0 (the switch
 * FH_PER_FULL_REBUILD gives the trainer; this entry takes it as an argument). Distinct or repeated
 * slots in [0, capacity). Synchronous. */
extern "C" FH_API fh_status fh_per_update(fh_per* p, int32_t n, const int32_t* slot, const float* signal, float eps,
                                         int32_t full) {
  if (!p || n < 0 || (n > 0 && (!slot || !signal)) || !(eps >= 0.0f)) return FH_ERR_INVALID_ARGUMENT;
  FH_CUDA_TRY(cudaSetDevice(p->device));
  for (int32_t i = 0; i < n; ++i)
    if (slot[i] < 0 || slot[i] >= p->tree.capacity) return FH_ERR_INVALID_ARGUMENT;
  if (n == 0) return FH_OK;
  FH_TRY(per_scratch(p, n));
  FH_CUDA_TRY(cudaMemcpyAsync(p->d_slot, slot, sizeof(int32_t) * (size_t)n, cudaMemcpyHostToDevice, p->s));
  FH_CUDA_TRY(cudaMemcpyAsync(p->d_prio, signal, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice, p->s));
  fh_cuda_replay r;
  memset(&r, 0, sizeof r);
  r.alpha = p->alpha;
  r.eps = eps;
  r.max_priority = p->d_maxp;
  r.tree = p->tree;
  r.full_rebuild = full != 0;
  FH_TRY(fh_launch_priority_update(r, p->d_slot, p->d_prio, n, p->s));
  FH_CUDA_TRY(cudaStreamSynchronize(p->s));
  return FH_OK;
}

/* The whole tree back to the host; n_leaves must be the padded leaf count (capacity rounded up to
 * 32768). Every output may be NULL: leaf (n_leaves), l1 and cnt1 (n_leaves / 32), l2 and cnt2
 * (n_leaves / 1024), l3 and cnt3 (n_leaves / 32768), total, count, max_priority (1 each), pending (1):
 * l1 nodes still flagged dirty plus a nonzero rebuild ticket (0 = ready for the next update, as a
 * graph replay needs). Synchronous. */
extern "C" FH_API fh_status fh_per_read(fh_per* p, int64_t n_leaves, float* leaf, double* l1, uint8_t* cnt1,
                                       double* l2, int32_t* cnt2, double* l3, int64_t* cnt3, double* total,
                                       int64_t* count, float* max_priority, int64_t* pending) {
  if (!p) return FH_ERR_INVALID_ARGUMENT;
  if (n_leaves != p->tree.padded) return FH_ERR_BUFFER_TOO_SMALL;
  FH_CUDA_TRY(cudaSetDevice(p->device));
  const fh_cuda_sumtree& t = p->tree;
  const size_t n0 = (size_t)t.padded, n1 = n0 / FH_TREE_FANOUT, n2 = n1 / FH_TREE_FANOUT, n3 = (size_t)t.n_top;
  cudaStream_t s = p->s;
  FH_TRY(fh_copy_out(leaf, t.leaf, n0, s));
  FH_TRY(fh_copy_out(l1, t.l1, n1, s));
  FH_TRY(fh_copy_out(cnt1, t.cnt1, n1, s));
  FH_TRY(fh_copy_out(l2, t.l2, n2, s));
  FH_TRY(fh_copy_out(cnt2, t.cnt2, n2, s));
  FH_TRY(fh_copy_out(l3, t.l3, n3, s));
  FH_TRY(fh_copy_out(cnt3, t.cnt3, n3, s));
  FH_TRY(fh_copy_out(total, t.total, 1, s));
  FH_TRY(fh_copy_out(count, t.count, 1, s));
  FH_TRY(fh_copy_out(max_priority, p->d_maxp, 1, s));
  std::vector<uint8_t> dirty;
  unsigned int ticket = 0;
  if (pending) {
    dirty.resize(n1);
    FH_CUDA_TRY(cudaMemcpyAsync(dirty.data(), t.dirty, n1, cudaMemcpyDeviceToHost, s));
    FH_CUDA_TRY(cudaMemcpyAsync(&ticket, t.ticket, sizeof ticket, cudaMemcpyDeviceToHost, s));
  }
  FH_CUDA_TRY(cudaStreamSynchronize(s));
  if (pending) {
    int64_t k = ticket != 0u;
    for (const uint8_t d : dirty) k += d != 0;
    *pending = k;
  }
  return FH_OK;
}
