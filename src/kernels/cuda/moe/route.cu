// MoE routing (spec §2.7) after the gate GEMM: sqrt(softplus) scores, top-k with the bias
// (ties: lower expert id, the reference's stable sort), normalised route weights; and the hash
// router's id lookup. One block per token; the selection runs on one thread over the shared
// scores (E <= 1024, k small), which is exact and cheap next to the gate GEMM.
#include "kernels/cuda/common.cuh"

namespace deepinfer::kernels::cuda {
namespace {

constexpr int kMaxExperts = 1024;
constexpr int kMaxTopK = 32;

__device__ float softplus_sqrt_d(float z) {
  const float sp = z > 20.0f ? z : log1pf(expf(z));
  return sqrtf(sp);
}

__device__ void write_weights(const float* p, const int32_t* ids, int k, float route_scale,
                              float* w) {
  float sum = 0.0f;
  for (int j = 0; j < k; ++j) sum += p[ids[j]];
  for (int j = 0; j < k; ++j) w[j] = p[ids[j]] / sum * route_scale;
}

__global__ void route_topk_kernel(MatDesc z, const float* bias, int top_k, float route_scale,
                                  int32_t* ids, MatDesc weights) {
  __shared__ float p[kMaxExperts];
  const int64_t t = blockIdx.x, E = z.cols;
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x)
    p[e] = softplus_sqrt_d(z.data[t * z.ld + e]);
  __syncthreads();
  if (threadIdx.x != 0) return;
  int32_t* row = ids + t * top_k;
  int32_t chosen[kMaxTopK];
  for (int j = 0; j < top_k; ++j) {
    int best = -1;
    float bk = 0.0f;
    for (int e = 0; e < E; ++e) {
      bool taken = false;
      for (int i = 0; i < j; ++i) taken |= chosen[i] == e;
      if (taken) continue;
      const float key = p[e] + (bias ? bias[e] : 0.0f);
      if (best < 0 || key > bk) {
        best = e;
        bk = key;
      }
    }
    chosen[j] = best;
    row[j] = best;
  }
  write_weights(p, chosen, top_k, route_scale, weights.data + t * weights.ld);
}

__global__ void route_weights_kernel(MatDesc z, const int32_t* ids, int k, float route_scale,
                                     MatDesc weights) {
  __shared__ float p[kMaxExperts];
  const int64_t t = blockIdx.x, E = z.cols;
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x)
    p[e] = softplus_sqrt_d(z.data[t * z.ld + e]);
  __syncthreads();
  if (threadIdx.x == 0)
    write_weights(p, ids + t * k, k, route_scale, weights.data + t * weights.ld);
}

__global__ void hash_ids_kernel(const int32_t* token_ids, int64_t m, const void* table, bool i64,
                                int k, int32_t* ids) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m * k) return;
  const int64_t t = token_ids[i / k], j = i % k;
  ids[i] = i64 ? static_cast<int32_t>(static_cast<const int64_t*>(table)[t * k + j])
               : static_cast<const int32_t*>(table)[t * k + j];
}

}  // namespace

void launch_moe_route_topk(MatDesc z, const float* bias, int top_k, float route_scale, int32_t* ids,
                           MatDesc weights, cudaStream_t stream) {
  if (z.rows == 0) return;
  route_topk_kernel<<<static_cast<unsigned>(z.rows), 256, 0, stream>>>(z, bias, top_k, route_scale,
                                                                       ids, weights);
}
void launch_moe_route_weights(MatDesc z, const int32_t* ids, int k, float route_scale,
                              MatDesc weights, cudaStream_t stream) {
  if (z.rows == 0) return;
  route_weights_kernel<<<static_cast<unsigned>(z.rows), 256, 0, stream>>>(z, ids, k, route_scale,
                                                                          weights);
}
void launch_moe_hash_ids(const int32_t* token_ids, int64_t m, const void* tid2eid, bool tid2eid_i64,
                         int k, int32_t* ids, cudaStream_t stream) {
  if (m == 0) return;
  hash_ids_kernel<<<grid_for(m * k, 256), 256, 0, stream>>>(token_ids, m, tid2eid, tid2eid_i64, k,
                                                            ids);
}

}  // namespace deepinfer::kernels::cuda
