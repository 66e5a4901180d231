// Grouped MoE experts in four launches, with the token -> expert layout built on the device (no
// host round trip, so the step stays graph-capturable):
//
//   layout    one block: per-expert pair counts (shared-memory atomics), their offsets (a block
//             scan), each (token, slot) pair's row in the grouped order, and the list of experts
//             that got any pair;
//   gate_up   block per (active expert, 8 rows of w1/w3), a warp per row: for every pair of the
//             expert, a = x·w1ᵀ, b = x·w3ᵀ (the tile's 8 input rows staged in shared memory by
//             K chunks; each lane decodes 32 weights per 16-byte load; weights read once per 8
//             pairs),
//             then the epilogue (BF16 points, SwiGLU with the clamp, routing weight) -> h;
//   down      the same warp-per-row shape over w2 -> y, one row per pair;
//   combine   thread per (token, channel): the token's expert outputs summed in ascending expert
//             id (the reference's order), into out (= or +=).
// A pair's numbers do not depend on which row of the group it lands in (each dot is one warp's
// fixed-order sum), and the combine order is fixed per token, so the result is deterministic
// and independent of the batch even though the layout uses atomics.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/moe/grouped_common.cuh"

namespace deepinfer::kernels::cuda {
namespace {

constexpr int kRowsPerBlock = 8;  // warps per block, one weight row each
constexpr int kPairTile = 8;      // pairs accumulated per pass over a weight row

// w[row, k0 .. k0+32) dequantized (k0 % 32 == 0, row-major, 16-byte-aligned rows): 16-byte
// loads only (one for FP4, two for FP8, four for BF16/F16, eight for F32), all issued before
// the first use.
__device__ __forceinline__ void load32(const WeightDesc& w, int64_t row, int64_t k0, float* v) {
  switch (w.fmt) {
    case WFmt::kFp4: {
      const uint4 b = *reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(w.w) +
                                                      row * (w.k / 2) + k0 / 2);
      const float s = scale_at(w, row, k0 / w.block_k);
      const uint32_t words[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int q = 0; q < 4; ++q)
#pragma unroll
        for (int i = 0; i < 8; ++i) v[8 * q + i] = fp4_e2m1_to_f((words[q] >> (4 * i)) & 0xfu) * s;
      return;
    }
    case WFmt::kFp8: {
      const uint4* p =
          reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(w.w) + row * w.k + k0);
      const uint4 b0 = p[0], b1 = p[1];
      const float s = scale_at(w, row / w.block_n, k0 / w.block_k);
      const uint32_t words[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int q = 0; q < 8; ++q)
#pragma unroll
        for (int i = 0; i < 4; ++i) v[4 * q + i] = fp8_e4m3_to_f((words[q] >> (8 * i)) & 0xffu) * s;
      return;
    }
    case WFmt::kBf16:
    case WFmt::kF16: {
      const uint4* p =
          reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(w.w) + row * w.k + k0);
      uint4 b[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) b[q] = p[q];
      const bool bf = w.fmt == WFmt::kBf16;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const uint32_t words[4] = {b[q].x, b[q].y, b[q].z, b[q].w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const uint16_t lo = static_cast<uint16_t>(words[i] & 0xffffu);
          const uint16_t hi = static_cast<uint16_t>(words[i] >> 16);
          v[8 * q + 2 * i] = bf ? bf16_bits_to_f(lo) : f16_bits_to_f(lo);
          v[8 * q + 2 * i + 1] = bf ? bf16_bits_to_f(hi) : f16_bits_to_f(hi);
        }
      }
      return;
    }
    case WFmt::kF32: {
      const float4* p =
          reinterpret_cast<const float4*>(static_cast<const float*>(w.w) + row * w.k + k0);
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const float4 a = p[q];
        v[4 * q] = a.x, v[4 * q + 1] = a.y, v[4 * q + 2] = a.z, v[4 * q + 3] = a.w;
      }
      return;
    }
  }
}

// The layout in one block, with the per-expert counts and cursors in shared memory. (They were
// global, and thread 0 scanned them serially: every load waited on the previous store, which
// might alias it, ~256 L2 round trips for V4's routed experts, most of a decode-sized call.)
// Each thread owns a run of consecutive experts; a block-wide exclusive scan of the runs' pair
// and active-expert totals gives every run its offsets.
constexpr int kLayoutThreads = 1024;

__device__ __forceinline__ void block_exclusive_scan2(int32_t& a, int32_t& b, int32_t* warp_a,
                                                      int32_t* warp_b) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int32_t ia = a, ib = b;  // inclusive within the warp
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int32_t ta = __shfl_up_sync(0xffffffffu, ia, o), tb = __shfl_up_sync(0xffffffffu, ib, o);
    if (lane >= o) ia += ta, ib += tb;
  }
  if (lane == 31) warp_a[warp] = ia, warp_b[warp] = ib;
  __syncthreads();
  if (warp == 0) {
    const int nw = blockDim.x >> 5;
    int32_t wa = lane < nw ? warp_a[lane] : 0, wb = lane < nw ? warp_b[lane] : 0;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int32_t ta = __shfl_up_sync(0xffffffffu, wa, o),
                    tb = __shfl_up_sync(0xffffffffu, wb, o);
      if (lane >= o) wa += ta, wb += tb;
    }
    if (lane < nw) warp_a[lane] = wa, warp_b[lane] = wb;  // inclusive over warps
  }
  __syncthreads();
  const int32_t before_a = warp > 0 ? warp_a[warp - 1] : 0, before_b = warp > 0 ? warp_b[warp - 1] : 0;
  a = before_a + ia - a;
  b = before_b + ib - b;
}

__global__ void __launch_bounds__(kLayoutThreads)
    layout_kernel(const int32_t* ids, int64_t pairs, int experts, int32_t* counts,
                  int32_t* offsets, int32_t* pair_row, int32_t* row_pair, int32_t* active,
                  int32_t* n_active) {
  grid_dependency_sync();
  extern __shared__ int32_t smem[];  // [experts] counts, then [experts] cursors
  int32_t* s_count = smem;
  int32_t* s_cursor = smem + experts;
  __shared__ int32_t warp_a[kLayoutThreads / 32], warp_b[kLayoutThreads / 32];
  for (int e = threadIdx.x; e < experts; e += blockDim.x) s_count[e] = 0;
  __syncthreads();
  for (int64_t p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int32_t e = ids[p];
    if (e >= 0 && e < experts) atomicAdd(&s_count[e], 1);
  }
  __syncthreads();
  const int per = (experts + blockDim.x - 1) / blockDim.x;
  const int e0 = min(experts, static_cast<int>(threadIdx.x) * per), e1 = min(experts, e0 + per);
  int32_t run = 0, na = 0;
  for (int e = e0; e < e1; ++e) run += s_count[e], na += s_count[e] > 0 ? 1 : 0;
  block_exclusive_scan2(run, na, warp_a, warp_b);
  for (int e = e0; e < e1; ++e) {
    const int32_t c = s_count[e];
    counts[e] = c;
    offsets[e] = run;
    s_cursor[e] = run;
    run += c;
    if (c > 0) active[na++] = e;
  }
  if (e1 == experts && e0 < e1) *n_active = na;  // the thread owning the last expert
  if (experts == 0 && threadIdx.x == 0) *n_active = 0;
  __syncthreads();
  for (int64_t p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int32_t e = ids[p];
    int32_t r = -1;
    if (e >= 0 && e < experts) {
      r = atomicAdd(&s_cursor[e], 1);
      row_pair[r] = static_cast<int32_t>(p);
    }
    pair_row[p] = r;
  }
}

// Inputs of the block's pair tile, one K chunk at a time, shared by its 8 warps (each warp
// would otherwise re-read every pair's whole input row from L2 for its one weight row). Lane l
// reads values [32l, 32l + 32) of a chunk; rows are padded by 4 floats per 32 so the float4
// reads of 8 consecutive lanes fall in distinct banks.
constexpr int kChunk = 1024;
constexpr int kChunkPadded = kChunk / 32 * 36;

// The block computes, for its warps' weight rows `row` (valid: row < N), the dots of up to two
// weights with the inputs of pairs [0, n) of the tile (in_rows: each pair's input row), summing
// each lane's 32-value pieces in ascending k and the lanes in a fixed tree: a pair's value does
// not depend on the tile or the batch. Every thread of the block must call it.
template <bool kTwo>
__device__ void block_dots(const WeightDesc& wa, const WeightDesc& wb, int64_t row, bool valid,
                           const float* in, int64_t in_ld, const int32_t* in_rows, int n,
                           float (*xs)[kChunkPadded], float* acc_a, float* acc_b) {
  const int lane = threadIdx.x & 31;
  const int64_t K = wa.k;
#pragma unroll
  for (int t = 0; t < kPairTile; ++t) acc_a[t] = acc_b[t] = 0.0f;
  for (int64_t kc = 0; kc < K; kc += kChunk) {
    const int64_t len = K - kc < kChunk ? K - kc : kChunk;
    __syncthreads();  // the previous chunk's reads are done
    for (int64_t i = threadIdx.x; i < n * (len / 4); i += blockDim.x) {
      const int t = static_cast<int>(i / (len / 4));
      const int64_t k = (i % (len / 4)) * 4;
      const float4 v = *reinterpret_cast<const float4*>(in + in_rows[t] * in_ld + kc + k);
      *reinterpret_cast<float4*>(&xs[t][k + k / 32 * 4]) = v;
    }
    __syncthreads();
    const int64_t k = static_cast<int64_t>(lane) * 32;
    if (valid && k < len) {
      float va[32], vb[32];
      load32(wa, row, kc + k, va);
      if constexpr (kTwo) load32(wb, row, kc + k, vb);
#pragma unroll
      for (int t = 0; t < kPairTile; ++t) {
        if (t < n) {
          const float* xr = &xs[t][lane * 36];
#pragma unroll
          for (int q = 0; q < 8; ++q) {
            const float4 xv = *reinterpret_cast<const float4*>(xr + 4 * q);
            const float x4[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              acc_a[t] = fmaf(va[4 * q + i], x4[i], acc_a[t]);
              if constexpr (kTwo) acc_b[t] = fmaf(vb[4 * q + i], x4[i], acc_b[t]);
            }
          }
        }
      }
    }
  }
#pragma unroll
  for (int t = 0; t < kPairTile; ++t) {
    acc_a[t] = warp_sum(acc_a[t]);
    if constexpr (kTwo) acc_b[t] = warp_sum(acc_b[t]);
  }
}

// One kernel for both grouped stages (kGateUp: w1/w3 + SwiGLU epilogue over the pairs' tokens of
// x; else w2 over the pairs' own rows of h). Block = (active expert, 8 weight rows).
template <bool kGateUp>
__global__ void __launch_bounds__(kRowsPerBlock * 32)
    grouped_kernel(const float* in, int64_t in_ld, GroupedStageArgs st) {
  grid_dependency_sync();
  const int e = stage_expert(st);
  if (e < 0) return;
  const GroupedExpert& ex = st.experts[e];
  const WeightDesc& wa = kGateUp ? ex.w1 : ex.w2;
  const int64_t row = static_cast<int64_t>(blockIdx.y) * kRowsPerBlock + (threadIdx.x >> 5);
  const bool valid = row < wa.n;
  __shared__ __align__(16) float xs[kPairTile][kChunkPadded];
  __shared__ int32_t in_rows[kPairTile];
  const int32_t begin = st.layout.offsets[e], count = st.layout.counts[e];
  for (int32_t p0 = 0; p0 < count; p0 += kPairTile) {
    const int n = min(kPairTile, count - p0);
    __syncthreads();
    if (threadIdx.x < kPairTile) {
      const int32_t r = begin + p0 + (static_cast<int>(threadIdx.x) < n ? threadIdx.x : 0);
      // The pair's token, or its own row.
      in_rows[threadIdx.x] = kGateUp ? st.layout.row_pair[r] / st.top_k : r;
    }
    __syncthreads();
    float a[kPairTile], b[kPairTile];
    block_dots<kGateUp>(wa, ex.w3, row, valid, in, in_ld, in_rows, n, xs, a, b);
    if (!valid || (threadIdx.x & 31) != 0) continue;
#pragma unroll
    for (int t = 0; t < kPairTile; ++t) {
      if (t >= n) break;
      const int32_t pr = st.layout.row_pair[begin + p0 + t];
      st.out[static_cast<int64_t>(begin + p0 + t) * st.out_ld + row] = moe_epilogue<kGateUp>(
          a[t], b[t], st.ep, st.gates + pr / st.top_k * st.gates_ld + pr % st.top_k);
    }
  }
}

__global__ void combine_kernel(const float* y, int64_t y_ld, const int32_t* ids,
                               const int32_t* pair_row, int top_k, bool accumulate, MatDesc out,
                               bool round_out) {
  grid_dependency_sync();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= out.rows * out.cols) return;
  const int64_t m = i / out.cols, c = i % out.cols;
  // The token's pairs in ascending (expert, slot) order: top_k <= 32, a selection per step.
  float sum = 0.0f;
  int32_t last_e = -1, last_j = -1;
  for (int step = 0; step < top_k; ++step) {
    int32_t best_e = 0x7fffffff, best_j = -1;
    for (int j = 0; j < top_k; ++j) {
      const int32_t e = ids[m * top_k + j];
      if (e < 0 || pair_row[m * top_k + j] < 0) continue;
      const bool after_last = e > last_e || (e == last_e && j > last_j);
      if (after_last && (e < best_e || (e == best_e && j < best_j))) best_e = e, best_j = j;
    }
    if (best_j < 0) break;
    sum += y[static_cast<int64_t>(pair_row[m * top_k + best_j]) * y_ld + c];
    last_e = best_e;
    last_j = best_j;
  }
  float* o = out.data + m * out.ld + c;
  const float v = accumulate ? *o + sum : sum;
  *o = round_out ? bf16_round_d(v) : v;
}

}  // namespace

void launch_moe_layout(const int32_t* ids, int64_t pairs, int experts, MoeLayout l,
                       cudaStream_t stream) {
  const size_t smem = 2 * static_cast<size_t>(experts) * sizeof(int32_t);
  launch_kernel(layout_kernel, 1, kLayoutThreads, smem, stream, ids, pairs, experts, l.counts,
                l.offsets, l.pair_row, l.row_pair, l.active, l.n_active);
}

void launch_moe_gate_up(MatDesc x, const GroupedExpert* experts, int64_t inter, MoeLayout l,
                        int max_active, const float* gates, int64_t gates_ld, int top_k,
                        MoeEpilogue ep, float* h, int64_t h_ld, cudaStream_t stream) {
  if (max_active <= 0) return;
  const dim3 grid(static_cast<unsigned>(max_active),
                  static_cast<unsigned>((inter + kRowsPerBlock - 1) / kRowsPerBlock));
  launch_kernel(grouped_kernel<true>, grid, kRowsPerBlock * 32, 0, stream, x.data, x.ld,
                GroupedStageArgs{experts, l, gates, gates_ld, top_k, ep, h, h_ld});
}

void launch_moe_down(const float* h, int64_t h_ld, const GroupedExpert* experts, int64_t dim,
                     MoeLayout l, int max_active, const float* gates, int64_t gates_ld, int top_k,
                     MoeEpilogue ep, float* y, int64_t y_ld, cudaStream_t stream) {
  if (max_active <= 0) return;
  const dim3 grid(static_cast<unsigned>(max_active),
                  static_cast<unsigned>((dim + kRowsPerBlock - 1) / kRowsPerBlock));
  launch_kernel(grouped_kernel<false>, grid, kRowsPerBlock * 32, 0, stream, h, h_ld,
                GroupedStageArgs{experts, l, gates, gates_ld, top_k, ep, y, y_ld});
}

void launch_moe_combine(const float* y, int64_t y_ld, const int32_t* ids, MoeLayout l, int top_k,
                        bool accumulate, MatDesc out, bool round_out, cudaStream_t stream) {
  const int64_t work = out.rows * out.cols;
  if (work == 0) return;
  launch_kernel(combine_kernel, grid_for(work, 256), 256, 0, stream, y, y_ld, ids, l.pair_row,
                top_k, accumulate, out, round_out);
}

}  // namespace deepinfer::kernels::cuda
