// A small fixed-size thread pool for data-parallel kernels: parallel_for(n, fn) splits [0, n) into
// contiguous chunks, runs fn(begin, end) on the workers and the caller, and returns when all are
// done. Chunking depends only on n and the thread count, so results are deterministic.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace deepinfer::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads ≤ 1: everything runs on the caller
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // fn(begin, end) over [0, n) in at most size() chunks of at least `grain` items.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0, job_chunk_ = 0;
  int job_parts_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

// Runs fn over [0, n) on pool when it is non-null and has threads, else inline.
void parallel_for(ThreadPool* pool, int64_t n, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn);

}  // namespace deepinfer::cpu
