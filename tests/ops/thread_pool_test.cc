// base/thread_pool.h, tested here because the opt backend is its user: every index is visited
// exactly once for any size and thread count, nested loops run inline, and the pool survives
// many back-to-back loops (the generation counter and the busy count).
#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace deepinfer {
namespace {

TEST(ThreadPool, EveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 7, 100, 1001}) {
      for (int64_t grain : {0, 1, 3, 1000}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        pool.parallel_for(
            n,
            [&](int64_t b, int64_t e) {
              ASSERT_LE(0, b);
              ASSERT_LE(b, e);
              ASSERT_LE(e, n);
              for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
            },
            grain);
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << threads << " " << n << " " << i;
        }
      }
    }
  }
}

TEST(ThreadPool, NestedLoopsRunInlineAndManyLoopsComplete) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  for (int rep = 0; rep < 2000; ++rep) {
    pool.parallel_for(
        8,
        [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            pool.parallel_for(4, [&](int64_t b2, int64_t e2) { sum.fetch_add(e2 - b2); });
          }
        },
        1);
  }
  EXPECT_EQ(sum.load(), 2000 * 8 * 4);
}

}  // namespace
}  // namespace deepinfer
