// Compressor pooling (spec §2.4): per output row and channel, a softmax over the present slots'
// gate logits weighting their values. One thread per (row, channel); the slot table (device
// pointers per slot, null value = missing) is read by every thread of the row.
#include "kernels/cuda/common.cuh"

namespace deepinfer::kernels::cuda {
namespace {

__global__ void softmax_pool_kernel(const PoolSlotDev* slots, int64_t spr, MatDesc out) {
  grid_dependency_sync();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= out.rows * out.cols) return;
  const int64_t r = i / out.cols, c = i % out.cols;
  const PoolSlotDev* s = slots + r * spr;
  float mx = -__int_as_float(0x7f800000);
  for (int64_t j = 0; j < spr; ++j)
    if (s[j].value) mx = fmaxf(mx, s[j].gate[c]);
  float den = 0.0f, num = 0.0f;
  for (int64_t j = 0; j < spr; ++j) {
    if (!s[j].value) continue;
    const float e = expf(s[j].gate[c] - mx);
    den += e;
    num = fmaf(e, s[j].value[c], num);
  }
  out.data[r * out.ld + c] = den > 0.0f ? num / den : 0.0f;
}

}  // namespace

void launch_softmax_pool(const PoolSlotDev* slots, int64_t slots_per_row, MatDesc out,
                         cudaStream_t stream) {
  const int64_t work = out.rows * out.cols;
  if (work == 0) return;
  launch_kernel(softmax_pool_kernel, grid_for(work, 256), 256, 0, stream, slots, slots_per_row,
                out);
}

}  // namespace deepinfer::kernels::cuda
