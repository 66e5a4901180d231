// Vectorised transcendental loops of the opt backend: e^x and the SwiGLU row built on it.
//
// std::exp is a scalar libm call (~8% of a tiny-model prefill, in softmax and SwiGLU). On CPUs
// with AVX2 + FMA (checked once) eight lanes go at a time: n = round(x·log2 e), r = x - n·ln 2
// in two parts (Cody-Waite: n·ln2_hi is exact for |n| <= 127), e^r by its Taylor series to r^7
// (|r| <= ln2 / 2, truncation < 6e-9 relative, below the FP32 ulp), scaled by 2^n through the
// exponent bits. Within ~2 ulp of libm; x below ln(FLT_MIN) gives 0, above ln(FLT_MAX) +inf,
// NaN stays NaN. Elementwise, so a row's results never depend on the batch or the split.
#include <algorithm>
#include <cmath>

#include "backend/cpu/opt/kernels.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define DI_MATH_AVX2 1
#define DI_AVX2_FMA __attribute__((target("avx2,fma")))
#endif

namespace deepinfer::backend::cpu::opt {
namespace {

#ifdef DI_MATH_AVX2
bool have_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

DI_AVX2_FMA inline __m256 exp8(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.3365478515625f);  // ln(FLT_MIN)
  const __m256 hi = _mm256_set1_ps(88.3762626647949f);   // ln(FLT_MAX)
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
  y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
  return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

DI_AVX2_FMA void exp_avx2(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i)));
  if (i < n) {  // the tail through a padded copy, so it gets the same polynomial
    alignas(32) float t[8] = {};
    std::copy(x + i, x + n, t);
    _mm256_store_ps(t, exp8(_mm256_load_ps(t)));
    std::copy(t, t + (n - i), y + i);
  }
}

// SiLU(u) · v on eight lanes, u and v already clamped.
DI_AVX2_FMA inline __m256 swiglu8(__m256 u, __m256 v) {
  const __m256 e = exp8(_mm256_xor_ps(u, _mm256_set1_ps(-0.0f)));
  return _mm256_mul_ps(_mm256_div_ps(u, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), v);
}

DI_AVX2_FMA void swiglu_avx2(const float* a, const float* b, float limit, float* out, int64_t n) {
  const bool clamp = limit > 0.0f;
  const __m256 lim = _mm256_set1_ps(limit), nlim = _mm256_set1_ps(-limit);
  int64_t i = 0;
  for (; i < n; i += 8) {
    __m256 u, v;
    alignas(32) float ta[8] = {}, tb[8] = {};
    const bool full = i + 8 <= n;
    if (full) {
      u = _mm256_loadu_ps(a + i);
      v = _mm256_loadu_ps(b + i);
    } else {  // the tail through padded copies, so it gets the same arithmetic
      std::copy(a + i, a + n, ta);
      std::copy(b + i, b + n, tb);
      u = _mm256_load_ps(ta);
      v = _mm256_load_ps(tb);
    }
    if (clamp) {
      u = _mm256_min_ps(u, lim);
      v = _mm256_min_ps(_mm256_max_ps(v, nlim), lim);
    }
    const __m256 o = swiglu8(u, v);
    if (full) {
      _mm256_storeu_ps(out + i, o);
    } else {
      _mm256_store_ps(ta, o);
      std::copy(ta, ta + (n - i), out + i);
    }
  }
}
DI_AVX2_FMA void relu_weighted_sum_avx2(const float* dots, int64_t ld, int64_t n_heads,
                                        const float* w, int64_t n, float* out) {
  const __m256 zero = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 acc = zero;
    for (int64_t h = 0; h < n_heads; ++h) {
      // max(0, d) = (0 > d) ? 0 : d, i.e. std::max(d, 0.0f) (vmaxps returns its second operand
      // when the comparison is false: -0 and NaN pass through).
      const __m256 r = _mm256_max_ps(zero, _mm256_loadu_ps(dots + h * ld + j));
      acc = _mm256_add_ps(acc, _mm256_mul_ps(r, _mm256_set1_ps(w[h])));
    }
    _mm256_storeu_ps(out + j, acc);
  }
  if (j < n) {
    // The last n - j keys through the same vector operations as the body, masked: a scalar
    // tail here would be contracted into FMAs (this function is compiled for FMA), and a key's
    // score would then depend on its position in the call (a page boundary of the KV cache).
    alignas(32) int32_t lanes[8];
    for (int i = 0; i < 8; ++i) lanes[i] = j + i < n ? -1 : 0;
    const __m256i mask = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes));
    __m256 acc = zero;
    for (int64_t h = 0; h < n_heads; ++h) {
      const __m256 r = _mm256_max_ps(zero, _mm256_maskload_ps(dots + h * ld + j, mask));
      acc = _mm256_add_ps(acc, _mm256_mul_ps(r, _mm256_set1_ps(w[h])));
    }
    _mm256_maskstore_ps(out + j, mask, acc);
  }
}
#endif

}  // namespace

void relu_weighted_sum(const float* dots, int64_t ld, int64_t n_heads, const float* w, int64_t n,
                       float* out) {
#ifdef DI_MATH_AVX2
  if (have_avx2()) return relu_weighted_sum_avx2(dots, ld, n_heads, w, n, out);
#endif
  for (int64_t j = 0; j < n; ++j) {
    float s = 0.0f;
    for (int64_t h = 0; h < n_heads; ++h) s += std::max(dots[h * ld + j], 0.0f) * w[h];
    out[j] = s;
  }
}

void exp_to(const float* x, float* y, int64_t n) {
#ifdef DI_MATH_AVX2
  if (have_avx2()) return exp_avx2(x, y, n);
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}

void swiglu_row(const float* a, const float* b, float limit, float* out, int64_t n) {
#ifdef DI_MATH_AVX2
  if (have_avx2()) return swiglu_avx2(a, b, limit, out, n);
#endif
  const bool clamp = limit > 0.0f;
  for (int64_t c = 0; c < n; ++c) {
    const float u = clamp ? std::min(a[c], limit) : a[c];
    const float v = clamp ? std::clamp(b[c], -limit, limit) : b[c];
    out[c] = u / (1.0f + std::exp(-u)) * v;
  }
}

}  // namespace deepinfer::backend::cpu::opt
