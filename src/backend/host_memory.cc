// Page-locked host allocations through the installed hooks (see host_memory.h).
#include "backend/host_memory.h"

#include <atomic>
#include <cstdlib>

namespace deepinfer::backend {
namespace {

// The hooks are read on every large allocation and set when a device backend is created: two
// atomics (a device backend's hooks are functions with static lifetime).
std::atomic<void (*)(void*, size_t)> g_pin{nullptr};
std::atomic<void (*)(void*)> g_unpin{nullptr};
std::atomic<bool> g_pinning{true};

constexpr size_t kPage = 4096;

size_t whole_pages(size_t bytes) { return (bytes == 0 ? 1 : bytes + kPage - 1) / kPage * kPage; }

}  // namespace

void set_host_memory_hooks(const HostMemoryHooks& hooks) {
  g_pin.store(hooks.pin);
  g_unpin.store(hooks.unpin);
}

void set_host_pinning(bool on) { g_pinning.store(on); }

void* pinned_host_alloc(size_t bytes) {
  const size_t rounded = whole_pages(bytes);  // whole pages to lock
  void* p = std::aligned_alloc(kPage, rounded);
  if (p == nullptr) throw std::bad_alloc();
  if (rounded >= kPinMinBytes && g_pinning.load()) {
    if (auto pin = g_pin.load()) pin(p, rounded);
  }
  return p;
}

void pinned_host_free(void* p, size_t bytes) noexcept {
  if (p == nullptr) return;
  // Unpinned whenever it may have been pinned (an unpin of memory never pinned does nothing).
  if (whole_pages(bytes) >= kPinMinBytes) {
    if (auto unpin = g_unpin.load()) unpin(p);
  }
  std::free(p);
}

}  // namespace deepinfer::backend
