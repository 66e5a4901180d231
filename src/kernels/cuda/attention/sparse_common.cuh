// Device pieces shared by the sparse attention kernels (sparse_attention.cu: one block per
// (token, head group); sparse_attention_split.cu: the same maths with the keys split across
// blocks). Each piece is the one both paths run, so their scores, maxima and denominators are
// the same bits.
#pragma once

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/launch.h"

namespace deepinfer::kernels::cuda {

inline constexpr int kSparseMaxHeadDim = 512;
inline constexpr int kSparseGroup = 16;  // heads per block (MQA: the key rows are shared)

// Query t's key j as an address (nullptr = absent), from either form of SparseKeys.
__device__ __forceinline__ const float* sparse_key(const SparseKeys& k, int64_t t, int64_t L,
                                                   int64_t j) {
  if (k.rows != nullptr) return k.rows[t * L + j];
  const int32_t r = k.idx[t * L + j];
  return r >= 0 ? k.kv.data + static_cast<int64_t>(r) * k.kv.ld : nullptr;
}

// Four consecutive floats of a key row: one 16-byte load where the row allows it (every cache
// row of the model), else four.
__device__ __forceinline__ float4 sparse_load4(const float* p) {
  if ((reinterpret_cast<uintptr_t>(p) & 15u) == 0) return __ldg(reinterpret_cast<const float4*>(p));
  return make_float4(__ldg(p), __ldg(p + 1), __ldg(p + 2), __ldg(p + 3));
}

// Warp 0 compacts query t's keys [0, L) (absent ones dropped, order kept) into the addresses
// rows[0, count) with ballots; *count is written by lane 0. The caller synchronises before
// reading.
__device__ __forceinline__ void sparse_compact_rows(const SparseKeys& k, int64_t t, int64_t L,
                                                    const float** rows, int* count) {
  if ((threadIdx.x >> 5) != 0) return;
  const int lane = threadIdx.x & 31;
  int cnt = 0;
  for (int64_t b = 0; b < L; b += 32) {
    const float* r = b + lane < L ? sparse_key(k, t, L, b + lane) : nullptr;
    const unsigned mask = __ballot_sync(0xffffffffu, r != nullptr);
    if (r != nullptr) rows[cnt + __popc(mask & ((1u << lane) - 1u))] = r;
    cnt += __popc(mask);
  }
  if (lane == 0) *count = cnt;
}

// z[h * zld + j] = (q_h · k_rows[j]) · scale for j in [j0, j1), h < hn: a warp per key holds the
// key's channels in registers and dots them with the group's queries qs [kSparseGroup][d].
__device__ __forceinline__ void sparse_group_scores(const float* qs, int hn, int64_t d,
                                                    const float* const* rows, int j0, int j1,
                                                    float scale, float* z, int64_t zld) {
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
  constexpr int kRegs = kSparseMaxHeadDim / 32;
  for (int j = j0 + wid; j < j1; j += nw) {
    const float* k = rows[j];
    float kr[kRegs];
#pragma unroll
    for (int i = 0; i < kRegs; ++i) {
      const int64_t c = lane + 32 * i;
      kr[i] = c < d ? k[c] : 0.0f;
    }
    for (int h = 0; h < hn; ++h) {
      const float* qh = qs + h * d;
      float s = 0.0f;
#pragma unroll
      for (int i = 0; i < kRegs; ++i) {
        const int64_t c = lane + 32 * i;
        if (c < d) s = fmaf(qh[c], kr[i], s);
      }
      s = warp_sum(s);
      if (lane == 0) z[h * zld + j] = s * scale;
    }
  }
}

// Per head h < hn (a warp each): z[h][0, n) <- exp(z - max), BF16-rounded when asked; den[h] =
// the FP32 sum (+ the sink's term), mx[h] the max.
__device__ __forceinline__ void sparse_group_softmax(float* z, int64_t zld, int n, int hn,
                                                     const float* sink, int64_t h0,
                                                     bool bf16_probs, float* mx, float* den) {
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
  for (int h = wid; h < hn; h += nw) {
    float* zh = z + h * zld;
    float m = -__int_as_float(0x7f800000);
    for (int j = lane; j < n; j += 32) m = fmaxf(m, zh[j]);
    m = warp_max(m);
    float sum = 0.0f;
    for (int j = lane; j < n; j += 32) {
      const float e = expf(zh[j] - m);
      sum += e;
      zh[j] = bf16_probs ? bf16_round_d(e) : e;
    }
    sum = warp_sum(sum);
    if (lane == 0) {
      mx[h] = m;
      den[h] = sink ? sum + expf(sink[h0 + h] - m) : sum;
    }
  }
}

// acc[h] = Σ_{j in [j0, j1)} p[h * zld + j] · v_rows[j][c] for the channel c and h < hn, each
// sum in key order (heads past hn repeat head hn - 1, so p is only read within the group). Eight keys' values are loaded before their FMAs: the loads of a key
// row are independent, and one at a time the walk was bound by their latency (~0.3 ms per
// 640 keys whatever the batch). The FMA sequence per head is unchanged, so are the bits.
__device__ __forceinline__ void sparse_group_pv(const float* p, int64_t zld, int hn,
                                                const float* const* rows, int j0, int j1,
                                                int64_t c, float* acc) {
  constexpr int kAhead = 8;
  int64_t off[kSparseGroup];
#pragma unroll
  for (int h = 0; h < kSparseGroup; ++h) off[h] = (h < hn ? h : hn - 1) * zld;
  int j = j0;
  for (; j + kAhead <= j1; j += kAhead) {
    float v[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) v[u] = rows[j + u][c];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
#pragma unroll
      for (int h = 0; h < kSparseGroup; ++h) acc[h] = fmaf(p[off[h] + j + u], v[u], acc[h]);
    }
  }
  for (; j < j1; ++j) {
    const float kvc = rows[j][c];
#pragma unroll
    for (int h = 0; h < kSparseGroup; ++h) acc[h] = fmaf(p[off[h] + j], kvc, acc[h]);
  }
}

}  // namespace deepinfer::kernels::cuda
