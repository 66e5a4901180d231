// Rank-order sum (rank_order_sum.h): one thread per element, a grid-stride loop, the ranks
// added in order inside the thread. Only additions, so nvcc has nothing to contract into FMAs:
// the bits equal the host fold's (parallel::sum_in_rank_order).
#include "kernels/cuda/parallel/rank_order_sum.h"

namespace deepinfer::kernels::cuda {
namespace {

template <typename T>
__global__ void rank_order_sum_kernel(const T* gathered, int ranks, int64_t count, T* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    T acc = gathered[i];
    for (int r = 1; r < ranks; ++r) acc += gathered[static_cast<int64_t>(r) * count + i];
    out[i] = acc;
  }
}

}  // namespace

cudaError_t launch_rank_order_sum(const void* gathered, int ranks, int64_t count, SumType type,
                                  void* out, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t wanted = (count + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(wanted < 65535 ? wanted : 65535);
  if (type == SumType::kF32) {
    rank_order_sum_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const float*>(gathered),
                                                           ranks, count, static_cast<float*>(out));
  } else {
    // Unsigned adds: int32 sums wrap (NCCL's behaviour) without signed overflow.
    rank_order_sum_kernel<<<blocks, kThreads, 0, stream>>>(
        static_cast<const uint32_t*>(gathered), ranks, count, static_cast<uint32_t*>(out));
  }
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels::cuda
