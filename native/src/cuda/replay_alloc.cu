/*
 * replay_alloc.cu — allocation for replay.h (ring of rows, sum tree, sampled batch). Once at create;
 * synchronous. Everything starts at zero (no transition sampleable, the tree consistent with its
 * leaves, no l1 node dirty), max_priority at 1. FH_PER_FULL_REBUILD=1 (read here): the priority
 * update rebuilds the whole tree instead of the dirty l1 nodes (for bit-identity checks).
 */
#include "replay.h"

#include <stdlib.h>
#include <string.h>

#define FH_ALLOC_ZERO(ptr, bytes)                          \
  do {                                                     \
    FH_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&(ptr)), (bytes))); \
    FH_CUDA_TRY(cudaMemset((ptr), 0, (bytes)));            \
  } while (0)

static fh_status tree_alloc(fh_cuda_sumtree* t) {
  FH_ALLOC_ZERO(t->leaf, sizeof(float) * (size_t)t->padded);
  FH_ALLOC_ZERO(t->l1, sizeof(double) * (size_t)(t->padded / FH_TREE_FANOUT));
  FH_ALLOC_ZERO(t->cnt1, sizeof(uint8_t) * (size_t)(t->padded / FH_TREE_FANOUT));
  FH_ALLOC_ZERO(t->dirty, sizeof(uint8_t) * (size_t)(t->padded / FH_TREE_FANOUT));
  FH_ALLOC_ZERO(t->l2, sizeof(double) * (size_t)(t->padded / (FH_TREE_FANOUT * FH_TREE_FANOUT)));
  FH_ALLOC_ZERO(t->cnt2, sizeof(int32_t) * (size_t)(t->padded / (FH_TREE_FANOUT * FH_TREE_FANOUT)));
  FH_ALLOC_ZERO(t->l3, sizeof(double) * (size_t)t->n_top);
  FH_ALLOC_ZERO(t->cnt3, sizeof(int64_t) * (size_t)t->n_top);
  FH_ALLOC_ZERO(t->total, sizeof(double));
  FH_ALLOC_ZERO(t->count, sizeof(int64_t));
  FH_ALLOC_ZERO(t->ticket, sizeof(unsigned int));
  return FH_OK;
}

fh_status fh_cuda_sumtree_alloc(int64_t capacity, fh_cuda_sumtree* out) {
  if (!out || capacity <= 0 || capacity > ((int64_t)1 << 30)) return FH_ERR_INVALID_ARGUMENT;
  memset(out, 0, sizeof *out);
  out->capacity = capacity;
  out->padded = CEIL_DIV(capacity, (int64_t)FH_TREE_BLOCK_LEAVES) * FH_TREE_BLOCK_LEAVES;
  out->n_top = (int32_t)(out->padded / FH_TREE_BLOCK_LEAVES);
  const fh_status st = tree_alloc(out);
  if (st != FH_OK) fh_cuda_sumtree_free(out);
  return st;
}

void fh_cuda_sumtree_free(fh_cuda_sumtree* t) {
  if (!t) return;
  cudaFree(t->leaf);
  cudaFree(t->l1);
  cudaFree(t->cnt1);
  cudaFree(t->dirty);
  cudaFree(t->l2);
  cudaFree(t->cnt2);
  cudaFree(t->l3);
  cudaFree(t->cnt3);
  cudaFree(t->total);
  cudaFree(t->count);
  cudaFree(t->ticket);
  memset(t, 0, sizeof *t);
}

static fh_status replay_alloc(fh_cuda_replay* r) {
  const size_t c = (size_t)r->capacity;
  FH_ALLOC_ZERO(r->v.bar, sizeof(int32_t) * c);
  FH_ALLOC_ZERO(r->v.act, sizeof(uint8_t) * 3 * c);
  FH_ALLOC_ZERO(r->v.done, sizeof(uint8_t) * c);
  FH_ALLOC_ZERO(r->v.reward, sizeof(float) * c);
  FH_ALLOC_ZERO(r->v.account, sizeof(float) * FH_ENV_ACCOUNT * c);
  FH_CUDA_TRY(cudaMalloc(&r->max_priority, sizeof(float)));
  const float one = 1.0f;
  FH_CUDA_TRY(cudaMemcpy(r->max_priority, &one, sizeof one, cudaMemcpyHostToDevice));
  return fh_cuda_sumtree_alloc(r->capacity, &r->tree);
}

fh_status fh_cuda_replay_alloc(const fh_config& cfg, fh_cuda_replay* out) {
  if (!out || cfg.n_envs <= 0) return FH_ERR_INVALID_ARGUMENT;
  memset(out, 0, sizeof *out);
  out->n_envs = cfg.n_envs;
  out->rows = cfg.replay_capacity / cfg.n_envs;
  out->capacity = out->rows * cfg.n_envs;
  out->n_step = cfg.n_step;
  out->gamma = cfg.gamma;
  out->alpha = cfg.per_alpha;
  out->eps = cfg.per_eps;
  out->v.rows = out->rows;
  out->v.n_envs = cfg.n_envs;
  const char* fr = getenv("FH_PER_FULL_REBUILD");
  out->full_rebuild = fr && strcmp(fr, "1") == 0;
  if (out->rows <= cfg.n_step || cfg.n_step < 1) return FH_ERR_INVALID_CONFIG;
  const fh_status st = replay_alloc(out);
  if (st != FH_OK) fh_cuda_replay_free(out);
  return st;
}

void fh_cuda_replay_free(fh_cuda_replay* r) {
  if (!r) return;
  cudaFree(r->v.bar);
  cudaFree(r->v.act);
  cudaFree(r->v.done);
  cudaFree(r->v.reward);
  cudaFree(r->v.account);
  cudaFree(r->max_priority);
  fh_cuda_sumtree_free(&r->tree);
  memset(r, 0, sizeof *r);
}

static fh_status batch_alloc(fh_cuda_batch* b) {
  const size_t n = (size_t)b->cap;
  FH_ALLOC_ZERO(b->slot, sizeof(int32_t) * n);
  FH_ALLOC_ZERO(b->prob, sizeof(double) * n);
  FH_ALLOC_ZERO(b->weight, sizeof(float) * n);
  FH_ALLOC_ZERO(b->beta, sizeof(float));
  FH_ALLOC_ZERO(b->min_prob_bits, sizeof(unsigned int));
  FH_ALLOC_ZERO(b->act, sizeof(int32_t) * 3 * n);
  FH_ALLOC_ZERO(b->ret, sizeof(float) * n);
  FH_ALLOC_ZERO(b->disc, sizeof(float) * n);
  FH_ALLOC_ZERO(b->nbar, sizeof(int32_t) * n);
  FH_ALLOC_ZERO(b->nslot, sizeof(int32_t) * n);
  return FH_OK;
}

fh_status fh_cuda_batch_alloc(int32_t cap, fh_cuda_batch* out) {
  if (!out || cap <= 0) return FH_ERR_INVALID_ARGUMENT;
  memset(out, 0, sizeof *out);
  out->cap = cap;
  const fh_status st = batch_alloc(out);
  if (st != FH_OK) fh_cuda_batch_free(out);
  return st;
}

void fh_cuda_batch_free(fh_cuda_batch* b) {
  if (!b) return;
  cudaFree(b->slot);
  cudaFree(b->prob);
  cudaFree(b->weight);
  cudaFree(b->beta);
  cudaFree(b->min_prob_bits);
  cudaFree(b->act);
  cudaFree(b->ret);
  cudaFree(b->disc);
  cudaFree(b->nbar);
  cudaFree(b->nslot);
  memset(b, 0, sizeof *b);
}
