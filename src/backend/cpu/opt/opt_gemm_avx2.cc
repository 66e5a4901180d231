// OptOps' GEMM on x86-64 CPUs with AVX2 + FMA (+F16C) and no AVX-512: a register-blocked,
// cache-blocked dot-product kernel (see gemm_avx2.h for the interface).
//
// Why a dot-product (not an outer-product, packed-panel) kernel: decode (M = 1) must stream the
// weights as stored, and batch invariance needs every row's value computed the same way for every
// M. Here each (x row, weight row) pair is, in every block shape, one 8-lane FMA accumulator over
// the columns of a K chunk in order (masked tail), reduced by one fixed tree (hsum4), the chunk
// sums added in chunk order (the first assigns). So prefill, decode and chunked prefill give the
// same bits, for any thread split, and the block shape is free to follow the register budget:
//   * 4 x rows x 3 weight rows = 12 accumulators + 3 weight vectors + 1 x vector = the 16 YMM
//     registers; 7 loads per 12 FMAs keep Zen's two FMA pipes, not its load ports, the limit
//     (the previous 2 x 4 `omp simd` kernel needed 6 loads per 8 FMAs and was load-bound);
//   * 1-2 x rows x 4 weight rows for decode and the M tail (memory-bound: more streams in flight).
// Cache blocking: a task owns kAvx2TileN (48) weight rows; for each K chunk (all of K up to 1024
// columns, else ~512-column runs of whole scale blocks: a function of K and the format only, never
// of M) the tile's weight chunk (<= 192 KiB FP32: L2) is decoded once (FP8/FP4, and BF16/FP16 when
// M > kFusedMaxRows) or read in place (FP32; BF16/FP16 widened in the loads for few rows), then
// every 4-row block of x (<= 16 KiB: L1) passes over it, so each weight byte is decoded once per
// call and x is re-read from L2/L3 once per 48 weight rows. Measured (bench/model_cpu/NOTES.md):
// ~45 GMAC/s on one Zen 3 core (~90% of its FMA peak) at K = 512-768, ~84 on two.
#include <algorithm>
#include <vector>

#include "backend/cpu/opt/gemm_avx2.h"
#include "backend/cpu/opt/kernels.h"
#include "base/check.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define DI_HAVE_AVX2_GEMM 1
#define DI_AVX2 __attribute__((target("avx2,fma,f16c")))
#endif

namespace deepinfer::backend::cpu::opt {

#ifndef DI_HAVE_AVX2_GEMM
bool have_avx2_fma() { return false; }
void gemm_avx2(CMat, const WeightRef&, Mat, int64_t, int64_t) { DI_CHECK(false && "no AVX2"); }
void gemm_f32_avx2(CMat, CMat, Mat) { DI_CHECK(false && "no AVX2"); }
#else

bool have_avx2_fma() {
  static const bool yes = __builtin_cpu_supports("fma") && cpu_has_avx2_f16c();
  return yes;
}

namespace {

constexpr int64_t kChunkK = 512;
constexpr int64_t kMaxOneChunkK = 1024;
// Up to this many x rows, dense BF16/FP16 weights are widened in the kernel's loads (no scratch
// round trip: decode reads half the bytes of FP32); more rows amortise one decode per chunk.
constexpr int64_t kFusedMaxRows = 4;

enum class WLoad { kF32, kBf16, kF16 };

template <WLoad L>
constexpr int64_t kWBytes = L == WLoad::kF32 ? 4 : 2;

// Eight weight columns as FP32: in place, or widened exactly from BF16 (high half of an FP32) or
// FP16 (vcvtph2ps) — the values a scratch decode would store, so the FMAs are the same.
template <WLoad L>
DI_AVX2 inline __m256 load_w8(const char* p) {
  if constexpr (L == WLoad::kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (L == WLoad::kBf16) {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    } else {
      return _mm256_cvtph_ps(h);
    }
  }
}

// Lane mask for the first n (< 8) lanes.
DI_AVX2 inline __m256i tail_mask(int64_t n) {
  static const int32_t bits[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits + 8 - n));
}

// The masked tail (zeros beyond n): FP32 by vmaskmov; 16-bit formats through a zeroed copy.
template <WLoad L>
DI_AVX2 inline __m256 load_w8_tail(const char* p, int64_t n, __m256i mask) {
  if constexpr (L == WLoad::kF32) {
    return _mm256_maskload_ps(reinterpret_cast<const float*>(p), mask);
  } else {
    alignas(16) uint16_t t[8] = {};
    std::copy_n(reinterpret_cast<const uint16_t*>(p), n, t);
    return load_w8<L>(reinterpret_cast<const char*>(t));
  }
}

// out[j] = ((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7)) of each of four vectors: the one
// reduction tree of this path (lanes of different vectors never mix, so which vectors share a
// call does not change any result).
DI_AVX2 inline __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 ab = _mm256_hadd_ps(a, b);  // a01 a23 b01 b23 | a45 a67 b45 b67
  const __m256 cd = _mm256_hadd_ps(c, d);
  const __m256 t = _mm256_hadd_ps(ab, cd);  // a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7
  return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

// The first G of four lanes.
alignas(16) constexpr int32_t kRowMask[8] = {-1, -1, -1, -1, 0, 0, 0, 0};

// y[r][g] = (first ? 0 : y[r][g]) + x_r · w_g over [0, len) for R x rows and G weight rows of
// kind L.
template <int R, int G, WLoad L>
DI_AVX2 inline void dot_block(const float* const* x, const char* const* w, int64_t len,
                              float* const* y, bool first) {
  __m256 acc[R * G];
#pragma GCC unroll 16
  for (int i = 0; i < R * G; ++i) acc[i] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= len; k += 8) {
    __m256 wv[G];
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) wv[g] = load_w8<L>(w[g] + k * kWBytes<L>);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256 xv = _mm256_loadu_ps(x[r] + k);
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) acc[r * G + g] = _mm256_fmadd_ps(xv, wv[g], acc[r * G + g]);
    }
  }
  if (k < len) {
    const __m256i mask = tail_mask(len - k);
    __m256 wv[G];
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) wv[g] = load_w8_tail<L>(w[g] + k * kWBytes<L>, len - k, mask);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256 xv = _mm256_maskload_ps(x[r] + k, mask);
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) acc[r * G + g] = _mm256_fmadd_ps(xv, wv[g], acc[r * G + g]);
    }
  }
  // Row r's G sums in one hsum4 (unused lanes get zero vectors), stored straight into y:
  // y = sum (first chunk) or y + sum, G floats per row (masked when G < 4).
  const __m256 z = _mm256_setzero_ps();
  const __m128i mask = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kRowMask + 4 - G));
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    __m128 sum = hsum4(acc[r * G], G > 1 ? acc[r * G + 1] : z, G > 2 ? acc[r * G + 2] : z,
                       G > 3 ? acc[r * G + 3] : z);
    if (!first) sum = _mm_add_ps(_mm_maskload_ps(y[r], mask), sum);
    if constexpr (G == 4) {
      _mm_storeu_ps(y[r], sum);
    } else {
      _mm_maskstore_ps(y[r], mask, sum);
    }
  }
}

template <int R, WLoad L>
DI_AVX2 inline void dot_rows(const float* const* x, const char* const* w, int g, int64_t len,
                             float* const* y, bool first) {
  switch (g) {
    case 1:
      dot_block<R, 1, L>(x, w, len, y, first);
      break;
    case 2:
      dot_block<R, 2, L>(x, w, len, y, first);
      break;
    case 3:
      dot_block<R, 3, L>(x, w, len, y, first);
      break;
    default:
      if constexpr (R <= 2) dot_block<R, 4, L>(x, w, len, y, first);
      break;
  }
}

// One K chunk [k0, k0 + len) of nn weight rows (w[j] points at column k0 of row n + j) against
// every x row: y[m, n + j] = (first ? 0 : y[m, n + j]) + chunk dot.
template <WLoad L>
DI_AVX2 void chunk(CMat x, int64_t k0, const char* const* w, int64_t nn, int64_t len, Mat y,
                   int64_t n, bool first) {
  const int64_t M = x.rows;
  for (int64_t m = 0; m < M; m += 4) {
    const int rows = static_cast<int>(std::min<int64_t>(4, M - m));
    const float* xr[4];
    for (int r = 0; r < rows; ++r) xr[r] = x.row(m + r) + k0;
    const int64_t G = rows >= 3 ? 3 : 4;
    for (int64_t j = 0; j < nn; j += G) {
      const int g = static_cast<int>(std::min(G, nn - j));
      float* yr[4];
      for (int r = 0; r < rows; ++r) yr[r] = y.row(m + r) + n + j;
      switch (rows) {
        case 4:
          dot_rows<4, L>(xr, w + j, g, len, yr, first);
          break;
        case 3:
          dot_rows<3, L>(xr, w + j, g, len, yr, first);
          break;
        case 2:
          dot_rows<2, L>(xr, w + j, g, len, yr, first);
          break;
        default:
          dot_rows<1, L>(xr, w + j, g, len, yr, first);
          break;
      }
    }
  }
}

std::vector<float>& scratch(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf;
}

}  // namespace

void gemm_avx2(CMat x, const WeightRef& w, Mat y, int64_t n0, int64_t n1) {
  DI_CHECK(n0 % kAvx2TileN == 0 && n1 <= w.n);
  const int64_t K = w.k, M = x.rows;
  const int64_t bk = w.quantized() ? w.block_k : 1;
  // One chunk when K is short enough for the tile's weights to stay in L2 (one reduction per
  // pair instead of two at K = 768); else whole scale blocks of ~kChunkK columns. A function of
  // K and the format only, never of M, so every batch size sums in the same order.
  const int64_t kc = K <= kMaxOneChunkK ? K : bk * std::max<int64_t>(1, kChunkK / bk);
  const bool dense = w.format == WeightFormat::kDense;
  const bool f32 = dense && w.weight.dtype == DType::kF32;
  const bool bf16 = dense && w.weight.dtype == DType::kBF16;
  const bool f16 = dense && w.weight.dtype == DType::kF16;
  const bool fused = (bf16 || f16) && M <= kFusedMaxRows;
  float* buf = f32 || fused ? nullptr : scratch(static_cast<size_t>(kAvx2TileN * kc)).data();
  const char* wr[kAvx2TileN];
  for (int64_t n = n0; n < n1; n += kAvx2TileN) {
    const int64_t nn = std::min(kAvx2TileN, n1 - n);
    for (int64_t k0 = 0; k0 < K; k0 += kc) {
      const int64_t len = std::min(kc, K - k0);
      const bool first = k0 == 0;
      if (f32) {
        for (int64_t j = 0; j < nn; ++j)
          wr[j] = reinterpret_cast<const char*>(w.weight.ptr<float>() + (n + j) * K + k0);
        chunk<WLoad::kF32>(x, k0, wr, nn, len, y, n, first);
      } else if (fused) {
        for (int64_t j = 0; j < nn; ++j)
          wr[j] = reinterpret_cast<const char*>(w.weight.ptr<uint16_t>() + (n + j) * K + k0);
        if (bf16) {
          chunk<WLoad::kBf16>(x, k0, wr, nn, len, y, n, first);
        } else {
          chunk<WLoad::kF16>(x, k0, wr, nn, len, y, n, first);
        }
      } else {
        for (int64_t j = 0; j < nn; ++j) {
          dequant_range(w, n + j, k0, len, buf + j * kc);
          wr[j] = reinterpret_cast<const char*>(buf + j * kc);
        }
        chunk<WLoad::kF32>(x, k0, wr, nn, len, y, n, first);
      }
    }
  }
}

void gemm_f32_avx2(CMat x, CMat w, Mat y) {
  DI_CHECK(x.cols == w.cols && y.rows == x.rows && y.cols == w.rows);
  const int64_t K = x.cols;
  const int64_t kc = K <= kMaxOneChunkK ? K : kChunkK;
  const char* wr[kAvx2TileN];
  for (int64_t n = 0; n < w.rows; n += kAvx2TileN) {
    const int64_t nn = std::min(kAvx2TileN, w.rows - n);
    for (int64_t k0 = 0; k0 < K; k0 += kc) {
      for (int64_t j = 0; j < nn; ++j) wr[j] = reinterpret_cast<const char*>(w.row(n + j) + k0);
      chunk<WLoad::kF32>(x, k0, wr, nn, std::min(kc, K - k0), y, n, k0 == 0);
    }
  }
}

#endif  // DI_HAVE_AVX2_GEMM

}  // namespace deepinfer::backend::cpu::opt
