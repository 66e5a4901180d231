// ThreadPool: a fixed set of worker threads for data-parallel loops (the CPU opt backend).
//
// One operation: parallel_for(n, fn) splits [0, n) into contiguous chunks, runs fn(begin, end)
// on the workers and the calling thread, and returns when all chunks are done. Chunks are
// claimed from an atomic counter, so a thread slowed down by another process does not hold the
// loop back. Results must not depend on the split (each index is computed independently), which
// keeps outputs identical for every thread count. A parallel_for issued from inside a chunk runs
// inline (no nested parallelism, no deadlock). One loop at a time per pool: concurrent callers
// are serialised.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace deepinfer {

class ThreadPool {
 public:
  // num_threads counts the caller; 0 = std::thread::hardware_concurrency(). 1 = no workers.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // grain: minimum indices per chunk (0 = about 4 chunks per thread).
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 0);

 private:
  void worker_loop();
  void run_chunks();

  std::vector<std::thread> workers_;
  std::mutex call_mutex_;  // serialises parallel_for callers
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  uint64_t generation_ = 0;
  int busy_ = 0;
  bool stop_ = false;

  // The current loop.
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 1;
  std::atomic<int64_t> next_{0};
};

}  // namespace deepinfer
