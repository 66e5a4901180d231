// ThreadPool: a fixed set of worker threads for data-parallel loops (the CPU opt backend).
//
// One operation: parallel_for(n, fn) splits [0, n) into contiguous chunks, runs fn(begin, end)
// on the workers and the calling thread, and returns when all chunks are done. Chunks are
// claimed from an atomic counter, so a thread slowed down by another process does not hold the
// loop back. Results must not depend on the split (each index is computed independently), which
// keeps outputs identical for every thread count. A parallel_for issued from inside a chunk runs
// inline (no nested parallelism, no deadlock). One loop at a time per pool: concurrent callers
// are serialised.
//
// Hand-offs: a model step issues hundreds of short loops, and waking a sleeping thread costs
// 10-100 us on a VM (more than a tiny model's whole op), so an idle worker spins briefly on the
// loop generation before it sleeps on the condition variable, and the caller spins briefly on
// the joined count before it sleeps. The caller waits only for workers that joined the loop:
// a worker that wakes after the caller has done every chunk finds the loop closed and goes
// back to waiting, so a descheduled worker never delays a loop it took no part in.
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
  std::mutex mutex_;       // guards the loop fields and open_/joined_ transitions
  std::condition_variable wake_;
  std::condition_variable done_;
  std::atomic<uint64_t> generation_{0};  // bumped (under mutex_) when a loop opens
  std::atomic<int> joined_{0};           // workers inside the current loop
  bool open_ = false;                    // workers may still join the current loop
  bool stop_ = false;

  // The current loop.
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int64_t chunk_ = 1;
  std::atomic<int64_t> next_{0};
};

}  // namespace deepinfer
