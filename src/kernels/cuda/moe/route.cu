// MoE routing (spec §2.7) after the gate GEMM: sqrt(softplus) scores, top-k with the bias
// (ties: lower expert id, the reference's stable sort), normalised route weights; and the hash
// router's id lookup. One block per token. The selection is k rounds of a block-wide argmax
// over the not yet chosen experts, ties to the lower id: the same choice as the reference's
// sequential scan (one thread scanning E experts k times took ~0.25 ms per call at E = 256).
#include "kernels/cuda/common.cuh"

namespace deepinfer::kernels::cuda {
namespace {

constexpr int kMaxExperts = 1024;
constexpr int kMaxTopK = 32;

__device__ float softplus_sqrt_d(float z) {
  const float sp = z > 20.0f ? z : log1pf(expf(z));
  return sqrtf(sp);
}

// V4: p / Σp · scale; V4.1 (RouteOptsDev): z / temperature before the score, p / (Σp + floor)
// only when normalising.
__device__ void write_weights(const float* p, const int32_t* ids, int k, float route_scale,
                              const RouteOptsDev& o, float* w) {
  float sum = 0.0f;
  for (int j = 0; j < k; ++j) sum += p[ids[j]];
  for (int j = 0; j < k; ++j) {
    w[j] = (o.normalize ? p[ids[j]] / (sum + o.norm_floor) : p[ids[j]]) * route_scale;
  }
}

// (key, id) a beats b: larger key, or the same key and a lower id; id < 0 = nothing.
__device__ __forceinline__ bool beats(float ka, int ia, float kb, int ib) {
  if (ia < 0) return false;
  if (ib < 0) return true;
  return ka > kb || (ka == kb && ia < ib);
}

__global__ void route_topk_kernel(MatDesc z, const float* bias, int top_k, float route_scale,
                                  RouteOptsDev o, int32_t* ids, MatDesc weights) {
  grid_dependency_sync();
  __shared__ float p[kMaxExperts], key[kMaxExperts];
  __shared__ bool taken[kMaxExperts];
  __shared__ float wkey[32];
  __shared__ int wid_best[32];
  __shared__ int32_t chosen[kMaxTopK];
  const int64_t t = blockIdx.x;
  const int E = static_cast<int>(z.cols);
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    const float ze = z.data[t * z.ld + e];
    p[e] = softplus_sqrt_d(o.temperature == 1.0f ? ze : ze / o.temperature);
    key[e] = p[e] + (bias ? bias[e] : 0.0f);
    taken[e] = false;
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
  for (int j = 0; j < top_k; ++j) {
    float bk = 0.0f;
    int best = -1;
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
      if (!taken[e] && beats(key[e], e, bk, best)) {
        bk = key[e];
        best = e;
      }
    }
    for (int off = 16; off > 0; off >>= 1) {
      const float ok = __shfl_down_sync(0xffffffffu, bk, off);
      const int oi = __shfl_down_sync(0xffffffffu, best, off);
      if (beats(ok, oi, bk, best)) {
        bk = ok;
        best = oi;
      }
    }
    if (lane == 0) {
      wkey[wid] = bk;
      wid_best[wid] = best;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < nw; ++w) {
        if (beats(wkey[w], wid_best[w], bk, best)) {
          bk = wkey[w];
          best = wid_best[w];
        }
      }
      chosen[j] = best;
      ids[t * top_k + j] = best;
      if (best >= 0) taken[best] = true;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    write_weights(p, chosen, top_k, route_scale, o, weights.data + t * weights.ld);
  }
}

__global__ void route_weights_kernel(MatDesc z, const int32_t* ids, int k, float route_scale,
                                     MatDesc weights) {
  grid_dependency_sync();
  __shared__ float p[kMaxExperts];
  const int64_t t = blockIdx.x, E = z.cols;
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x)
    p[e] = softplus_sqrt_d(z.data[t * z.ld + e]);
  __syncthreads();
  if (threadIdx.x == 0)
    write_weights(p, ids + t * k, k, route_scale, RouteOptsDev{}, weights.data + t * weights.ld);
}

__global__ void hash_ids_kernel(const int32_t* token_ids, int64_t m, const void* table, bool i64,
                                int k, int32_t* ids) {
  grid_dependency_sync();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m * k) return;
  const int64_t t = token_ids[i / k], j = i % k;
  ids[i] = i64 ? static_cast<int32_t>(static_cast<const int64_t*>(table)[t * k + j])
               : static_cast<const int32_t*>(table)[t * k + j];
}

}  // namespace

void launch_moe_route_topk(MatDesc z, const float* bias, int top_k, float route_scale,
                           const RouteOptsDev& opts, int32_t* ids, MatDesc weights,
                           cudaStream_t stream) {
  if (z.rows == 0) return;
  launch_kernel(route_topk_kernel, static_cast<unsigned>(z.rows), 256, 0, stream, z, bias, top_k,
                route_scale, opts, ids, weights);
}
void launch_moe_route_weights(MatDesc z, const int32_t* ids, int k, float route_scale,
                              MatDesc weights, cudaStream_t stream) {
  if (z.rows == 0) return;
  launch_kernel(route_weights_kernel, static_cast<unsigned>(z.rows), 256, 0, stream, z, ids, k,
                route_scale, weights);
}
void launch_moe_hash_ids(const int32_t* token_ids, int64_t m, const void* tid2eid, bool tid2eid_i64,
                         int k, int32_t* ids, cudaStream_t stream) {
  if (m == 0) return;
  launch_kernel(hash_ids_kernel, grid_for(m * k, 256), 256, 0, stream, token_ids, m, tid2eid,
                tid2eid_i64, k, ids);
}

}  // namespace deepinfer::kernels::cuda
