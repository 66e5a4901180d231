// Host memory that device backends copy into at full speed: the step outputs a forward hands
// back to the host (logits of host-sampled rows, MTP's hidden rows). A GPU copies into
// page-locked memory several times faster than into pageable memory (stop 45, H200,
// decode_bench: 52-55 GB/s against 11-12 GB/s), and a 64-row step's FP32 logits at V4's
// 129,280 ids are 33 MB. A device backend installs hooks that page-lock such allocations
// (CudaOps: cudaHostRegister); without one (the CPU backends) this is plain aligned memory.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace deepinfer::backend {

// pin(p, bytes) page-locks an allocation (failure is not an error: it stays pageable);
// unpin(p) undoes it before the memory is freed (a no-op for an allocation never pinned).
struct HostMemoryHooks {
  void (*pin)(void* p, size_t bytes) = nullptr;
  void (*unpin)(void* p) = nullptr;
};
// Installed by a device backend when it is created (CudaOps::create); later allocations of
// pinned_host_alloc use them.
void set_host_memory_hooks(const HostMemoryHooks& hooks);
// Off: later allocations stay pageable (the A/B switch of decode_bench's --pageable-outputs);
// memory pinned before is still unpinned when freed. On by default.
void set_host_pinning(bool on);

// Allocations below this stay pageable: page-locking costs more than it saves on small copies.
inline constexpr size_t kPinMinBytes = size_t{1} << 20;

void* pinned_host_alloc(size_t bytes);  // throws std::bad_alloc
void pinned_host_free(void* p, size_t bytes) noexcept;

template <class T>
struct PinnedHostAllocator {
  using value_type = T;
  PinnedHostAllocator() = default;
  template <class U>
  PinnedHostAllocator(const PinnedHostAllocator<U>&) noexcept {}  // NOLINT: rebinding
  T* allocate(size_t n) { return static_cast<T*>(pinned_host_alloc(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { pinned_host_free(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const PinnedHostAllocator<U>&) const noexcept {
    return true;
  }
};

// The floats a step hands back (model::StepOutputs).
using HostFloats = std::vector<float, PinnedHostAllocator<float>>;
// A pageable copy, for code that keeps std::vector<float> (tests, tools).
inline std::vector<float> to_vector(const HostFloats& v) { return {v.begin(), v.end()}; }

}  // namespace deepinfer::backend
