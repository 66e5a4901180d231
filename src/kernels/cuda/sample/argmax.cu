// Ops::argmax_rows on the GPU: a row's greedy token (the lowest id of its maximum, or the codes
// of a non-finite / all -inf row, as sample.cu's greedy path and the host's argmax_lowest_id),
// an id an embedding may read, and the softmax probability of the maximum. One block per row:
// the drafts of an MTP chain (a few rows per step), written to device memory so the next
// chained step embeds them without a host round trip.
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/launch.h"

namespace deepinfer::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// (value, id) pairs ordered by value, then by the lower id: the row's first maximum.
__device__ __forceinline__ bool better(float v, int32_t i, float bv, int32_t bi) {
  return v > bv || (v == bv && i < bi);
}

__global__ void argmax_rows_kernel(MatDesc logits, int32_t* tokens, int32_t* ids, float* probs) {
  grid_dependency_sync();
  __shared__ float s_val[kWarps];
  __shared__ int32_t s_id[kWarps];
  __shared__ int s_bad[kWarps];
  __shared__ double s_sum[kWarps];
  const int64_t r = blockIdx.x;
  const float* row = logits.data + r * logits.ld;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float kInf = __int_as_float(0x7f800000);

  float best = -kInf;
  int32_t best_id = INT32_MAX;
  int bad = 0;
  for (int64_t c = threadIdx.x; c < logits.cols; c += kThreads) {
    const float x = row[c];
    bad |= !(x < kInf);  // NaN or +inf
    if (x != -kInf && better(x, static_cast<int32_t>(c), best, best_id)) {
      best = x;
      best_id = static_cast<int32_t>(c);
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, best, o);
    const int32_t i = __shfl_xor_sync(0xffffffffu, best_id, o);
    if (better(v, i, best, best_id)) {
      best = v;
      best_id = i;
    }
    bad |= __shfl_xor_sync(0xffffffffu, bad, o);
  }
  if (lane == 0) {
    s_val[warp] = best;
    s_id[warp] = best_id;
    s_bad[warp] = bad;
  }
  __syncthreads();
  best = s_val[0];
  best_id = s_id[0];
  bad = s_bad[0];
  for (int w = 1; w < kWarps; ++w) {
    if (better(s_val[w], s_id[w], best, best_id)) {
      best = s_val[w];
      best_id = s_id[w];
    }
    bad |= s_bad[w];
  }
  // kSampleNonFinite (-2) before kSampleNoToken (-1: every value -inf), as the host checks.
  const int32_t token = bad ? kSampleNonFiniteDev : best_id == INT32_MAX ? kSampleNoTokenDev : best_id;

  float p = 0.0f;
  if (probs != nullptr && token >= 0) {  // summed in double, as the host default
    double z = 0.0;
    for (int64_t c = threadIdx.x; c < logits.cols; c += kThreads) z += expf(row[c] - best);
    for (int o = 16; o > 0; o >>= 1) z += __shfl_xor_sync(0xffffffffu, z, o);
    __syncthreads();  // s_sum is written after every thread read s_val above
    if (lane == 0) s_sum[warp] = z;
    __syncthreads();
    z = 0.0;
    for (int w = 0; w < kWarps; ++w) z += s_sum[w];
    p = static_cast<float>(1.0 / z);
  }
  if (threadIdx.x == 0) {
    tokens[r] = token;
    if (ids != nullptr) ids[r] = token >= 0 ? token : 0;
    if (probs != nullptr) probs[r] = p;
  }
}

}  // namespace

void launch_argmax_rows(MatDesc logits, int32_t* tokens, int32_t* ids, float* probs,
                        cudaStream_t stream) {
  if (logits.rows == 0) return;
  launch_kernel(argmax_rows_kernel, static_cast<unsigned>(logits.rows), kThreads, 0, stream, logits,
                tokens, ids, probs);
}

}  // namespace deepinfer::kernels::cuda
