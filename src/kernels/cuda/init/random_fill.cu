// Generated weights on the device (`--load-format dummy`): n elements of a RandomFill written in
// place, each element random_fill_bits(f, i) (tensor/random_fill.h), the very function the host
// fill runs, so a device fill equals the host's bit for bit (op case fill_random) and no host
// buffer of the weight's size ever exists. A grid-stride loop with one element per thread and
// step: consecutive threads store consecutive elements (coalesced), and the hash is cheap next to
// the store at these sizes (a 150 GB model fills in well under a second of memory bandwidth).
#include <algorithm>

#include "kernels/cuda/launch.h"
#include "tensor/random_fill.h"

namespace deepinfer::kernels::cuda {
namespace {

template <typename T>
__global__ void random_fill_kernel(T* out, int64_t n, RandomFill f) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    out[i] = static_cast<T>(random_fill_bits(f, static_cast<uint64_t>(i)));
  }
}

template <typename T>
void launch_typed(void* dst, int64_t n, const RandomFill& f, cudaStream_t stream) {
  constexpr int kThreads = 256;
  constexpr int64_t kMaxBlocks = 1 << 16;  // the grid-stride loop covers the rest
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks);
  random_fill_kernel<T>
      <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(static_cast<T*>(dst), n, f);
}

}  // namespace

void launch_random_fill(void* dst, int64_t n, const RandomFill& f, cudaStream_t stream) {
  if (n <= 0) return;
  switch (f.elem_bytes) {
    case 1:
      launch_typed<uint8_t>(dst, n, f, stream);
      break;
    case 2:
      launch_typed<uint16_t>(dst, n, f, stream);
      break;
    case 4:
      launch_typed<uint32_t>(dst, n, f, stream);
      break;
    default:
      launch_typed<uint64_t>(dst, n, f, stream);
      break;
  }
}

}  // namespace deepinfer::kernels::cuda
