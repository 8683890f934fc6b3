/*
 * collect_ahead.cu — the backup of what a collection overwrites (collect_ahead.h).
 */
#include "collect_ahead.h"

#include <string.h>

namespace {

/* One replay-shaped array: its live device copy (capacity slots), its backup (rows * N slots) and the bytes
 * of one slot. */
struct fh_slot_array {
  char* live;
  char* bk;
  size_t per_slot;
};

constexpr int kArrays = 6;

void arrays(const fh_collect_backup& b, const fh_cuda_replay& r, fh_slot_array out[kArrays]) {
  out[0] = {reinterpret_cast<char*>(r.v.bar), reinterpret_cast<char*>(b.bar), sizeof(int32_t)};
  out[1] = {reinterpret_cast<char*>(r.v.act), reinterpret_cast<char*>(b.act), 3};
  out[2] = {reinterpret_cast<char*>(r.v.done), reinterpret_cast<char*>(b.done), 1};
  out[3] = {reinterpret_cast<char*>(r.v.reward), reinterpret_cast<char*>(b.reward), sizeof(float)};
  out[4] = {reinterpret_cast<char*>(r.v.account), reinterpret_cast<char*>(b.account), sizeof(float) * FH_ENV_ACCOUNT};
  out[5] = {reinterpret_cast<char*>(r.tree.leaf), reinterpret_cast<char*>(b.leaf), sizeof(float)};
}

/* The backup's rows as at most two runs of consecutive ring rows: f(first live slot, first backup slot, slots). */
template <typename F>
fh_status each_run(const fh_collect_backup& b, const fh_cuda_replay& r, F f) {
  const int64_t N = r.n_envs, R = r.rows;
  const int64_t len1 = b.rows < R - b.first ? b.rows : R - b.first;
  FH_TRY(f(b.first * N, (int64_t)0, len1 * N));
  if (b.rows > len1) FH_TRY(f((int64_t)0, len1 * N, (b.rows - len1) * N));
  return FH_OK;
}

fh_status copy_rows(const fh_collect_backup& b, const fh_cuda_replay& r, bool to_backup, cudaStream_t s) {
  fh_slot_array a[kArrays];
  arrays(b, r, a);
  return each_run(b, r, [&](int64_t live, int64_t bk, int64_t slots) -> fh_status {
    for (int i = 0; i < kArrays; ++i) {
      char* lp = a[i].live + (size_t)live * a[i].per_slot;
      char* bp = a[i].bk + (size_t)bk * a[i].per_slot;
      const size_t bytes = (size_t)slots * a[i].per_slot;
      FH_CUDA_TRY(cudaMemcpyAsync(to_backup ? bp : lp, to_backup ? lp : bp, bytes, cudaMemcpyDeviceToDevice, s));
    }
    return FH_OK;
  });
}

fh_status backup_alloc(fh_collect_backup* b) {
  const size_t slots = (size_t)(b->rows * b->n_envs);
  FH_CUDA_TRY(cudaMalloc(&b->state, sizeof(fh_env_state) * (size_t)b->n_envs));
  FH_CUDA_TRY(cudaMalloc(&b->bar, sizeof(int32_t) * slots));
  FH_CUDA_TRY(cudaMalloc(&b->act, 3 * slots));
  FH_CUDA_TRY(cudaMalloc(&b->done, slots));
  FH_CUDA_TRY(cudaMalloc(&b->reward, sizeof(float) * slots));
  FH_CUDA_TRY(cudaMalloc(&b->account, sizeof(float) * FH_ENV_ACCOUNT * slots));
  FH_CUDA_TRY(cudaMalloc(&b->leaf, sizeof(float) * slots));
  return FH_OK;
}

}  // namespace

fh_status fh_collect_backup_alloc(const fh_cuda_replay& r, int32_t steps, fh_collect_backup* out) {
  if (!out || steps <= 0 || r.rows <= 0 || r.n_envs <= 0) return FH_ERR_INVALID_ARGUMENT;
  memset(out, 0, sizeof *out);
  const int64_t want = (int64_t)steps + r.n_step;
  out->rows = want < r.rows ? want : r.rows;
  out->n_envs = r.n_envs;
  const fh_status st = backup_alloc(out);
  if (st != FH_OK) fh_collect_backup_free(out);
  return st;
}

void fh_collect_backup_free(fh_collect_backup* b) {
  if (!b) return;
  cudaFree(b->state);
  cudaFree(b->bar);
  cudaFree(b->act);
  cudaFree(b->done);
  cudaFree(b->reward);
  cudaFree(b->account);
  cudaFree(b->leaf);
  memset(b, 0, sizeof *b);
}

fh_status fh_collect_backup_save(fh_collect_backup* b, const fh_cuda_envs& e, const fh_cuda_replay& r, int64_t row,
                                 cudaStream_t s) {
  if (!b || !b->state || row < 0 || e.n != r.n_envs || b->n_envs != r.n_envs) return FH_ERR_INVALID_ARGUMENT;
  const int64_t R = r.rows;
  b->first = ((row - r.n_step) % R + R) % R;
  FH_CUDA_TRY(cudaMemcpyAsync(b->state, e.state, sizeof(fh_env_state) * (size_t)e.n, cudaMemcpyDeviceToDevice, s));
  return copy_rows(*b, r, true, s);
}

fh_status fh_collect_backup_restore(const fh_collect_backup& b, const fh_cuda_envs& e, const fh_cuda_replay& r,
                                    int64_t row, cudaStream_t s) {
  if (!b.state || row < 0 || e.n != r.n_envs || b.n_envs != r.n_envs) return FH_ERR_INVALID_ARGUMENT;
  FH_CUDA_TRY(cudaMemcpyAsync(e.state, b.state, sizeof(fh_env_state) * (size_t)e.n, cudaMemcpyDeviceToDevice, s));
  FH_TRY(copy_rows(b, r, false, s));
  /* the counter from a pageable host value: cudaMemcpyAsync stages it before returning */
  FH_CUDA_TRY(cudaMemcpyAsync(e.env_step, &row, sizeof row, cudaMemcpyHostToDevice, s));
  return fh_launch_tree_rebuild(r.tree, s);
}

fh_status fh_collect_backup_read(const fh_collect_backup& b, const fh_cuda_replay& r, const fh_collect_host_view& h) {
  if (!b.state || !h.state || !h.bar || !h.act || !h.done || !h.reward || !h.account || !h.leaf)
    return FH_ERR_INVALID_ARGUMENT;
  FH_CUDA_TRY(cudaMemcpy(h.state, b.state, sizeof(fh_env_state) * (size_t)b.n_envs, cudaMemcpyDeviceToHost));
  fh_slot_array a[kArrays];
  arrays(b, r, a);
  char* host[kArrays] = {reinterpret_cast<char*>(h.bar),    reinterpret_cast<char*>(h.act),
                   reinterpret_cast<char*>(h.done),   reinterpret_cast<char*>(h.reward),
                   reinterpret_cast<char*>(h.account), reinterpret_cast<char*>(h.leaf)};
  return each_run(b, r, [&](int64_t live, int64_t bk, int64_t slots) -> fh_status {
    for (int i = 0; i < kArrays; ++i)
      FH_CUDA_TRY(cudaMemcpy(host[i] + (size_t)live * a[i].per_slot, a[i].bk + (size_t)bk * a[i].per_slot,
                             (size_t)slots * a[i].per_slot, cudaMemcpyDeviceToHost));
    return FH_OK;
  });
}
