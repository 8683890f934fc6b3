/*
 * collect_alloc.cu — allocation and upload for collect.h (market on the device, N envs). Runs once
 * at trainer create; synchronous; not graph-capturable. Every failure frees what was taken.
 */
#include "collect.h"
#include "../../../kernels/net_kernels.cuh"

#include <string.h>

template <typename T>
static fh_status upload(T** dst, const T* src, int64_t n) {
  FH_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(dst), sizeof(T) * (size_t)(n > 0 ? n : 1)));
  if (n > 0) FH_CUDA_TRY(cudaMemcpy(*dst, src, sizeof(T) * (size_t)n, cudaMemcpyHostToDevice));
  return FH_OK;
}

static fh_status market_upload(const fh_market* m, fh_cuda_market* out) {
  const int64_t n = m->n_bars;
  FH_TRY(upload(&out->features, m->features, n * m->n_features));
  FH_TRY(upload(&out->open, m->open, n));
  FH_TRY(upload(&out->high, m->high, n));
  FH_TRY(upload(&out->low, m->low, n));
  FH_TRY(upload(&out->close, m->close, n));
  FH_TRY(upload(&out->atr, m->atr, n));
  FH_TRY(upload(&out->session_start, m->session_start, n));
  const int64_t nf = n * m->n_features;
  FH_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&out->features_bf16), sizeof(fh_bf16) * (size_t)nf));
  FH_TRY(fh_launch_cast<fh_bf16>(out->features, out->features_bf16, nf, 0));
  FH_CUDA_TRY(cudaDeviceSynchronize());
  return FH_OK;
}

fh_status fh_cuda_market_upload(const fh_market* m, fh_cuda_market* out) {
  if (!m || !out || m->n_bars <= 0 || m->n_features <= 0) return FH_ERR_INVALID_ARGUMENT;
  memset(out, 0, sizeof *out);
  const fh_status st = market_upload(m, out);
  if (st != FH_OK) {
    fh_cuda_market_free(out);
    return st;
  }
  fh_market_view& v = out->view;
  v.features = out->features;
  v.open = out->open;
  v.high = out->high;
  v.low = out->low;
  v.close = out->close;
  v.atr = out->atr;
  v.session_start = out->session_start;
  v.n_bars = m->n_bars;
  v.n_features = m->n_features;
  v.train_begin = m->train_begin;
  v.train_end = m->train_end;
  out->val_begin = m->val_begin;
  out->val_end = m->val_end;
  return FH_OK;
}

void fh_cuda_market_free(fh_cuda_market* m) {
  if (!m) return;
  cudaFree(m->features);
  cudaFree(m->features_bf16);
  cudaFree(m->open);
  cudaFree(m->high);
  cudaFree(m->low);
  cudaFree(m->close);
  cudaFree(m->atr);
  cudaFree(m->session_start);
  memset(m, 0, sizeof *m);
}

static fh_status envs_alloc(fh_cuda_envs* e) {
  const size_t n = (size_t)e->n;
  FH_CUDA_TRY(cudaMalloc(&e->state, sizeof(fh_env_state) * n));
  FH_CUDA_TRY(cudaMalloc(&e->env_step, sizeof(int64_t)));
  FH_CUDA_TRY(cudaMalloc(&e->epsilon, sizeof(float)));
  FH_CUDA_TRY(cudaMalloc(&e->actions, sizeof(int32_t) * 3 * n));
  FH_CUDA_TRY(cudaMalloc(&e->reward, sizeof(float) * n));
  FH_CUDA_TRY(cudaMalloc(&e->done, sizeof(uint8_t) * n));
  FH_CUDA_TRY(cudaMalloc(&e->position, sizeof(int32_t) * n));
  FH_CUDA_TRY(cudaMalloc(&e->cursor, sizeof(int64_t) * n));
  FH_CUDA_TRY(cudaMalloc(&e->equity, sizeof(double) * n));
  FH_CUDA_TRY(cudaMalloc(&e->pnl, sizeof(double) * n));
  FH_CUDA_TRY(cudaMalloc(&e->cost, sizeof(double) * n));
  FH_CUDA_TRY(cudaMemset(e->state, 0, sizeof(fh_env_state) * n));
  FH_CUDA_TRY(cudaMemset(e->env_step, 0, sizeof(int64_t)));
  FH_CUDA_TRY(cudaMemset(e->epsilon, 0, sizeof(float)));
  FH_CUDA_TRY(cudaMemset(e->actions, 0, sizeof(int32_t) * 3 * n));
  return FH_OK;
}

fh_status fh_cuda_envs_alloc(const fh_config& cfg, const fh_env_params& p, int32_t n_features, fh_cuda_envs* out) {
  if (!out || cfg.n_envs <= 0 || n_features <= 0) return FH_ERR_INVALID_ARGUMENT;
  memset(out, 0, sizeof *out);
  out->n = cfg.n_envs;
  out->obs_dim = cfg.window * n_features + FH_ENV_ACCOUNT;
  out->p = p;
  out->seed = cfg.seed;
  int32_t off = 0;
  for (int d = 0; d < FH_MAX_BRANCHES; ++d) {
    out->n_act[d] = cfg.branch_sizes[d];
    out->q_off[d] = off;
    off += cfg.branch_sizes[d];
  }
  out->eps_start = cfg.eps_start;
  out->eps_end = cfg.eps_end;
  out->eps_decay_steps = cfg.eps_decay_steps;
  const fh_status st = envs_alloc(out);
  if (st != FH_OK) fh_cuda_envs_free(out);
  return st;
}

void fh_cuda_envs_free(fh_cuda_envs* e) {
  if (!e) return;
  cudaFree(e->state);
  cudaFree(e->env_step);
  cudaFree(e->epsilon);
  cudaFree(e->actions);
  cudaFree(e->reward);
  cudaFree(e->done);
  cudaFree(e->position);
  cudaFree(e->cursor);
  cudaFree(e->equity);
  cudaFree(e->pnl);
  cudaFree(e->cost);
  memset(e, 0, sizeof *e);
}
