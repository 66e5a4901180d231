// Vectorisable inner loops of the opt backend (see kernels.h for the dispatch scheme).
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>

#include "backend/cpu/opt/kernels.h"
#include "base/check.h"
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "backend/quant.h"
#include "base/numeric_types.h"

// Not under ThreadSanitizer (GCC defines __SANITIZE_THREAD__): the clones' ifunc resolvers run
// while the dynamic loader relocates the binary, before the TSan runtime is initialised, and
// their instrumented code crashes there. A TSan build (CMakePresets.json: tsan) looks for races
// in the threading code around these loops, which is the same with either clone, so it keeps
// the baseline loops only.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(__SANITIZE_THREAD__)
#define DI_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define DI_SIMD_CLONES
#endif

namespace deepinfer::backend::cpu::opt {
namespace {

DI_SIMD_CLONES void bf16_row(const uint16_t* src, float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    out[i] = std::bit_cast<float>(static_cast<uint32_t>(src[i]) << 16);
}

// E4M3 byte -> value by bit arithmetic with integer selects (no table, no branches), so the
// loop vectorises: normals move the 4-bit exponent and 3-bit mantissa into FP32 position and
// rebias (+120); subnormals are m·2^-9. Byte 0x7f/0xff (NaN in E4M3) decodes to ±480 here;
// checkpoints never hold it (the ref backend decodes it to NaN).
DI_SIMD_CLONES void fp8_span_generic(const uint8_t* q, float s, float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t b = q[i];
    const uint32_t mag = b & 0x7fu;
    const uint32_t normal = (mag << 20) + (120u << 23);
    const uint32_t sub = std::bit_cast<uint32_t>(static_cast<float>(b & 7u) * (1.0f / 512.0f));
    const uint32_t mask = 0u - static_cast<uint32_t>(mag >= 8u);
    const uint32_t bits = (normal & mask) | (sub & ~mask) | ((b & 0x80u) << 24);
    out[i] = std::bit_cast<float>(bits) * s;
  }
}

// E2M1 code -> FP32 bits the same way: magnitudes >= 2 rebias (+126); 1 -> 0.5; 0 -> 0.
inline uint32_t fp4_bits(uint32_t c) {
  const uint32_t mag = c & 7u;
  const uint32_t normal = (mag << 22) + (126u << 23);
  const uint32_t m2 = 0u - static_cast<uint32_t>(mag >= 2u);
  const uint32_t m1 = 0u - static_cast<uint32_t>(mag == 1u);
  return (normal & m2) | (0x3f000000u & m1) | ((c & 8u) << 28);
}

DI_SIMD_CLONES void fp4_span_generic(const uint8_t* q, float s, float* out, int64_t nbytes) {
#pragma omp simd
  for (int64_t i = 0; i < nbytes; ++i) {
    const uint32_t b = q[i];
    out[2 * i] = std::bit_cast<float>(fp4_bits(b & 0xfu)) * s;
    out[2 * i + 1] = std::bit_cast<float>(fp4_bits(b >> 4)) * s;
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// AVX2 + F16C decoders, used when the CPU has them (checked once at run time). An E4M3 byte
// placed as FP16 bits (sign << 8 | magnitude << 7) is the same value times 2^-8, subnormals
// included, and vcvtph2ps widens eight at once (the 2^8 is folded into the power-of-two-exact
// scale product); an E2M1 code maps through a 16-entry vpshufb table straight to the high byte
// of its FP16 encoding. Results are bit-identical to the generic loops (tests/ops checks every
// byte value).
#define DI_X86_DECODE 1
// Sixteen E4M3 bytes -> sixteen floats times vs (which carries the 2^8).
__attribute__((target("avx2,f16c"), always_inline)) inline void widen16_e4m3_x86(__m128i bytes,
                                                                                 __m256 vs,
                                                                                 float* dst) {
  const __m256i w = _mm256_cvtepu8_epi16(bytes);
  const __m256i h =
      _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x80)), 8),
                      _mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x7f)), 7));
  _mm256_storeu_ps(dst, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h)), vs));
  _mm256_storeu_ps(dst + 8, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)), vs));
}

__attribute__((target("avx2,f16c"))) void fp8_span_x86(const uint8_t* q, float s, float* out,
                                                       int64_t n) {
  const __m256 vs = _mm256_set1_ps(s * 256.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    widen16_e4m3_x86(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i)), vs, out + i);
  }
  if (i < n) fp8_span_generic(q + i, s, out + i, n - i);
}

// E2M1 code -> high byte of its FP16 encoding (every E2M1 value has a zero low byte):
// 0, .5, 1, 1.5, 2, 3, 4, 6 -> 00 38 3C 3E 40 42 44 46, negatives with the sign bit.
__attribute__((target("avx2,f16c"), always_inline)) inline __m128i fp4_fp16_high_lut() {
  return _mm_setr_epi8(0x00, 0x38, 0x3C, 0x3E, 0x40, 0x42, 0x44, 0x46, static_cast<char>(0x80),
                       static_cast<char>(0xB8), static_cast<char>(0xBC), static_cast<char>(0xBE),
                       static_cast<char>(0xC0), static_cast<char>(0xC2), static_cast<char>(0xC4),
                       static_cast<char>(0xC6));
}

// Sixteen packed bytes -> 32 floats times vs: nibbles through the FP16 high-byte table, a zero
// low byte interleaved, vcvtph2ps.
__attribute__((target("avx2,f16c"), always_inline)) inline void widen32_fp4_x86(__m128i x,
                                                                                __m256 vs,
                                                                                float* dst) {
  const __m128i lut = fp4_fp16_high_lut(), nib = _mm_set1_epi8(0x0f), zero = _mm_setzero_si128();
  const __m128i lo = _mm_shuffle_epi8(lut, _mm_and_si128(x, nib));
  const __m128i hi = _mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(x, 4), nib));
  const __m128i e0 = _mm_unpacklo_epi8(lo, hi);  // columns 0..15 (FP16 high bytes)
  const __m128i e1 = _mm_unpackhi_epi8(lo, hi);  // columns 16..31
  _mm256_storeu_ps(dst, _mm256_mul_ps(_mm256_cvtph_ps(_mm_unpacklo_epi8(zero, e0)), vs));
  _mm256_storeu_ps(dst + 8, _mm256_mul_ps(_mm256_cvtph_ps(_mm_unpackhi_epi8(zero, e0)), vs));
  _mm256_storeu_ps(dst + 16, _mm256_mul_ps(_mm256_cvtph_ps(_mm_unpacklo_epi8(zero, e1)), vs));
  _mm256_storeu_ps(dst + 24, _mm256_mul_ps(_mm256_cvtph_ps(_mm_unpackhi_epi8(zero, e1)), vs));
}

__attribute__((target("avx2,f16c"))) void fp4_span_x86(const uint8_t* q, float s, float* out,
                                                       int64_t nbytes) {
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 16 <= nbytes; i += 16) {
    widen32_fp4_x86(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i)), vs, out + 2 * i);
  }
  if (i < nbytes) fp4_span_generic(q + i, s, out + 2 * i, nbytes - i);
}

// A whole FP4 row with 1x32 E8M0 blocks: 16 bytes -> 32 values per block, one scale each,
// no call per block (the per-block calls dominated the routed-expert decode).
__attribute__((target("avx2,f16c"))) void fp4_row32_x86(const uint8_t* q, const uint8_t* e8m0,
                                                        float* out, int64_t nblocks) {
  const float* table = kE8m0ToFloat.data();
  for (int64_t b = 0; b < nblocks; ++b) {
    widen32_fp4_x86(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16 * b)),
                    _mm256_set1_ps(table[e8m0[b]]), out + 32 * b);
  }
}

bool have_x86_decode() {
  static const bool ok = cpu_has_avx2_f16c();
  return ok;
}
#endif

void fp8_span(const uint8_t* q, float s, float* out, int64_t n) {
#ifdef DI_X86_DECODE
  if (have_x86_decode()) return fp8_span_x86(q, s, out, n);
#endif
  fp8_span_generic(q, s, out, n);
}

void fp4_span(const uint8_t* q, float s, float* out, int64_t nbytes) {
#ifdef DI_X86_DECODE
  if (have_x86_decode()) return fp4_span_x86(q, s, out, nbytes);
#endif
  fp4_span_generic(q, s, out, nbytes);
}

}  // namespace

DI_SIMD_CLONES void dot4x2(const float* x0, const float* x1, const float* w, int64_t ldw, int64_t n,
                           float* out0, float* out1) {
  const float* w0 = w;
  const float* w1 = w + ldw;
  const float* w2 = w + 2 * ldw;
  const float* w3 = w + 3 * ldw;
  float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f, b0 = 0.0f, b1 = 0.0f, b2 = 0.0f, b3 = 0.0f;
#pragma omp simd reduction(+ : a0, a1, a2, a3, b0, b1, b2, b3)
  for (int64_t i = 0; i < n; ++i) {
    const float u = x0[i], v = x1[i];
    const float c0 = w0[i], c1 = w1[i], c2 = w2[i], c3 = w3[i];
    a0 += u * c0;
    a1 += u * c1;
    a2 += u * c2;
    a3 += u * c3;
    b0 += v * c0;
    b1 += v * c1;
    b2 += v * c2;
    b3 += v * c3;
  }
  out0[0] = a0;
  out0[1] = a1;
  out0[2] = a2;
  out0[3] = a3;
  out1[0] = b0;
  out1[1] = b1;
  out1[2] = b2;
  out1[3] = b3;
}

DI_SIMD_CLONES float dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

DI_SIMD_CLONES void dot4(const float* x, const float* w, int64_t ldw, int64_t n, float* out) {
  const float* w0 = w;
  const float* w1 = w + ldw;
  const float* w2 = w + 2 * ldw;
  const float* w3 = w + 3 * ldw;
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
  for (int64_t i = 0; i < n; ++i) {
    const float xv = x[i];
    s0 += xv * w0[i];
    s1 += xv * w1[i];
    s2 += xv * w2[i];
    s3 += xv * w3[i];
  }
  out[0] = s0;
  out[1] = s1;
  out[2] = s2;
  out[3] = s3;
}

DI_SIMD_CLONES void axpy(float a, const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

DI_SIMD_CLONES void axpy2(float a0, const float* x0, float a1, const float* x1, float* y,
                          int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] += a0 * x0[i] + a1 * x1[i];
}

DI_SIMD_CLONES float sumsq(const float* x, int64_t n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += x[i] * x[i];
  return s;
}

DI_SIMD_CLONES void scale_to(const float* x, float s, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
}

DI_SIMD_CLONES float abs_max(const float* x, int64_t n) {
  float m = 0.0f;
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    m = a > m ? a : m;
  }
  return m;
}

// fp8_e4m3_round of backend/quant.h with integer selects: RNE to 3 mantissa bits on the FP32
// bits for normals, the 2^-9 grid (magic-number RNE) below 2^-6, saturation at 448, NaN kept.
DI_SIMD_CLONES void fp8_round_scaled(float* x, float inv_s, float s, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t vb = std::bit_cast<uint32_t>(x[i] * inv_s);
    const uint32_t ab = vb & 0x7fffffffu;
    const uint32_t cb = ab < 0x43e00000u ? ab : 0x43e00000u;  // min(|v|, 448) on the bits
    const uint32_t nb = (cb + 0x7ffffu + ((cb >> 20) & 1u)) & ~0xfffffu;
    const float a512 = std::bit_cast<float>(cb) * 512.0f;
    const float sub = ((a512 + 12582912.0f) - 12582912.0f) * (1.0f / 512.0f);
    const uint32_t ms = 0u - static_cast<uint32_t>(cb < 0x3c800000u);  // below 2^-6
    const uint32_t mn = 0u - static_cast<uint32_t>(ab > 0x7f800000u);  // NaN
    const uint32_t r = (((std::bit_cast<uint32_t>(sub) & ms) | (nb & ~ms)) | (vb & 0x80000000u));
    x[i] = std::bit_cast<float>((vb & mn) | (r & ~mn)) * s;
  }
}

void fake_quant_fp8_block(float* x, int64_t n) {
  const float s = pow2_scale(abs_max(x, n), kFp8Max);
  fp8_round_scaled(x, 1.0f / s, s, n);
}

void dequant_range(const WeightRef& w, int64_t row, int64_t k0, int64_t len, float* out) {
  const int64_t K = w.k;
  switch (w.format) {
    case WeightFormat::kDense:
      if (w.weight.dtype == DType::kBF16) {
        bf16_row(w.weight.ptr<uint16_t>() + row * K + k0, out, len);
      } else if (w.weight.dtype == DType::kF32) {
        const float* src = w.weight.ptr<float>() + row * K + k0;
        for (int64_t i = 0; i < len; ++i) out[i] = src[i];
      } else {
        const uint16_t* src = w.weight.ptr<uint16_t>() + row * K + k0;
        for (int64_t i = 0; i < len; ++i) out[i] = fp16_to_float(src[i]);
      }
      return;
    case WeightFormat::kFp8: {
      DI_CHECK(k0 % w.block_k == 0);
      const uint8_t* q = w.weight.ptr<uint8_t>() + row * K;
      const int64_t srow = (row / w.block_n) * w.scale.shape[1];
      for (int64_t k = k0; k < k0 + len; k += w.block_k) {
        const int64_t n = std::min<int64_t>(w.block_k, k0 + len - k);
        fp8_span(q + k, scale_value(w.scale, srow + k / w.block_k), out + (k - k0), n);
      }
      return;
    }
    case WeightFormat::kFp4: {
      DI_CHECK(k0 % w.block_k == 0 && k0 % 2 == 0);
      const uint8_t* q = w.weight.ptr<uint8_t>() + row * (K / 2);
      const int64_t srow = row * w.scale.shape[1];
#ifdef DI_X86_DECODE
      if (w.block_k == 32 && len % 32 == 0 && w.scale.dtype == DType::kF8E8M0 &&
          have_x86_decode()) {
        fp4_row32_x86(q + k0 / 2, w.scale.ptr<uint8_t>() + srow + k0 / 32, out, len / 32);
        return;
      }
#endif
      for (int64_t k = k0; k < k0 + len; k += w.block_k) {
        const int64_t n = std::min<int64_t>(w.block_k, k0 + len - k);
        fp4_span(q + k / 2, scale_value(w.scale, srow + k / w.block_k), out + (k - k0), n / 2);
      }
      return;
    }
  }
}

void dequant_row(const WeightRef& w, int64_t row, float* out) {
  dequant_range(w, row, 0, w.k, out);
}

#if defined(__x86_64__)
bool cpu_has_avx2_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) != 0 &&
         (c & bit_F16C) != 0;
}
#endif

}  // namespace deepinfer::backend::cpu::opt
