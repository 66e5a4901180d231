// The launch switches of launch.h that host code sets and every launch_kernel reads: the
// process-wide programmatic-dependent-launch switch (DEEPINFER_CUDA_PDL, set by CudaOps::create)
// and the launch counter the benchmarks read. Atomics: a backend may be made on one thread
// while another launches.
#include <atomic>

#include "kernels/cuda/launch.h"

namespace deepinfer::kernels::cuda {
namespace {
std::atomic<bool> g_programmatic_launch{false};
std::atomic<uint64_t> g_kernel_launches{0};
}  // namespace

void set_programmatic_launch(bool on) {
  g_programmatic_launch.store(on, std::memory_order_relaxed);
}
bool programmatic_launch() { return g_programmatic_launch.load(std::memory_order_relaxed); }
uint64_t kernel_launches() { return g_kernel_launches.load(std::memory_order_relaxed); }
void count_kernel_launch() { g_kernel_launches.fetch_add(1, std::memory_order_relaxed); }

}  // namespace deepinfer::kernels::cuda
