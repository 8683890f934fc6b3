/*
 * pool.h — a small fixed thread pool for the CPU backend.
 *
 *   pool.run(n, fn, cost)   calls fn(begin, end) on contiguous chunks covering [0, n), in parallel,
 *                     and returns when all chunks are done; with n*cost (work units, ~flops) under
 *                     FH_POOL_MIN_WORK it runs inline, since waking threads costs more. Chunks are a pure function of (n, threads),
 *                     and every caller writes disjoint outputs per index, so results never depend on
 *                     scheduling. The calling thread works too. Not reentrant.
 */
#ifndef FOXHUNT_CPU_POOL_H
#define FOXHUNT_CPU_POOL_H

#include <stdint.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#define FH_POOL_MIN_WORK (1 << 16)

class fh_pool {
 public:
  explicit fh_pool(int threads);
  ~fh_pool();
  fh_pool(const fh_pool&) = delete;
  fh_pool& operator=(const fh_pool&) = delete;

  int threads() const { return (int)workers_.size() + 1; }
  void run(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t cost = 1 << 20);

 private:
  void worker_main(int id);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable go_, done_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunks_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

#endif /* FOXHUNT_CPU_POOL_H */
