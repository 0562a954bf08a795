// ThreadPool: one generation counter per job; the caller's thread runs share 0.
#include "engine/thread_pool.h"

namespace deepinfer::engine {

ThreadPool::ThreadPool(int32_t num_threads) : num_threads_(num_threads < 1 ? 1 : num_threads) {
  for (int32_t t = 1; t < num_threads_; ++t) workers_.emplace_back([this, t] { work(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  start_.notify_all();
  for (std::thread& w : workers_) w.join();
}

void ThreadPool::work(int32_t thread) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int32_t, int32_t)>* job;
    int32_t n;
    {
      std::unique_lock lock(mutex_);
      start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = job_size_;
    }
    for (int32_t i = thread; i < n; i += num_threads_) (*job)(i, thread);
    std::lock_guard lock(mutex_);
    if (--running_ == 0) done_.notify_one();
  }
}

void ThreadPool::parallel_for(int32_t n, const std::function<void(int32_t, int32_t)>& fn) {
  if (num_threads_ == 1 || n <= 1) {
    for (int32_t i = 0; i < n; ++i) fn(i, 0);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    job_ = &fn;
    job_size_ = n;
    running_ = num_threads_ - 1;
    ++generation_;
  }
  start_.notify_all();
  for (int32_t i = 0; i < n; i += num_threads_) fn(i, 0);
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return running_ == 0; });
}

}  // namespace deepinfer::engine
