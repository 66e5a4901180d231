// Device pieces shared by the grouped MoE tensor-core stages (grouped_mma.cu: 16 weight rows
// per block, inputs from global memory; grouped_mma_wide.cu: 64 rows per block, inputs staged in
// shared memory): the block constants, the weight-code decode into exact BF16x2 operands and the
// mma step. grouped_mma.cu's header comment says why the operands are paired as they are; both
// kernels take every operand from here, so a pair's bits do not depend on which one runs.
#pragma once

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/mma_common.cuh"
#include "kernels/cuda/moe/grouped_common.cuh"

namespace deepinfer::kernels::cuda::grouped_mma {

constexpr int kWarps = 4;    // warps per block, splitting K
constexpr int kTile = 8;     // pairs per mma tile
constexpr int kPass = 128;   // K per register pass: 32 per thread of a quad, 8 mma steps

__device__ __forceinline__ uint32_t mul_bf16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// Pair i (< 4) of a word of 8 FP4 codes (nibble j = k 8c + j): codes i and i + 4 -> BF16x2 of
// value · 2^-126 (low half k 8c + i). Nibble i's magnitude bits 4i .. 4i + 2 go to 6 .. 8 and
// its sign 4i + 3 to 15; nibble i + 4 sits 16 bits higher and lands 16 bits higher.
template <int kI>
__device__ __forceinline__ uint32_t fp4_pair_placed(uint32_t w) {
  const uint32_t mag = (kI <= 1 ? w << (6 - 4 * kI) : w >> (4 * kI - 6)) & 0x01C001C0u;
  return mag | ((w << (12 - 4 * kI)) & 0x80008000u);
}
// Pair i of 8 FP8 codes in two words (w0: k 8c .. 8c + 3, w1: k 8c + 4 .. 8c + 7): byte i of
// each -> BF16x2 of value · 2^-120. The bytes go to bits 8 .. 15 and 24 .. 31 (signs in place),
// then the 7 magnitude bits move down 4.
template <int kI>
__device__ __forceinline__ uint32_t fp8_pair_placed(uint32_t w0, uint32_t w1) {
  const uint32_t p = __byte_perm(w0, w1, kI * 0x1111u + 0x4400u);
  return (p & 0x80008000u) | ((p >> 4) & 0x07F007F0u);
}

// The stored codes of w[row, k0 .. k0 + 32) of an FP4 / FP8 weight with E8M0 scales
// (k0 % 32 == 0) and the BF16x2 factor that turns a placed code (value · 2^-126 for FP4,
// value · 2^-120 for FP8) into value · scale. `one`: the factor is 2^126 · scale (2^120 · scale),
// a BF16 number when the E8M0 exponent e <= 128 (scale <= 2; FP8: e <= 134, scale <= 2^7):
// every real checkpoint. Else two multiplications, by 2^126 (2^120), then by scale itself.
// Codes are decoded right before their mma step, so a thread holds 4 (FP4) or 8 (FP8)
// registers of codes per row instead of 16 of values (occupancy).
template <bool kFp4>
struct RowCodes {
  uint32_t w[kFp4 ? 4 : 8];  // 32 codes: word c (FP4) or words 2c, 2c + 1 (FP8) = group c of 8
  uint32_t sc;               // BF16x2 factor (both halves)
  bool one;                  // one multiplication
};

// Where one weight row's codes and E8M0 scales start, found once per block (the descriptors
// live in global memory, and the scale column is a shift: no division inside the K loop).
struct Row {
  const uint8_t* codes;
  const uint8_t* scale;
  int kshift;  // log2(block_k): the host checks block_k is a power of two
};
template <bool kFp4>
__device__ __forceinline__ Row weight_row(const WeightDesc& d, int64_t row) {
  const int64_t srow = kFp4 ? row : row / d.block_n;
  return {static_cast<const uint8_t*>(d.w) + row * (kFp4 ? d.k / 2 : d.k),
          static_cast<const uint8_t*>(d.scale) + srow * d.scale_ld, __ffs(d.block_k) - 1};
}

// The factor of E8M0 exponent e for the row's codes.
template <bool kFp4>
__device__ __forceinline__ void set_scale(RowCodes<kFp4>& r, uint32_t e) {
  constexpr uint32_t kPlace = kFp4 ? 126 : 120;  // the placed code's power of two
  r.one = e <= 254 - kPlace;
  // One: 2^kPlace · 2^(e - 127) has BF16 exponent field e + kPlace. Two: the scale itself
  // (e8m0_to_f's values: e 255 is NaN; e 0, 2^-127, takes the one-multiplication form).
  const uint32_t b = r.one ? (e + kPlace) << 7 : (e == 255 ? 0x7fc0u : e << 7);
  r.sc = b | (b << 16);
}

template <bool kFp4>
__device__ __forceinline__ RowCodes<kFp4> load_row32(const Row& w, int64_t k0) {
  RowCodes<kFp4> r;
  const uint4* p = reinterpret_cast<const uint4*>(w.codes + (kFp4 ? k0 / 2 : k0));
  const uint4 b0 = __ldg(p);
  r.w[0] = b0.x, r.w[1] = b0.y, r.w[2] = b0.z, r.w[3] = b0.w;
  if constexpr (!kFp4) {
    const uint4 b1 = __ldg(p + 1);
    r.w[4] = b1.x, r.w[5] = b1.y, r.w[6] = b1.z, r.w[7] = b1.w;
  }
  set_scale(r, __ldg(w.scale + (k0 >> w.kshift)));
  return r;
}

// The row's codes for the two-multiplication form, which a warp takes when any of its rows needs
// it: a row that could take one multiplication gets the scale itself as its factor, not
// 2^kPlace · scale (e 0: 2^-127, a BF16 subnormal). Without this, such a row in a mixed warp
// came out 2^kPlace too large.
template <bool kFp4>
__device__ __forceinline__ RowCodes<kFp4> two_form(RowCodes<kFp4> c) {
  constexpr uint32_t kPlace = kFp4 ? 126 : 120;
  if (c.one) {
    const uint32_t e = ((c.sc >> 7) & 0xffu) - kPlace;
    const uint32_t b = e == 0 ? 0x0040u : e << 7;
    c.sc = b | (b << 16);
  }
  return c;
}

// Operand j (< 16, a compile-time constant) of the row's 32 codes as BF16x2, exact: group j / 4,
// pair j % 4 (k 8c + i and 8c + i + 4), the order the paired inputs are stored in.
template <bool kFp4, bool kOne, int kJ>
__device__ __forceinline__ uint32_t decode_pair(const RowCodes<kFp4>& c) {
  constexpr int kGroup = kJ / 4, kI = kJ % 4;
  uint32_t placed;
  if constexpr (kFp4) {
    placed = fp4_pair_placed<kI>(c.w[kGroup]);
  } else {
    placed = fp8_pair_placed<kI>(c.w[2 * kGroup], c.w[2 * kGroup + 1]);
  }
  if constexpr (kOne) return mul_bf16x2(placed, c.sc);
  constexpr uint32_t kUp = kFp4 ? 0x7e807e80u : 0x7b807b80u;  // 2^126 / 2^120 in both halves
  return mul_bf16x2(mul_bf16x2(placed, kUp), c.sc);
}

// This thread's mma rows g and g + 8 of the block's 16 weight rows from row0: of w1 / w2 (a)
// and of w3 (b, gate-up only; a's otherwise).
template <bool kFp4>
struct TileRows {
  Row alo, ahi, blo, bhi;
};
template <bool kGateUp, bool kFp4>
__device__ __forceinline__ TileRows<kFp4> tile_rows(const GroupedExpert& ex, int64_t row0, int g) {
  const WeightDesc& da = kGateUp ? ex.w1 : ex.w2;
  TileRows<kFp4> r{weight_row<kFp4>(da, row0 + g), weight_row<kFp4>(da, row0 + g + 8), {}, {}};
  r.blo = r.alo, r.bhi = r.ahi;
  if constexpr (kGateUp) {
    r.blo = weight_row<kFp4>(ex.w3, row0 + g);
    r.bhi = weight_row<kFp4>(ex.w3, row0 + g + 8);
  }
  return r;
}

// The wide form (grouped_mma_wide.cu: 64 weight rows per block, 64 pairs per chunk, inputs,
// codes and scales staged in shared memory): FP4 weights with 1x32 scale blocks (the caller
// checks the blocks) and rows % 64 == 0 only. The same bits as the kernels of grouped_mma.cu.
bool wide_stage_fits(bool fp4, int64_t rows);
void launch_wide_stage(bool gate_up, const uint16_t* in, int64_t in_ld,
                       const GroupedStageArgs& args, int max_active, int64_t rows,
                       cudaStream_t stream);

}  // namespace deepinfer::kernels::cuda::grouped_mma
