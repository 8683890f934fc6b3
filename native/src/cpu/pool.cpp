/* pool.cpp — fixed thread pool: one generation per run(), chunk k of K goes to thread k. */
#include "pool.h"

fh_pool::fh_pool(int threads) {
  if (threads < 1) threads = 1;
  for (int i = 1; i < threads; ++i) workers_.emplace_back(&fh_pool::worker_main, this, i);
}

fh_pool::~fh_pool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  go_.notify_all();
  for (auto& w : workers_) w.join();
}

static void chunk_bounds(int64_t n, int64_t chunks, int64_t k, int64_t* b, int64_t* e) {
  *b = n * k / chunks;
  *e = n * (k + 1) / chunks;
}

void fh_pool::run(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t cost) {
  if (n <= 0) return;
  const int64_t chunks = (int64_t)threads() < n ? (int64_t)threads() : n;
  if (chunks <= 1 || workers_.empty() || (double)n * (double)cost < (double)FH_POOL_MIN_WORK) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_ = n;
    chunks_ = chunks;
    pending_ = (int)workers_.size();
    ++generation_;
  }
  go_.notify_all();
  int64_t b, e;
  chunk_bounds(n, chunks, 0, &b, &e);
  fn(b, e);
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [this] { return pending_ == 0; });
  fn_ = nullptr;
}

void fh_pool::worker_main(int id) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t)>* fn;
    int64_t n, chunks;
    {
      std::unique_lock<std::mutex> lock(mu_);
      go_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      fn = fn_;
      n = n_;
      chunks = chunks_;
    }
    if (id < chunks) {
      int64_t b, e;
      chunk_bounds(n, chunks, id, &b, &e);
      (*fn)(b, e);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_.notify_one();
    }
  }
}
