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
// 128-wide pass are its own contiguous 32 (k = 32t .. 32t + 31 for thread t of a quad): step s
// of the 8 gives logical k {2t, 2t+1, 2t+8, 2t+9} the physical k 32t + 4s .. 32t + 4s + 3, for
// the weights (one 16-byte FP4 load, one FP4 scale block) and for the staged inputs alike. A
// pair's value does not depend on the other pairs of its tile (mma columns are independent) or
// on the batch: deterministic and batch-invariant.
//
// Weight decode, a few integer ops per pair of values: the code's magnitude bits are placed
// into a BF16 so that the BF16 reads value · 2^-126 (FP4 E2M1) or value · 2^-120 (FP8 E4M3;
// their subnormals land on BF16 subnormals, still exact), then two exact BF16x2 multiplications
// (2^63 or 2^60, then 2^63 · scale or 2^60 · scale) give value · scale.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/moe/grouped_common.cuh"

namespace deepinfer::kernels::cuda {
namespace {

constexpr int kWarps = 4;     // warps per block, splitting K
constexpr int kTile = 8;      // pairs per mma tile
constexpr int kChunk = 1024;  // K staged in shared memory at once, as BF16
constexpr int kPass = 128;    // K per register pass: 32 per thread of a quad, 8 mma steps
// Row stride of the staged inputs: + 32 BF16 (64 bytes) so the 8 pair rows of a quarter warp's
// 16-byte reads start in different bank groups.
constexpr int kStride = kChunk + 32;

__device__ __forceinline__ uint32_t mul_bf16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// Byte 0 of v (two E2M1 codes, low nibble first) -> BF16x2 of value · 2^-126.
__device__ __forceinline__ uint32_t fp4x2_scaled_down(uint32_t v) {
  return ((v & 0x7u) << 6) | ((v & 0x8u) << 12) | ((v & 0x70u) << 18) | ((v & 0x80u) << 24);
}
// Bytes 0, 1 of v (two E4M3 codes) -> BF16x2 of value · 2^-120.
__device__ __forceinline__ uint32_t fp8x2_scaled_down(uint32_t v) {
  return ((v & 0x7fu) << 4) | ((v & 0x80u) << 8) | ((v & 0x7f00u) << 12) | ((v & 0x8000u) << 16);
}

__device__ __forceinline__ uint32_t bf16x2_splat(float power_of_two) {
  const uint32_t b = f2u(power_of_two) >> 16;  // exact: a power of two
  return b | (b << 16);
}

// The stored codes of w[row, k0 .. k0 + 32) of an FP4 / FP8 weight with E8M0 scales
// (k0 % 32 == 0) and the BF16x2 factors that turn a placed code into value · scale: `sc` alone
// when value · 2^-126 (FP4) or 2^-120 (FP8) times 2^126 · scale (2^120 · scale) is a BF16 number
// (scale <= 2, or <= 2^7: every real checkpoint), else `up` (2^63 / 2^60), then `sc`
// (2^63 · scale / 2^60 · scale). Codes are decoded right before their mma step, so a thread
// holds 8 registers of codes per row instead of 16 of values (occupancy).
// kFp4 is the weights' format as a template argument: FP4 codes then take 4 registers, not 8,
// which leaves room for more code loads in flight (the stages were bound by load latency).
template <bool kFp4>
struct RowCodes {
  uint32_t w[kFp4 ? 4 : 8];  // FP4: 32 codes; FP8: 32 codes in 8 words
  uint32_t up, sc;
  bool one;  // one multiplication
};

template <bool kFp4>
__device__ __forceinline__ RowCodes<kFp4> load_row32(const WeightDesc& w, int64_t row,
                                                     int64_t k0) {
  const uint8_t* base = static_cast<const uint8_t*>(w.w);
  RowCodes<kFp4> r;
  float scale, bias_half;
  if constexpr (kFp4) {
    const uint4 b = *reinterpret_cast<const uint4*>(base + row * (w.k / 2) + k0 / 2);
    r.w[0] = b.x, r.w[1] = b.y, r.w[2] = b.z, r.w[3] = b.w;
    scale = scale_at(w, row, k0 / w.block_k);
    bias_half = 0x1p63f;
    r.one = scale <= 2.0f;
  } else {
    const uint4* p = reinterpret_cast<const uint4*>(base + row * w.k + k0);
    const uint4 b0 = p[0], b1 = p[1];
    r.w[0] = b0.x, r.w[1] = b0.y, r.w[2] = b0.z, r.w[3] = b0.w;
    r.w[4] = b1.x, r.w[5] = b1.y, r.w[6] = b1.z, r.w[7] = b1.w;
    scale = scale_at(w, row / w.block_n, k0 / w.block_k);
    bias_half = 0x1p60f;
    r.one = scale <= 128.0f;
  }
  r.up = bf16x2_splat(bias_half);
  r.sc = bf16x2_splat(r.one ? scale * bias_half * bias_half : scale * bias_half);
  return r;
}

// Element pair (2j, 2j + 1) of the row as BF16x2 (j < 16, a compile-time constant), exact.
template <bool kFp4>
__device__ __forceinline__ uint32_t decode_pair(const RowCodes<kFp4>& c, int j) {
  uint32_t placed;
  if constexpr (kFp4) {
    placed = fp4x2_scaled_down(c.w[j / 4] >> (8 * (j % 4)));
  } else {
    placed = fp8x2_scaled_down(c.w[j / 2] >> (16 * (j % 2)));
  }
  return c.one ? mul_bf16x2(placed, c.sc) : mul_bf16x2(mul_bf16x2(placed, c.up), c.sc);
}

__device__ __forceinline__ void mma_16816(float* d, uint32_t a0, uint32_t a1, uint32_t a2,
                                          uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// One 128-wide K pass of the 16-row tile from its loaded codes: rows lo and hi (this thread's
// mma rows row_lo, row_lo + 8) times pair g's staged inputs x (this thread's 32 BF16 of the
// pass, read per step).
template <bool kFp4>
__device__ __forceinline__ void pass_128(const RowCodes<kFp4>& lo, const RowCodes<kFp4>& hi,
                                         const uint16_t* x, float* acc) {
#pragma unroll
  for (int s = 0; s < 8; ++s) {
    const uint2 xv = *reinterpret_cast<const uint2*>(x + 4 * s);
    mma_16816(acc, decode_pair(lo, 2 * s), decode_pair(hi, 2 * s), decode_pair(lo, 2 * s + 1),
              decode_pair(hi, 2 * s + 1), xv.x, xv.y);
  }
}

template <bool kGateUp, bool kFp4>
__global__ void __launch_bounds__(kWarps * 32, 8)  // 8 blocks per SM: <= 64 registers
    grouped_mma_kernel(const uint16_t* in, int64_t in_ld, GroupedStageArgs st) {
  const int e = stage_expert(st);
  if (e < 0) return;
  const GroupedExpert& ex = st.experts[e];
  const WeightDesc& wa = kGateUp ? ex.w1 : ex.w2;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;  // mma groupID, thread in group
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * 16;
  if (row0 >= wa.n) return;  // the whole block (n % 16 == 0, host check)
  __shared__ __align__(16) uint16_t xs[kTile][kStride];
  __shared__ int32_t in_rows[kTile];
  __shared__ float partial[kWarps - 1][2][4][32];  // warps 1.. : their sums, per lane
  const int32_t begin = st.layout.offsets[e], count = st.layout.counts[e];
  const int64_t K = wa.k;
  for (int32_t p0 = 0; p0 < count; p0 += kTile) {
    const int n = min(kTile, count - p0);
    __syncthreads();  // the previous tile's reads of in_rows / xs are done
    if (threadIdx.x < kTile) {
      const int32_t r = begin + p0 + (static_cast<int>(threadIdx.x) < n ? threadIdx.x : 0);
      // The pair's token, or its own row.
      in_rows[threadIdx.x] = kGateUp ? st.layout.row_pair[r] / st.top_k : r;
    }
    float acc_a[4] = {0.0f, 0.0f, 0.0f, 0.0f}, acc_b[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t kc = 0; kc < K; kc += kChunk) {
      const int64_t len = K - kc < kChunk ? K - kc : kChunk;  // a multiple of kPass
      __syncthreads();  // in_rows written; the previous chunk's reads done
      // Stage the tile's BF16 inputs, 16 bytes per copy. Rows of pairs past n are left as they
      // are: their mma columns are computed and dropped (columns are independent).
      for (int64_t i = threadIdx.x; i < n * (len / 8); i += blockDim.x) {
        const int tk = static_cast<int>(i / (len / 8));
        const int64_t k = (i % (len / 8)) * 8;
        *reinterpret_cast<uint4*>(&xs[tk][k]) =
            *reinterpret_cast<const uint4*>(in + in_rows[tk] * in_ld + kc + k);
      }
      __syncthreads();
      // FP4: four rows of codes are loaded before the first of their mma steps: w1 and w3 of
      // one pass (gate-up), or two passes of w2 (down). Each accumulator still takes its passes
      // in K order, so the sums are the same bits. FP8 codes take twice the registers: two rows
      // at a time (four spill under the 64-register bound).
      constexpr int64_t kStep = kWarps * kPass;
      constexpr bool kFourRows = kFp4;
      for (int64_t kp = warp * kPass; kp < len; kp += kGateUp || !kFourRows ? kStep : 2 * kStep) {
        const int64_t k0 = kc + kp + 32 * t;
        const uint16_t* x = &xs[g][kp + 32 * t];
        if constexpr (!kFourRows) {
          pass_128(load_row32<kFp4>(wa, row0 + g, k0), load_row32<kFp4>(wa, row0 + g + 8, k0), x,
                   acc_a);
          if constexpr (kGateUp) {
            pass_128(load_row32<kFp4>(ex.w3, row0 + g, k0),
                     load_row32<kFp4>(ex.w3, row0 + g + 8, k0), x, acc_b);
          }
        } else if constexpr (kGateUp) {
          const RowCodes<kFp4> alo = load_row32<kFp4>(wa, row0 + g, k0),
                               ahi = load_row32<kFp4>(wa, row0 + g + 8, k0),
                               blo = load_row32<kFp4>(ex.w3, row0 + g, k0),
                               bhi = load_row32<kFp4>(ex.w3, row0 + g + 8, k0);
          pass_128(alo, ahi, x, acc_a);
          pass_128(blo, bhi, x, acc_b);
        } else {
          const bool two = kp + kStep < len;
          const RowCodes<kFp4> lo = load_row32<kFp4>(wa, row0 + g, k0),
                               hi = load_row32<kFp4>(wa, row0 + g + 8, k0);
          RowCodes<kFp4> lo2, hi2;
          if (two) {
            lo2 = load_row32<kFp4>(wa, row0 + g, k0 + kStep);
            hi2 = load_row32<kFp4>(wa, row0 + g + 8, k0 + kStep);
          }
          pass_128(lo, hi, x, acc_a);
          if (two) pass_128(lo2, hi2, x + kStep, acc_a);
        }
      }
    }
    // The warps' partial sums, added in warp order by warp 0.
    if (warp > 0) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        partial[warp - 1][0][i][lane] = acc_a[i];
        partial[warp - 1][1][i][lane] = acc_b[i];
      }
    }
    __syncthreads();
    if (warp > 0) continue;
#pragma unroll
    for (int w = 0; w < kWarps - 1; ++w) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        acc_a[i] += partial[w][0][i][lane];
        acc_b[i] += partial[w][1][i][lane];
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

dim3 mma_grid(int max_active, int64_t rows) {
  return dim3(static_cast<unsigned>(max_active), static_cast<unsigned>((rows + 15) / 16));
}

}  // namespace

void launch_moe_gate_up_mma(const uint16_t* x, int64_t x_ld, const GroupedExpert* experts,
                            bool fp4, int64_t inter, MoeLayout l, int max_active,
                            const float* gates, int64_t gates_ld, int top_k, MoeEpilogue ep,
                            float* h, int64_t h_ld, cudaStream_t stream) {
  if (max_active <= 0) return;
  const GroupedStageArgs args{experts, l, gates, gates_ld, top_k, ep, h, h_ld};
  const dim3 grid = mma_grid(max_active, inter);
  if (fp4) {
    grouped_mma_kernel<true, true><<<grid, kWarps * 32, 0, stream>>>(x, x_ld, args);
  } else {
    grouped_mma_kernel<true, false><<<grid, kWarps * 32, 0, stream>>>(x, x_ld, args);
  }
}

void launch_moe_down_mma(const uint16_t* h, int64_t h_ld, const GroupedExpert* experts, bool fp4,
                         int64_t dim, MoeLayout l, int max_active, const float* gates,
                         int64_t gates_ld, int top_k, MoeEpilogue ep, float* y, int64_t y_ld,
                         cudaStream_t stream) {
  if (max_active <= 0) return;
  const GroupedStageArgs args{experts, l, gates, gates_ld, top_k, ep, y, y_ld};
  const dim3 grid = mma_grid(max_active, dim);
  if (fp4) {
    grouped_mma_kernel<false, true><<<grid, kWarps * 32, 0, stream>>>(h, h_ld, args);
  } else {
    grouped_mma_kernel<false, false><<<grid, kWarps * 32, 0, stream>>>(h, h_ld, args);
  }
}

}  // namespace deepinfer::kernels::cuda
