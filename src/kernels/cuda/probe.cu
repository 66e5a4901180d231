// The availability probe: an empty kernel whose launch fails when the build has no machine code
// for the device (e.g. an sm_90a-only build on another architecture).
#include "kernels/cuda/common.cuh"

namespace deepinfer::kernels::cuda {
namespace {
__global__ void probe_kernel() {}
}  // namespace

cudaError_t launch_probe() {
  probe_kernel<<<1, 32>>>();
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  return cudaDeviceSynchronize();
}

}  // namespace deepinfer::kernels::cuda
