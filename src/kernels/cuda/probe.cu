// The availability probe: an empty kernel whose launch fails when the build has no machine code
// for the device (e.g. an sm_90a-only build on another architecture); and the process-wide
// programmatic-launch switch and the launch counter (launch.h).
#include <atomic>

#include "kernels/cuda/common.cuh"

namespace deepinfer::kernels::cuda {
namespace {
__global__ void probe_kernel() {}
}  // namespace

namespace {
bool g_programmatic_launch = false;
std::atomic<uint64_t> g_kernel_launches{0};
}  // namespace

void set_programmatic_launch(bool on) { g_programmatic_launch = on; }
bool programmatic_launch() { return g_programmatic_launch; }
uint64_t kernel_launches() { return g_kernel_launches.load(std::memory_order_relaxed); }
void count_kernel_launch() { g_kernel_launches.fetch_add(1, std::memory_order_relaxed); }

cudaError_t launch_probe() {
  probe_kernel<<<1, 32>>>();
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  return cudaDeviceSynchronize();
}

}  // namespace deepinfer::kernels::cuda
