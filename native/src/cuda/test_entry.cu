/*
 * test_entry.cu — the narrow test entry points of foxhunt.h that exercise the env and replay half of
 * the CUDA backend:
 *   fh_per_create / _destroy / _set / _sample / _total     standalone PER on the device (whole ABI)
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
  if (reward) FH_CUDA_TRY(cudaMemcpyAsync(reward, e.reward, sizeof(float) * n, cudaMemcpyDeviceToHost, s));
  if (done) FH_CUDA_TRY(cudaMemcpyAsync(done, e.done, sizeof(uint8_t) * n, cudaMemcpyDeviceToHost, s));
  if (position) FH_CUDA_TRY(cudaMemcpyAsync(position, e.position, sizeof(int32_t) * n, cudaMemcpyDeviceToHost, s));
  if (cost) FH_CUDA_TRY(cudaMemcpyAsync(cost, e.cost, sizeof(double) * n, cudaMemcpyDeviceToHost, s));
  if (cursor) FH_CUDA_TRY(cudaMemcpyAsync(cursor, e.cursor, sizeof(int64_t) * n, cudaMemcpyDeviceToHost, s));
  if (equity) FH_CUDA_TRY(cudaMemcpyAsync(equity, e.equity, sizeof(double) * n, cudaMemcpyDeviceToHost, s));
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
  int64_t* d_idx;    /* (scratch_cap) */
  float* d_prio;     /* (scratch_cap) */
  int64_t scratch_cap;
};

static void per_release(fh_per* p) {
  if (!p) return;
  cudaSetDevice(p->device);
  fh_cuda_sumtree_free(&p->tree);
  fh_cuda_batch_free(&p->batch);
  cudaFree(p->d_step);
  cudaFree(p->d_idx);
  cudaFree(p->d_prio);
  if (p->s) cudaStreamDestroy(p->s);
  delete p;
}

static fh_status per_init(fh_per* p, int64_t capacity) {
  FH_CUDA_TRY(cudaStreamCreateWithFlags(&p->s, cudaStreamNonBlocking));
  FH_TRY(fh_cuda_sumtree_alloc(capacity, &p->tree));
  FH_CUDA_TRY(cudaMalloc(&p->d_step, sizeof(int64_t)));
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
  p->d_idx = nullptr;
  p->d_prio = nullptr;
  p->scratch_cap = 0;
  FH_CUDA_TRY(cudaMalloc(&p->d_idx, sizeof(int64_t) * (size_t)n));
  FH_CUDA_TRY(cudaMalloc(&p->d_prio, sizeof(float) * (size_t)n));
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
