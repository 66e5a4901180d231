// ThreadPool implementation: generation-counted wake-up with a bounded spin, join-counted
// completion, atomic chunk counter (see thread_pool.h for why).
#include "base/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DI_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define DI_CPU_RELAX() asm volatile("yield")
#else
#define DI_CPU_RELAX() ((void)0)
#endif

namespace deepinfer {
namespace {
thread_local bool t_inside_pool = false;

// How long a waiting thread spins before it sleeps: longer than the gap between two loops of a
// model step (a few us of serial work), short enough that an idle pool costs nothing measurable.
constexpr auto kSpin = std::chrono::microseconds(100);

// Spins until pred() or kSpin elapsed; true when pred() held.
template <typename Pred>
bool spin_until(Pred pred) {
  const auto t_end = std::chrono::steady_clock::now() + kSpin;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (pred()) return true;
      DI_CPU_RELAX();
    }
    if (std::chrono::steady_clock::now() >= t_end) return pred();
  }
}
}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  int n = num_threads > 0 ? num_threads : static_cast<int>(std::thread::hardware_concurrency());
  n = std::max(n, 1);
  workers_.reserve(static_cast<size_t>(n - 1));
  for (int i = 1; i < n; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::run_chunks() {
  const bool was_inside = t_inside_pool;
  t_inside_pool = true;
  for (;;) {
    const int64_t begin = next_.fetch_add(chunk_);
    if (begin >= n_) break;
    (*fn_)(begin, std::min(n_, begin + chunk_));
  }
  t_inside_pool = was_inside;
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; });
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_.load() != seen; });
      if (stop_) return;
      seen = generation_.load();
      if (!open_) continue;  // the caller already finished this loop without us
      joined_.fetch_add(1);
    }
    run_chunks();
    if (joined_.fetch_sub(1) == 1) {
      // The caller may be asleep on done_: take the mutex so the notify cannot fall between
      // its predicate check and its wait.
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t grain) {
  if (n <= 0) return;
  const int threads = size();
  int64_t chunk = grain > 0 ? grain : std::max<int64_t>(1, n / (4 * threads));
  if (threads == 1 || t_inside_pool || chunk >= n) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    n_ = n;
    chunk_ = chunk;
    next_.store(0);
    open_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();  // no system call when every worker is still spinning
  run_chunks();
  {
    // Every chunk is claimed: close the loop, then wait for the workers that joined it.
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = false;
  }
  if (!spin_until([&] { return joined_.load(std::memory_order_acquire) == 0; })) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return joined_.load() == 0; });
  }
  fn_ = nullptr;
}

}  // namespace deepinfer
