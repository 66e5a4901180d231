// Grouped MoE stages on the tensor cores (mma.sync m16n8k16, BF16 in, FP32 accumulate), for the
// official quantisation-aware semantics: the inputs are act-quantized (FP8 E4M3 values times a
// power of two) and the weights FP4 E2M1 or FP8 E4M3 with E8M0 block scales, so every operand
// is exactly a BF16 number and every product is exact; only the FP32 summation order differs
// from the SIMT kernels (grouped.cu), as between any two GEMMs.
//
// Same layout and contract as grouped.cu's stages. Block = an active expert and 16 weight rows
// (one mma tile), its 4 warps splitting K (pass p of 128 columns goes to warp p mod 4; the
// partial sums are added in warp order, so the order is fixed); the expert's pairs in tiles of
// 8, the mma's N: D[16 rows, 8 pairs] += W[16 rows, 16 k] · Xᵀ[16 k, 8 pairs]. Small grids
// (batch 1, the shared expert) still fill the card: 16 rows per block, not 64.
//
// K order inside an mma: the sum over k may run in any fixed order, so each thread's k of a
// 128-wide pass are its own contiguous 32 (k = 32t .. 32t + 31 for thread t of a quad), one
// 16-byte FP4 load (two for FP8) and one scale block. Its BF16x2 operands pair k with k + 4
// inside each group of 8 (k 8c + i and 8c + i + 4, i < 4), not k with k + 1: that pairing turns
// a word of 8 FP4 codes into BF16x2 with two shifts and two masks per pair (a nibble's bits
// land 16 apart, as the halves of a BF16x2 are), half the integer work of adjacent pairs, which
// bound the stage (ncu: the SM, not the memory, was the busy unit). The inputs are converted to
// BF16 in the same order ("paired": within each group of 8, k 0 4 1 5 2 6 3 7;
// launch_bf16_paired), so a thread's operands for a pass are 64 contiguous bytes, read straight
// from global memory (L1/L2: a tile's 8 input rows are shared by all blocks of the expert):
// no shared-memory staging and no block barrier inside the K loop. A pair's value does not
// depend on the other pairs of its tile (mma columns are independent) or on the batch:
// deterministic and batch-invariant.
//
// Weight decode: the code's magnitude bits are placed into a BF16 so that the BF16 reads
// value · 2^-126 (FP4 E2M1) or value · 2^-120 (FP8 E4M3; their subnormals land on BF16
// subnormals, still exact), then one or two exact BF16x2 multiplications (2^126 · scale, or 2^63
// then 2^63 · scale; 2^120 / 2^60 for FP8) give value · scale.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/moe/grouped_common.cuh"
#include "kernels/cuda/moe/grouped_mma_common.cuh"

namespace deepinfer::kernels::cuda {
namespace {

using namespace grouped_mma;  // NOLINT: this file is that namespace's main user

constexpr int kManyTiles = 4;  // tiles per weight decode of grouped_mma_tiles_kernel
constexpr int kWidePairTiles = 8;  // pair_tiles that asks for the wide form (grouped_mma_wide.cu)

// This thread's paired inputs of a pass: 32 BF16 (64 bytes) of its pair's row.
struct PassInputs {
  uint4 v[4];
};
__device__ __forceinline__ PassInputs load_inputs(const uint16_t* x) {
  const uint4* p = reinterpret_cast<const uint4*>(x);
  return {{__ldg(p), __ldg(p + 1), __ldg(p + 2), __ldg(p + 3)}};
}

// Mma step s of a pass: operands 2s, 2s + 1 of rows lo, hi (this thread's mma rows g, g + 8)
// and of the inputs.
template <bool kFp4, bool kOne, int kS>
__device__ __forceinline__ void step(const RowCodes<kFp4>& lo, const RowCodes<kFp4>& hi,
                                     const PassInputs& x, float* acc) {
  const uint4& q = x.v[kS / 2];
  const uint32_t b0 = kS % 2 ? q.z : q.x, b1 = kS % 2 ? q.w : q.y;
  mma_bf16_16816(acc, decode_pair<kFp4, kOne, 2 * kS>(lo), decode_pair<kFp4, kOne, 2 * kS>(hi),
            decode_pair<kFp4, kOne, 2 * kS + 1>(lo), decode_pair<kFp4, kOne, 2 * kS + 1>(hi), b0,
            b1);
}

template <bool kFp4, bool kOne>
__device__ __forceinline__ void pass_128_as(const RowCodes<kFp4>& lo, const RowCodes<kFp4>& hi,
                                            const PassInputs& x, float* acc) {
  step<kFp4, kOne, 0>(lo, hi, x, acc);
  step<kFp4, kOne, 1>(lo, hi, x, acc);
  step<kFp4, kOne, 2>(lo, hi, x, acc);
  step<kFp4, kOne, 3>(lo, hi, x, acc);
  step<kFp4, kOne, 4>(lo, hi, x, acc);
  step<kFp4, kOne, 5>(lo, hi, x, acc);
  step<kFp4, kOne, 6>(lo, hi, x, acc);
  step<kFp4, kOne, 7>(lo, hi, x, acc);
}

// One 128-wide K pass of the 16-row tile from its loaded codes. The form is chosen per warp
// (a vote), not per operand: a per-operand choice issues both forms' multiplications.
template <bool kFp4>
__device__ __forceinline__ void pass_128(const RowCodes<kFp4>& lo, const RowCodes<kFp4>& hi,
                                         const PassInputs& x, float* acc) {
  if (__all_sync(0xffffffffu, lo.one && hi.one)) {
    pass_128_as<kFp4, true>(lo, hi, x, acc);
  } else {
    pass_128_as<kFp4, false>(two_form(lo), two_form(hi), x, acc);
  }
}

template <bool kGateUp, bool kFp4>
__global__ void __launch_bounds__(kWarps * 32, 8)  // 8 blocks per SM: <= 64 registers
    grouped_mma_kernel(const uint16_t* in, int64_t in_ld, GroupedStageArgs st) {
  grid_dependency_sync();
  const int e = stage_expert(st);
  if (e < 0) return;
  const GroupedExpert& ex = st.experts[e];
  const WeightDesc& da = kGateUp ? ex.w1 : ex.w2;
  const int64_t K = da.k;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;  // mma groupID, thread in group
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * 16;
  if (row0 >= da.n) return;  // the whole block (n % 16 == 0, host check)
  const auto [alo, ahi, blo, bhi] = tile_rows<kGateUp, kFp4>(ex, row0, g);
  __shared__ float partial[kWarps - 1][2][4][32];  // warps 1.. : their sums, per lane
  const int32_t begin = st.layout.offsets[e], count = st.layout.counts[e];
  constexpr int64_t kStep = kWarps * kPass;
  for (int32_t p0 = 0; p0 < count; p0 += kTile) {
    const int n = min(kTile, count - p0);
    __syncthreads();  // warp 0 has read the previous tile's partial sums
    // This thread's mma column: pair g of the tile (the pair's token, or its own row); columns
    // past n read the tile's first pair and are dropped (columns are independent).
    const int32_t r = begin + p0 + (g < n ? g : 0);
    const int64_t in_row = kGateUp ? st.layout.row_pair[r] / st.top_k : r;
    const uint16_t* x = in + in_row * in_ld + 32 * t;
    float acc_a[4] = {0.0f, 0.0f, 0.0f, 0.0f}, acc_b[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    // FP4: four rows of codes are loaded before the first of their mma steps: w1 and w3 of one
    // pass (gate-up), or two passes of w2 (down). Each accumulator still takes its passes in K
    // order. FP8 codes take twice the registers: two rows at a time.
    for (int64_t kp = warp * kPass; kp < K; kp += kGateUp || !kFp4 ? kStep : 2 * kStep) {
      const int64_t k0 = kp + 32 * t;
      if constexpr (!kFp4) {
        const PassInputs xi = load_inputs(x + kp);
        pass_128(load_row32<kFp4>(alo, k0), load_row32<kFp4>(ahi, k0), xi, acc_a);
        if constexpr (kGateUp) {
          pass_128(load_row32<kFp4>(blo, k0), load_row32<kFp4>(bhi, k0), xi, acc_b);
        }
      } else if constexpr (kGateUp) {
        const RowCodes<kFp4> clo = load_row32<kFp4>(alo, k0), chi = load_row32<kFp4>(ahi, k0),
                             dlo = load_row32<kFp4>(blo, k0), dhi = load_row32<kFp4>(bhi, k0);
        const PassInputs xi = load_inputs(x + kp);
        pass_128(clo, chi, xi, acc_a);
        pass_128(dlo, dhi, xi, acc_b);
      } else {
        const bool two = kp + kStep < K;
        const RowCodes<kFp4> lo = load_row32<kFp4>(alo, k0), hi = load_row32<kFp4>(ahi, k0);
        RowCodes<kFp4> lo2, hi2;
        if (two) {
          lo2 = load_row32<kFp4>(alo, k0 + kStep);
          hi2 = load_row32<kFp4>(ahi, k0 + kStep);
        }
        pass_128(lo, hi, load_inputs(x + kp), acc_a);
        if (two) pass_128(lo2, hi2, load_inputs(x + kp + kStep), acc_a);
      }
    }
    // The warps' partial sums, added in warp order by warp 0.
    if (warp > 0) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        partial[warp - 1][0][i][lane] = acc_a[i];
        if constexpr (kGateUp) partial[warp - 1][1][i][lane] = acc_b[i];
      }
    }
    __syncthreads();
    if (warp > 0) continue;
#pragma unroll
    for (int w = 0; w < kWarps - 1; ++w) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        acc_a[i] += partial[w][0][i][lane];
        if constexpr (kGateUp) acc_b[i] += partial[w][1][i][lane];
      }
    }
    // acc[i]: weight row row0 + g (+ 8 for i >= 2), pair 2t + (i & 1) of the tile.
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int tk = 2 * t + (i & 1);
      if (tk >= n) continue;
      const int64_t row = row0 + g + (i >= 2 ? 8 : 0);
      const int32_t pr = st.layout.row_pair[begin + p0 + tk];
      st.out[static_cast<int64_t>(begin + p0 + tk) * st.out_ld + row] = moe_epilogue<kGateUp>(
          acc_a[i], acc_b[i], st.ep, st.gates + pr / st.top_k * st.gates_ld + pr % st.top_k);
    }
  }
}

// Many pairs per expert (prefill): each pass's weight operands are decoded once and used for
// kTiles tiles of 8 pairs (grouped_mma_kernel decodes and re-reads them per tile, which bound
// the stage there). Mma steps 2q and 2q + 1 of a pass: the 8 weight operands, then per tile one
// 16-byte input load and two mma. Every pair's accumulator takes the same mma steps in the same
// order as in grouped_mma_kernel (and the same warp order after), so its bits are the same:
// which kernel runs is a speed choice only.
template <bool kFp4, bool kOne, int kQ, int kTiles>
__device__ __forceinline__ void quad_tiles(const RowCodes<kFp4>& lo, const RowCodes<kFp4>& hi,
                                           const uint16_t* const* x, int64_t kp, int active,
                                           float (*acc)[4]) {
  const uint32_t a0 = decode_pair<kFp4, kOne, 4 * kQ>(lo), a1 = decode_pair<kFp4, kOne, 4 * kQ>(hi);
  const uint32_t a2 = decode_pair<kFp4, kOne, 4 * kQ + 1>(lo);
  const uint32_t a3 = decode_pair<kFp4, kOne, 4 * kQ + 1>(hi);
  const uint32_t c0 = decode_pair<kFp4, kOne, 4 * kQ + 2>(lo);
  const uint32_t c1 = decode_pair<kFp4, kOne, 4 * kQ + 2>(hi);
  const uint32_t c2 = decode_pair<kFp4, kOne, 4 * kQ + 3>(lo);
  const uint32_t c3 = decode_pair<kFp4, kOne, 4 * kQ + 3>(hi);
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
    if (j < active) {  // block-uniform: whole warps take the mma
      const uint4 q = __ldg(reinterpret_cast<const uint4*>(x[j] + kp) + kQ);
      mma_bf16_16816(acc[j], a0, a1, a2, a3, q.x, q.y);
      mma_bf16_16816(acc[j], c0, c1, c2, c3, q.z, q.w);
    }
  }
}

template <bool kFp4, int kTiles>
__device__ __forceinline__ void pass_tiles(const RowCodes<kFp4>& lo, const RowCodes<kFp4>& hi,
                                           const uint16_t* const* x, int64_t kp, int active,
                                           float (*acc)[4]) {
  if (__all_sync(0xffffffffu, lo.one && hi.one)) {
    quad_tiles<kFp4, true, 0, kTiles>(lo, hi, x, kp, active, acc);
    quad_tiles<kFp4, true, 1, kTiles>(lo, hi, x, kp, active, acc);
    quad_tiles<kFp4, true, 2, kTiles>(lo, hi, x, kp, active, acc);
    quad_tiles<kFp4, true, 3, kTiles>(lo, hi, x, kp, active, acc);
  } else {
    const RowCodes<kFp4> lo2 = two_form(lo), hi2 = two_form(hi);
    quad_tiles<kFp4, false, 0, kTiles>(lo2, hi2, x, kp, active, acc);
    quad_tiles<kFp4, false, 1, kTiles>(lo2, hi2, x, kp, active, acc);
    quad_tiles<kFp4, false, 2, kTiles>(lo2, hi2, x, kp, active, acc);
    quad_tiles<kFp4, false, 3, kTiles>(lo2, hi2, x, kp, active, acc);
  }
}

// grouped_mma_kernel with kTiles tiles of pairs per weight decode (same layout, grid, outputs).
template <bool kGateUp, bool kFp4, int kTiles>
__global__ void __launch_bounds__(kWarps * 32, 4)  // 4 blocks per SM: <= 128 registers
    grouped_mma_tiles_kernel(const uint16_t* in, int64_t in_ld, GroupedStageArgs st) {
  grid_dependency_sync();
  const int e = stage_expert(st);
  if (e < 0) return;
  const GroupedExpert& ex = st.experts[e];
  const WeightDesc& da = kGateUp ? ex.w1 : ex.w2;
  const int64_t K = da.k;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * 16;
  if (row0 >= da.n) return;
  const auto [alo, ahi, blo, bhi] = tile_rows<kGateUp, kFp4>(ex, row0, g);
  constexpr int kSums = kGateUp ? 2 : 1;
  __shared__ float partial[kWarps - 1][kSums][kTiles][4][32];
  const int32_t begin = st.layout.offsets[e], count = st.layout.counts[e];
  constexpr int64_t kStep = kWarps * kPass;
  for (int32_t p0 = 0; p0 < count; p0 += kTile * kTiles) {
    const int active = min(kTiles, (count - p0 + kTile - 1) / kTile);
    const uint16_t* x[kTiles];
    int n[kTiles];
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      const int32_t t0 = p0 + j * kTile;
      n[j] = j < active ? min(kTile, count - t0) : 0;
      // Columns past n (and tiles past `active`) read a valid pair and are dropped.
      const int32_t r = begin + (j < active ? t0 + (g < n[j] ? g : 0) : p0);
      const int64_t in_row = kGateUp ? st.layout.row_pair[r] / st.top_k : r;
      x[j] = in + in_row * in_ld + 32 * t;
    }
    __syncthreads();  // warp 0 has read the previous tiles' partial sums
    float acc_a[kTiles][4] = {}, acc_b[kTiles][4] = {};
    for (int64_t kp = warp * kPass; kp < K; kp += kStep) {
      const int64_t k0 = kp + 32 * t;
      pass_tiles<kFp4, kTiles>(load_row32<kFp4>(alo, k0), load_row32<kFp4>(ahi, k0), x, kp, active,
                               acc_a);
      if constexpr (kGateUp) {
        pass_tiles<kFp4, kTiles>(load_row32<kFp4>(blo, k0), load_row32<kFp4>(bhi, k0), x, kp,
                                 active, acc_b);
      }
    }
    if (warp > 0) {
#pragma unroll
      for (int j = 0; j < kTiles; ++j) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          partial[warp - 1][0][j][i][lane] = acc_a[j][i];
          if constexpr (kGateUp) partial[warp - 1][kSums - 1][j][i][lane] = acc_b[j][i];
        }
      }
    }
    __syncthreads();
    if (warp > 0) continue;
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
#pragma unroll
      for (int w = 0; w < kWarps - 1; ++w) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          acc_a[j][i] += partial[w][0][j][i][lane];
          if constexpr (kGateUp) acc_b[j][i] += partial[w][kSums - 1][j][i][lane];
        }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int tk = 2 * t + (i & 1);
        if (tk >= n[j]) continue;
        const int64_t row = row0 + g + (i >= 2 ? 8 : 0);
        const int32_t pair = begin + p0 + j * kTile + tk;
        const int32_t pr = st.layout.row_pair[pair];
        st.out[static_cast<int64_t>(pair) * st.out_ld + row] = moe_epilogue<kGateUp>(
            acc_a[j][i], acc_b[j][i], st.ep, st.gates + pr / st.top_k * st.gates_ld + pr % st.top_k);
      }
    }
  }
}

dim3 mma_grid(int max_active, int64_t rows) {
  return dim3(static_cast<unsigned>(max_active), static_cast<unsigned>((rows + 15) / 16));
}

}  // namespace

void launch_moe_gate_up_mma(const uint16_t* x, int64_t x_ld, const GroupedExpert* experts,
                            bool fp4, int64_t inter, MoeLayout l, int max_active,
                            const float* gates, int64_t gates_ld, int top_k, MoeEpilogue ep,
                            float* h, int64_t h_ld, int pair_tiles, cudaStream_t stream) {
  if (max_active <= 0) return;
  const GroupedStageArgs args{experts, l, gates, gates_ld, top_k, ep, h, h_ld};
  const dim3 grid = mma_grid(max_active, inter);
  if (pair_tiles >= kWidePairTiles && wide_stage_fits(fp4, inter)) {
    launch_wide_stage(true, x, x_ld, args, max_active, inter, stream);
  } else if (pair_tiles > 1) {
    if (fp4) {
      launch_kernel(grouped_mma_tiles_kernel<true, true, kManyTiles>, grid, kWarps * 32, 0, stream,
                    x, x_ld, args);
    } else {
      launch_kernel(grouped_mma_tiles_kernel<true, false, kManyTiles>, grid, kWarps * 32, 0, stream,
                    x, x_ld, args);
    }
  } else if (fp4) {
    launch_kernel(grouped_mma_kernel<true, true>, grid, kWarps * 32, 0, stream, x, x_ld, args);
  } else {
    launch_kernel(grouped_mma_kernel<true, false>, grid, kWarps * 32, 0, stream, x, x_ld, args);
  }
}

void launch_moe_down_mma(const uint16_t* h, int64_t h_ld, const GroupedExpert* experts, bool fp4,
                         int64_t dim, MoeLayout l, int max_active, const float* gates,
                         int64_t gates_ld, int top_k, MoeEpilogue ep, float* y, int64_t y_ld,
                         int pair_tiles, cudaStream_t stream) {
  if (max_active <= 0) return;
  const GroupedStageArgs args{experts, l, gates, gates_ld, top_k, ep, y, y_ld};
  const dim3 grid = mma_grid(max_active, dim);
  if (pair_tiles >= kWidePairTiles && wide_stage_fits(fp4, dim)) {
    launch_wide_stage(false, h, h_ld, args, max_active, dim, stream);
  } else if (pair_tiles > 1) {
    if (fp4) {
      launch_kernel(grouped_mma_tiles_kernel<false, true, kManyTiles>, grid, kWarps * 32, 0, stream,
                    h, h_ld, args);
    } else {
      launch_kernel(grouped_mma_tiles_kernel<false, false, kManyTiles>, grid, kWarps * 32, 0,
                    stream, h, h_ld, args);
    }
  } else if (fp4) {
    launch_kernel(grouped_mma_kernel<false, true>, grid, kWarps * 32, 0, stream, h, h_ld, args);
  } else {
    launch_kernel(grouped_mma_kernel<false, false>, grid, kWarps * 32, 0, stream, h, h_ld, args);
  }
}

}  // namespace deepinfer::kernels::cuda
