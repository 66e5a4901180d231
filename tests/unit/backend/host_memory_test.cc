// backend/host_memory.h with hooks standing in for a device backend's page-locking: large
// allocations are locked once and unlocked before they are freed (also when a vector grows or
// is destroyed), small ones never, the A/B switch stops new locks but still unlocks what was
// locked, and memory is whole aligned pages either way.
#include "backend/host_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <mutex>

namespace deepinfer::backend {
namespace {

std::mutex g_mu;
std::map<void*, size_t> g_locked;  // what the stand-in hooks hold locked
int g_locks = 0, g_unlocks = 0;

void lock(void* p, size_t bytes) {
  std::lock_guard<std::mutex> l(g_mu);
  ++g_locks;
  g_locked[p] = bytes;
}
void unlock(void* p) {
  std::lock_guard<std::mutex> l(g_mu);
  if (g_locked.erase(p) > 0) ++g_unlocks;  // (unlocking memory never locked does nothing)
}

struct Hooks : ::testing::Test {
  void SetUp() override {
    g_locked.clear();
    g_locks = g_unlocks = 0;
    set_host_memory_hooks({lock, unlock});
    set_host_pinning(true);
  }
  void TearDown() override {
    set_host_memory_hooks({});
    set_host_pinning(true);
  }
};

TEST_F(Hooks, LargeAllocationsAreLockedOnceAndUnlockedBeforeTheyAreFreed) {
  {
    HostFloats v(3 << 20);  // 12 MiB: locked
    EXPECT_EQ(g_locks, 1);
    EXPECT_EQ(g_locked.count(v.data()), 1u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % 4096, 0u);
    EXPECT_GE(g_locked[v.data()], v.size() * sizeof(float));
    void* before = v.data();
    v.resize(v.size() * 2);  // grows: the new buffer locked, the old one unlocked
    EXPECT_NE(v.data(), before);
    EXPECT_EQ(g_locks, 2);
    EXPECT_EQ(g_unlocks, 1);
    EXPECT_EQ(g_locked.size(), 1u);
    v.clear();  // keeps its buffer
    v.resize(10);
    EXPECT_EQ(g_locks, 2);
  }
  EXPECT_EQ(g_unlocks, 2);
  EXPECT_TRUE(g_locked.empty());
}

TEST_F(Hooks, SmallAllocationsStayPageable) {
  HostFloats v(1000);
  EXPECT_EQ(g_locks, 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % 4096, 0u);
}

TEST_F(Hooks, TheSwitchStopsNewLocksButStillUnlocksOldOnes) {
  auto* locked = new HostFloats(1 << 20);
  set_host_pinning(false);
  {
    HostFloats v(1 << 20);
    EXPECT_EQ(g_locks, 1);  // only the first
  }
  delete locked;
  EXPECT_EQ(g_unlocks, 1);
  EXPECT_TRUE(g_locked.empty());
}

TEST(HostMemory, WithoutHooksItIsPlainMemory) {
  HostFloats v(2 << 20, 1.5f);
  EXPECT_EQ(v[123], 1.5f);
  EXPECT_EQ(to_vector(v), std::vector<float>(2 << 20, 1.5f));
}

}  // namespace
}  // namespace deepinfer::backend
