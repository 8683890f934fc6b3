/*
 * collect_ahead.h — what a collection overwrites, kept aside so that the next epoch's collection can run early
 * (the trainer's collect-ahead, trainer_cuda.cu): beside this epoch's evaluation, which leaves most SMs idle,
 * instead of at the start of the next epoch.
 *
 * A collection of T steps from the device's env-step counter c writes, and nothing else of the trainer's state:
 *   the N env states;
 *   replay rows c .. c + T - 1 (ring rows mod R): bar, actions, done, reward, account features;
 *   the leaves of those rows (0) and of rows c - n .. c + T - n - 1 (max priority);
 *   the counter (+T) and the sum tree's inner levels (rebuilt from the leaves).
 * A backup holds the env states and the ring rows c - n .. c + T - 1 (min(T + n, R) rows, wrapping) of every
 * replay array and of the leaves, as they were before the collection. With it the trainer can
 *   - read the state as of before the collection (checkpoints: the backed-up rows replace the live ones), and
 *   - undo the collection (restore + full tree rebuild) when something between epochs changes what it used
 *     (set_params, the narrow env/replay entry points); the next epoch then collects as usual.
 * Buffers are allocated once (synchronous, not capturable); save and restore only enqueue copies (and the
 * rebuild) on a stream.
 */
#ifndef FH_CUDA_COLLECT_AHEAD_H
#define FH_CUDA_COLLECT_AHEAD_H

#include "replay.h"

struct fh_collect_backup {
  int64_t rows;          /* ring rows a backup holds: min(T + n, R) */
  int64_t first;         /* ring row of its first row (set by save) */
  int32_t n_envs;        /* N */
  fh_env_state* state;   /* (N) */
  int32_t* bar;          /* (rows * N) */
  uint8_t* act;          /* (rows * N, 3) */
  uint8_t* done;         /* (rows * N) */
  float* reward;         /* (rows * N) */
  float* account;        /* (rows * N, 8) */
  float* leaf;           /* (rows * N) */
};

/* Buffers for collections of `steps` steps into r (N envs). On failure frees what it took. */
fh_status fh_collect_backup_alloc(const fh_cuda_replay& r, int32_t steps, fh_collect_backup* out);
void fh_collect_backup_free(fh_collect_backup* b); /* idempotent; zeroes the struct */

/* Before a collection whose first logical row is `row` (the device counter): copies what it will overwrite,
 * on stream s. */
fh_status fh_collect_backup_save(fh_collect_backup* b, const fh_cuda_envs& e, const fh_cuda_replay& r, int64_t row,
                                 cudaStream_t s);

/* Undo that collection: the backed-up env states, rows and leaves back in place, the counter back to `row`, and a
 * full rebuild of the sum tree, on stream s. (The caller refills whatever it derives from those rows.) */
fh_status fh_collect_backup_restore(const fh_collect_backup& b, const fh_cuda_envs& e, const fh_cuda_replay& r,
                                    int64_t row, cudaStream_t s);

/* Host copies of the whole state (N env states; capacity-long replay arrays and leaves, the checkpoint's
 * layout): the backed-up parts overwrite theirs (synchronous reads), so they read as before the collection. */
struct fh_collect_host_view {
  fh_env_state* state;
  int32_t* bar;
  uint8_t* act;
  uint8_t* done;
  float* reward;
  float* account;
  float* leaf;
};
fh_status fh_collect_backup_read(const fh_collect_backup& b, const fh_cuda_replay& r, const fh_collect_host_view& h);

#endif /* FH_CUDA_COLLECT_AHEAD_H */
