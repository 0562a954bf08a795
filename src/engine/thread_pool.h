// ThreadPool: a fixed set of workers for parallel_for over [0, n) with a static split
// (item i runs on worker i % threads), so which thread computes what never depends on timing.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace deepinfer::engine {

class ThreadPool {
 public:
  explicit ThreadPool(int32_t num_threads);  // 1: run inline, no workers
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int32_t num_threads() const { return num_threads_; }
  // Calls fn(i, thread) for every i in [0, n); returns when all are done.
  void parallel_for(int32_t n, const std::function<void(int32_t, int32_t)>& fn);

 private:
  void work(int32_t thread);

  int32_t num_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_, done_;
  const std::function<void(int32_t, int32_t)>* job_ = nullptr;
  int32_t job_size_ = 0;
  uint64_t generation_ = 0;
  int32_t running_ = 0;
  bool stop_ = false;
};

}  // namespace deepinfer::engine
